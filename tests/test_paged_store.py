"""PagedStore: paged attention, equivalence with the contiguous cache, and the pool + CoW invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.kv.batching import Engine, Request
from kvweb.kv.block_pool import BlockPool, OutOfBlocks
from kvweb.kv.contiguous_store import ContiguousStore
from kvweb.kv.generate import generate_alone
from kvweb.kv.model import MiniModel, causal_attention
from kvweb.kv.paged_store import PagedStore, Tracer, paged_attention, thin
from kvweb.kv.prompts import make_prompt

MODEL = MiniModel()


def staggered_requests() -> list[Request]:
    """Prompts of 5, 13, 21 and 2 tokens arriving at iterations 0, 1, 3, 3: prefills land in
    the middle of other requests' decodes, and lengths cross block edges at different steps."""
    lengths, arrivals = (5, 13, 21, 2), (0, 1, 3, 3)
    return [Request(make_prompt(n, i), 9, seed=10 + i, arrival=a) for i, (n, a) in enumerate(zip(lengths, arrivals))]


def alone(requests: list[Request]) -> list[list[int]]:
    return [generate_alone(MODEL, r.prompt, r.max_new, r.seed) for r in requests]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_paged_batching_equals_generating_alone(block_size: int, shuffle: bool) -> None:
    requests = staggered_requests()
    store = PagedStore.for_model(MODEL, block_size, 80, shuffle, seed=7)  # 77 at block size 1
    assert Engine(MODEL, store).run(requests) == alone(requests)
    assert store.pool.num_free == 80  # every finished request gave its blocks back


def test_contiguous_batching_equals_generating_alone() -> None:
    requests = staggered_requests()
    assert Engine(MODEL, ContiguousStore(MODEL.config.layers)).run(requests) == alone(requests)


def test_shuffled_pool_puts_sequences_elsewhere_but_changes_no_token() -> None:
    def run(shuffle: bool) -> tuple[list[list[int]], list[list[int]]]:
        store = PagedStore.for_model(MODEL, 4, 64, shuffle, seed=3)
        tracer = Tracer(store)
        out = Engine(MODEL, store, on_step=tracer).run(staggered_requests())
        return out, [s["block_table"] for s in tracer.steps[-1]["sequences"]]

    (out_seq, tables_seq), (out_shuf, tables_shuf) = run(False), run(True)
    assert out_seq == out_shuf
    assert tables_seq != tables_shuf


