"""The block-tables and paged-equivalence labs, checked against hand-counted block tables."""

from __future__ import annotations

from kvweb.labs.block_tables import BlockTables
from kvweb.labs.paged_equivalence import PagedEquivalence


def test_block_tables_default_by_hand() -> None:
    # Block size 8, sequential pool of 12. Prefill: 20 tokens -> blocks [0, 1, 2] (last holds 4),
    # 24 tokens -> [3, 4, 5] (full). Request 1's 25th token needs block 6 at decode step 1;
    # request 0's 25th token needs block 7 at decode step 5. After 12 decode steps: 32 tokens in
    # 4 full blocks and 36 tokens in 5 blocks (last holds 4): 9 used, 3 free.
    r = BlockTables(shuffle=False).run()
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
    plain, shuffled = BlockTables(shuffle=False).run(), BlockTables().run()  # shuffled is the default
    assert shuffled["identical"]
    assert [r["answer"] for r in plain["requests"]] == [r["answer"] for r in shuffled["requests"]]
    last = shuffled["steps"][-1]["sequences"]
    assert [len(s["block_table"]) for s in last] == [4, 5]
    assert [s["block_table"] for s in last] != [[0, 1, 2, 7], [3, 4, 5, 6, 8]]


def test_paged_equivalence_lab_covers_every_configuration() -> None:
    r = PagedEquivalence(requests=3, prompt_len=6, output_len=5, arrival_gap=1, block_size=2).run()
    assert r["identical"]
    assert [(x["block_size"], x["shuffle"]) for x in r["runs"]] == [
        (None, False),
        (1, False),
        (1, True),
        (2, False),
        (2, True),
        (4, False),
        (4, True),
        (16, False),
        (16, True),
    ]
    assert all(x["identical"] for x in r["runs"])


def test_paged_equivalence_rows_contiguous_against_paged() -> None:
    # Requests of 6+5 and 9+5 tokens arriving 16 iterations apart never overlap (each runs 6
    # iterations). Block size 1 holds exactly one row per token, as the contiguous cache does; a
    # larger block rounds each live request up to whole blocks, so it holds at least as many rows.
    r = PagedEquivalence(requests=2, prompt_len=6, output_len=5, arrival_gap=16, block_size=4).run()
    rows = {(x["block_size"], x["shuffle"]): x["peak_rows"] for x in r["runs"]}
    # one request at a time: the longer one, 9 + 5 = 14 tokens, is the peak
    assert rows[(None, False)] == 14 and rows[(1, False)] == rows[(1, True)] == 14
    assert rows[(4, False)] == 16 and rows[(16, True)] == 16  # ceil(14/4) * 4, one block of 16
    r = PagedEquivalence(requests=3, prompt_len=6, output_len=5, arrival_gap=1, block_size=3).run()
    contiguous = r["runs"][0]["peak_rows"]
    assert contiguous > 0 and all(x["peak_rows"] >= contiguous for x in r["runs"])
    assert [x["peak_rows"] for x in r["runs"] if x["block_size"] == 1] == [contiguous] * 2


def test_block_contents_spell_each_request_in_table_order() -> None:
    # Shuffled blocks scatter the text over the pool; read through a block table, the
    # characters of a request's blocks spell its prompt and the answer so far, at every step.
    r = BlockTables(prompt_a=11, prompt_b=5, decode_steps=6, block_size=4, num_blocks=10).run()
    texts = {q["seq"]: q["prompt"] + q["answer"] for q in r["requests"]}
    for step in r["steps"]:
        text_of = {b["block"]: b["text"] for b in step["blocks"]}
        for s in step["sequences"]:
            spelled = "".join(text_of[b] for b in s["block_table"])
            assert spelled == texts[s["seq"]][: s["tokens"]] == "".join(s["texts"])
    assert r["steps"][0]["sequences"][0]["texts"] == ["The ", "quic", "k b"]  # 11 = 4 + 4 + 3


def test_block_tables_opens_on_a_decode_step_that_takes_a_block() -> None:
    # defaults: request 1 (24 prompt tokens, 3 full blocks) takes its fourth block at decode step 1
    r = BlockTables().run()
    assert r["opening_step"] == 1
    assert [e["kind"] for e in r["steps"][1]["events"]] == ["allocate"]
