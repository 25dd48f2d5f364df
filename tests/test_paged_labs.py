"""The block-tables and paged-equivalence labs, checked against hand-counted block tables."""
from __future__ import annotations

from kvweb.labs.block_tables import BlockTables
from kvweb.labs.paged_equivalence import PagedEquivalence


def test_block_tables_default_by_hand() -> None:
    # Block size 8, sequential pool of 12. Prefill: 20 tokens -> blocks [0, 1, 2] (last holds 4),
    # 24 tokens -> [3, 4, 5] (full). Request 1's 25th token needs block 6 at decode step 1;
    # request 0's 25th token needs block 7 at decode step 5. After 12 decode steps: 32 tokens in
    # 4 full blocks and 36 tokens in 5 blocks (last holds 4): 9 used, 3 free.
    r = BlockTables().run()
    assert r["identical"]
    steps = r["steps"]
    tables = [[(s["tokens"], s["block_table"], s["last_block_fill"]) for s in step["sequences"]] for step in steps]
    assert tables[0] == [(20, [0, 1, 2], 4), (24, [3, 4, 5], 8)]
    assert tables[1] == [(21, [0, 1, 2], 5), (25, [3, 4, 5, 6], 1)]
    assert tables[5][0] == (25, [0, 1, 2, 7], 1)
    assert tables[12] == [(32, [0, 1, 2, 7], 8), (36, [3, 4, 5, 6, 8], 4)]
    assert [s["free_blocks"] for s in steps][:2] == [6, 5] and steps[12]["free_blocks"] == 3
    assert len(steps) == 13  # the prefill and 12 decode steps


def test_block_tables_shuffled_scatters_blocks_but_not_tokens() -> None:
    plain, shuffled = BlockTables().run(), BlockTables(shuffle=True).run()
    assert shuffled["identical"]
    assert [r["answer"] for r in plain["requests"]] == [r["answer"] for r in shuffled["requests"]]
    last = shuffled["steps"][-1]["sequences"]
    assert [len(s["block_table"]) for s in last] == [4, 5]
    assert [s["block_table"] for s in last] != [[0, 1, 2, 7], [3, 4, 5, 6, 8]]


def test_paged_equivalence_lab_covers_every_configuration() -> None:
    r = PagedEquivalence(requests=3, prompt_len=6, output_len=5, arrival_gap=1, block_size=2).run()
    assert r["identical"]
    assert [(x["block_size"], x["shuffle"]) for x in r["runs"]] == [
        (None, False), (1, False), (1, True), (2, False), (2, True), (4, False), (4, True), (16, False), (16, True)]
    assert all(x["identical"] for x in r["runs"])
