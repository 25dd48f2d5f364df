"""Sharing through fork + copy-on-write: parallel sampling, beam search, and their labs."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.kv.beam_search import beam_search, beam_search_naive
from kvweb.cli import main
from kvweb.labs.beam_search import BeamSearch
from kvweb.labs.parallel_sampling import ParallelSampling
from kvweb.kv.model import MiniModel
from kvweb.kv.paged_store import PagedStore
from kvweb.kv.prompts import make_prompt


def test_parallel_sampling_block_count_by_hand() -> None:
    # Lp = 20, Lo = 12, n = 4, B = 8. Each sequence ends holding 20 + 12 = 32 tokens = 4 blocks.
    # Without sharing: 4 sequences x 4 blocks = 16.
    # With sharing: the prompt fills blocks of 8, 8 and 4. The two full blocks stay shared by all
    # four (2 blocks, count 4). The third (4 of 8 rows) is shared too until the first decode
    # writes into it: the first three writers each copy it (3 copies), the last holder writes
    # in place, so there are 4 versions of it, one per sequence. Then rows 24..31 take one new
    # block per sequence (4 more). Total 2 + 4 + 4 = 10.
    # Saving 1 - 10/16 = 0.375; block-free estimate (n-1)Lp / (n(Lp+Lo)) = 3*20 / (4*32) = 0.46875.
    r = ParallelSampling(prompt_len=20, output_len=12, n=4, block_size=8, seed=0).run()
    assert (r["blocks_shared"], r["blocks_unshared"], r["copies"]) == (10, 16, 3)
    assert r["saving"] == pytest.approx(0.375) and r["estimate"] == pytest.approx(0.46875)
    assert r["identical"]
    final = r["steps"][-1]
    assert sorted(b["ref_count"] for b in final["blocks"]) == [1] * 8 + [4, 4]


def test_parallel_sampling_prompt_on_a_block_edge_matches_the_estimate() -> None:
    # Lp = 16, Lo = 8, n = 3, B = 8: the prompt fills exactly 2 blocks, so nothing is copied;
    # each answer takes 1 block of its own: 2 + 3 = 5 blocks against 3 x 3 = 9.
    # Saving 4/9, and the estimate 2*16 / (3*24) = 4/9 too: block granularity costs nothing here.
    r = ParallelSampling(prompt_len=16, output_len=8, n=3, block_size=8, seed=5).run()
    assert (r["blocks_shared"], r["blocks_unshared"], r["copies"]) == (5, 9, 0)
    assert r["saving"] == pytest.approx(4 / 9) == r["estimate"]


@settings(max_examples=12, deadline=None)
@given(lp=st.integers(1, 24), lo=st.integers(1, 10), n=st.integers(1, 4), bs=st.sampled_from([1, 3, 8]))
def test_parallel_sampling_saving_never_beats_the_estimate(lp: int, lo: int, n: int, bs: int) -> None:
    # With F = floor(Lp/B) full prompt blocks and T = ceil((Lp+Lo)/B) blocks per sequence, the
    # shared run holds F + n(T - F) blocks: F*B <= Lp and T*B >= Lp + Lo put it below the estimate.
    r = ParallelSampling(prompt_len=lp, output_len=lo, n=n, block_size=bs, seed=1).run()
    full, per_seq = lp // bs, -(-(lp + lo) // bs)
    assert r["blocks_shared"] == full + n * (per_seq - full)
    assert r["copies"] == (n - 1 if lp % bs else 0)
    assert r["saving"] <= r["estimate"] + 1e-12
    assert r["identical"]


@pytest.mark.parametrize("width,block_size", [(1, 4), (2, 1), (3, 8), (4, 16)])
def test_paged_beam_search_equals_recomputing_from_scratch(width: int, block_size: int) -> None:
    model = MiniModel()
    prompt = make_prompt(11, 2)
    store = PagedStore.for_model(model, block_size, 64)
    paged = beam_search(model, store, prompt, width, 8)
    naive = beam_search_naive(model, prompt, width, 8)
    assert [b.tokens for b in paged] == [b.tokens for b in naive]
    assert [b.score for b in paged] == pytest.approx([b.score for b in naive], abs=1e-9)
    assert store.pool.num_free == 64  # every beam, kept or dropped, was freed


def test_beam_search_lab_shares_and_saves() -> None:
    r = BeamSearch(width=4, prompt_len=20, steps=12, block_size=8, seed=0).run()
    assert r["identical"]
    assert 0 < r["saving_peak"] < 1 and 0 < r["saving_mean"] < 1
    first_fork = next(s for s in r["steps"] if len(s["sequences"]) > 1)
    assert max(b["ref_count"] for b in first_fork["blocks"]) == len(first_fork["sequences"])
    assert [s["width"] for s in r["sweep"]] == [2, 4, 8]


def test_a_single_beam_shares_nothing() -> None:
    r = BeamSearch(width=1, prompt_len=9, steps=5, block_size=4).run()
    assert r["saving_mean"] == 0 and r["saving_peak"] == 0 and r["identical"]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["run", *argv], out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "argv,names",
    [
        (["block-tables", "--block_size", "0"], "block_size"),
        (["parallel-sampling", "--n", "0"], "n:"),
        (["parallel-sampling", "--prompt_len", "257"], "prompt_len"),
        (["beam-search", "--seed", "-1"], "seed"),
        (["paged-equivalence", "--prompt_len", "129"], "prompt_len"),
        (["block-tables", "--num_blocks", "8"], "num_blocks"),  # 4 + 5 blocks needed
        (["beam-search", "--block_size", "1", "--prompt_len", "128"], "block_size"),  # over the trace cap
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], names: str) -> None:
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and names in err


@pytest.mark.parametrize("lab", ["block-tables", "paged-equivalence", "parallel-sampling", "beam-search"])
def test_labs_run_from_the_cli_as_json(lab: str) -> None:
    code, out, _ = cli(lab, "--json")
    assert code == 0 and json.loads(out)["result"]["identical"] is True


def test_parallel_sampling_blocks_hold_the_shared_prompt_and_the_copies() -> None:
    # Lp = 20, B = 8: the prompt's blocks hold "The quic", "k brown ", "fox " (4 rows). After the
    # forks all four answers point at those three blocks; at the first decode three answers copy
    # "fox " (copy-on-write) and each block then holds "fox " plus that answer's first character.
    r = ParallelSampling(prompt_len=20, output_len=12, n=4, block_size=8, seed=0).run()
    first, second = r["steps"][0], r["steps"][1]
    shared = {b["block"]: b["text"] for b in first["blocks"]}
    assert [shared[b] for b in first["sequences"][0]["block_table"]] == ["The quic", "k brown ", "fox "]
    assert all(b["ref_count"] == 4 for b in first["blocks"])
    copies = [e for e in second["events"] if e["kind"] == "copy"]
    text_of = {b["block"]: b["text"] for b in second["blocks"]}
    assert len(copies) == 3 and all(text_of[e["to"]][:4] == "fox " for e in copies)
    for step in r["steps"]:
        text_of = {b["block"]: b["text"] for b in step["blocks"]}
        for s, answer in zip(step["sequences"], r["answers"]):
            assert "".join(text_of[b] for b in s["block_table"]) == (r["prompt"] + answer)[: s["tokens"]]


@settings(max_examples=10, deadline=None)
@given(width=st.integers(1, 5), steps=st.integers(1, 6), prompt_len=st.integers(1, 12), block_size=st.integers(1, 6))
def test_beam_lineage_reaches_the_final_beams(width: int, steps: int, prompt_len: int, block_size: int) -> None:
    # Walking each final node's parents back to the root spells that beam's text; every node
    # holds the blocks whose characters are the prompt plus its path; a freed node has no child.
    r = BeamSearch(width=width, steps=steps, prompt_len=prompt_len, block_size=block_size).run()
    nodes = r["lineage"]
    at = {(n["step"], n["rank"]): n for n in nodes}

    def path(n: dict) -> str:
        """The characters from the root down to n; the walk must end at the root."""
        if n["parent_rank"] is None:
            assert n["kind"] == "root"
            return ""
        return path(at[(n["step"] - 1, n["parent_rank"])]) + n["text"]

    finals = [n for n in nodes if n["fate"] == "final"]
    assert [n["rank"] for n in finals] == list(range(len(r["beams"])))
    assert [path(n) for n in finals] == [b["text"] for b in r["beams"]]
    for step in r["steps"]:
        text_of = {b["block"]: b["text"] for b in step["blocks"]}
        for n in (n for n in nodes if n["step"] == step["step"]):
            assert "".join(text_of[b] for b in n["blocks"]) == r["prompt"] + path(n)
    children = {(n["step"] - 1, n["parent_rank"]) for n in nodes if n["parent_rank"] is not None}
    for n in nodes:
        assert ((n["step"], n["rank"]) in children) == (n["fate"] == "extended")
        assert n["kind"] != "fork" or any(
            m["step"] == n["step"] and m["kind"] == "survive" and m["parent_rank"] == n["parent_rank"] for m in nodes
        )


def test_each_sharing_lab_opens_on_its_mechanism() -> None:
    # parallel sampling opens on the copy-on-write beside the shared full prompt blocks; beam
    # search on a step where a beam is freed while the others share the prompt's blocks
    r = ParallelSampling().run()
    opening = r["steps"][r["opening_step"]]
    assert any(e["kind"] == "copy" for e in opening["events"]) and max(b["ref_count"] for b in opening["blocks"]) > 1
    r = BeamSearch().run()
    opening = r["steps"][r["opening_step"]]
    assert opening["dropped"] and max(b["ref_count"] for b in opening["blocks"]) > 1
    assert all(e["kind"] != "free" for s in r["steps"][: r["opening_step"]] for e in s["events"])