@pytest.mark.parametrize("block_size,length,n", [(1, 7, 1), (4, 9, 1), (4, 12, 12), (8, 21, 5), (16, 3, 3)])
def test_paged_attention_equals_contiguous_attention(block_size: int, length: int, n: int) -> None:
    rng = np.random.default_rng(length)
    k, v = rng.standard_normal((2, length, 2, 4))
    q = rng.standard_normal((n, 2, 4))
    nb = -(-length // block_size)
    table = rng.permutation(10)[:nb]  # scattered physical blocks
    k_pool = rng.standard_normal((10, block_size, 2, 4))  # garbage everywhere else...
    v_pool = rng.standard_normal((10, block_size, 2, 4))
    position = np.arange(length)
    k_pool[table[position // block_size], position % block_size] = k
    v_pool[table[position // block_size], position % block_size] = v
    # ...including the unfilled rows of the last block, which must not count
    got = paged_attention(q, k_pool, v_pool, table.tolist(), length, block_size)
    np.testing.assert_array_equal(got, causal_attention(q, k, v))  # same rows, same sums: bit for bit


def test_paged_logits_equal_contiguous_logits_bit_for_bit() -> None:
    paged = PagedStore.for_model(MODEL, 3, 16, shuffle=True)
    contiguous = ContiguousStore(MODEL.config.layers)
    for store in (paged, contiguous):
        store.add(0)
        store.add(1)
    batches = [([0], [make_prompt(7)]), ([0, 1], [[5], make_prompt(4, 1)]), ([1, 0], [[9], [8]])]
    for seqs, tokens in batches:
        np.testing.assert_array_equal(
            MODEL.forward_batch(paged, seqs, tokens), MODEL.forward_batch(contiguous, seqs, tokens)
        )


def test_blocks_are_allocated_only_when_the_last_is_full() -> None:
    store = PagedStore(layers=1, heads=1, head_dim=1, block_size=4, num_blocks=8)
    store.add(0)
    sizes = []
    for n in (3, 1, 1, 4, 2):  # lengths 3, 4, 5, 9, 11
        append(store, 0, n)
        sizes.append(len(store.block_table(0)))
    assert sizes == [1, 1, 2, 3, 3]
    assert store.snapshot()["sequences"][0]["last_block_fill"] == 3


def test_copy_on_write_first_writer_copies_last_holder_writes_in_place() -> None:
    store = PagedStore(layers=2, heads=1, head_dim=1, block_size=4, num_blocks=8)
    store.add(0)
    append(store, 0, 6)  # blocks [0, 1], the second filled 2/4
    store.fork(0, 1)
    store.fork(0, 2)
    assert store.pool.ref_count[:2] == [3, 3]
    append(store, 1, 1)
    append(store, 0, 1)
    append(store, 2, 1)
    copies = [e for e in store.events if e["kind"] == "copy"]
    assert [(e["seq"], e["from"], e["rows"]) for e in copies] == [(1, 1, 2), (0, 1, 2)]
    assert store.block_table(2) == [0, 1]  # the last holder kept block 1 and wrote in place
    assert store.pool.ref_count[0] == 3 and store.pool.ref_count[1] == 1


def test_out_of_blocks_changes_nothing() -> None:
    store = PagedStore(layers=1, heads=1, head_dim=1, block_size=2, num_blocks=2)
    store.add(0)
    append(store, 0, 3)
    before = store.snapshot()
    assert not store.can_append(0, 2)
    with pytest.raises(OutOfBlocks):
        append(store, 0, 2)
    assert store.snapshot() == before


def test_pool_refuses_to_share_or_release_a_free_block() -> None:
    pool = BlockPool(2)
    with pytest.raises(ValueError):
        pool.release(0)
    with pytest.raises(ValueError):
        pool.share(1)


def test_thin_keeps_first_last_and_every_event() -> None:
    steps = [{"step": i, "events": [i]} for i in range(10)]
    kept = thin(steps, 4)
    assert [s["step"] for s in kept] == [0, 3, 6, 9]
    assert [e for s in kept for e in s["events"]] == list(range(10))


# --- property tests: random interleavings of add / append / fork / free -------------------


def append(store: PagedStore, seq: int, n: int, value: float = 0.0) -> np.ndarray:
    """Write n tokens to every layer the way the model does, then commit them. Row i of the
    written K holds value + i so that tests can tell the rows apart."""
    k = (value + np.arange(n, dtype=float)).reshape(n, 1, 1)
    for layer in range(store.k.shape[0]):
        store.write(seq, layer, k + layer, -k)
    store.advance(seq, n)
    return k


def rows_of(store: PagedStore, seq: int) -> np.ndarray:
    """The committed K rows of layer 0 read through the block table."""
    table, length = store.block_table(seq), store.length(seq)
    position = np.arange(length)
    return store.k[0, np.asarray(table, dtype=int)[position // store.block_size], position % store.block_size]


def check_invariants(store: PagedStore, shadow: dict[int, list[float]]) -> None:
    pool = store.pool
    holders = [sum(b in t for t in store.tables.values()) for b in range(pool.num_blocks)]
    assert pool.ref_count == holders  # count = number of block tables holding the block
    free = list(pool.free_list)
    assert len(free) == len(set(free))
    assert set(free) == {b for b in range(pool.num_blocks) if holders[b] == 0}  # no leak, none freed early
    assert pool.num_free + pool.num_used == pool.num_blocks
    for seq, values in shadow.items():
        assert len(store.block_table(seq)) == -(-len(values) // store.block_size)
        np.testing.assert_array_equal(rows_of(store, seq).ravel(), values)  # CoW kept everyone's rows


ops = st.lists(
    st.tuples(st.sampled_from(["add", "append", "fork", "free"]), st.integers(0, 3), st.integers(1, 5)), max_size=40
)


@settings(max_examples=150, deadline=None)
@given(block_size=st.integers(1, 4), num_blocks=st.integers(1, 12), shuffle=st.booleans(), script=ops)
def test_pool_and_copy_on_write_invariants(
    block_size: int, num_blocks: int, shuffle: bool, script: list[tuple[str, int, int]]
) -> None:
    store = PagedStore(
        layers=2, heads=1, head_dim=1, block_size=block_size, num_blocks=num_blocks, shuffle=shuffle, seed=1
    )
    shadow: dict[int, list[float]] = {}
    next_id = 0
    for op, pick, n in script:
        live = sorted(shadow)
        seq = live[-1 - pick % len(live)] if live else None  # mostly the newest: forks and their parents
        if op == "add" or seq is None:
            store.add(next_id)
            shadow[next_id] = []
            next_id += 1
        elif op == "append":
            if store.can_append(seq, n):
                shadow[seq] += append(store, seq, n, value=100.0 * next_id + pick).ravel().tolist()
                next_id += 1
            else:
                before = store.snapshot()
                with pytest.raises(OutOfBlocks):
                    append(store, seq, n)
                assert store.snapshot() == before
        elif op == "fork":
            store.fork(seq, next_id)
            shadow[next_id] = list(shadow[seq])
            next_id += 1
        else:
            store.free(seq)
            del shadow[seq]
        check_invariants(store, shadow)
    for seq in list(shadow):
        store.free(seq)
    assert store.pool.num_free == num_blocks
