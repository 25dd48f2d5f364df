"""The views say what a figure is where a careful reader could take it for another: the online
DFS rank beside the offline optimum, a mean wait that every order shares, a peak saving below
the time-averaged one, a what-if decode, two request rates."""

import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import kvweb.labs  # noqa: E402, F401
from app.views.cache_schedule import CacheScheduleView, PrefixHashView  # noqa: E402
from app.views.roofline import RooflineView  # noqa: E402
from app.views.schedulers import SchedulersView  # noqa: E402
from app.views.sharing import SharingView  # noqa: E402
from figures_table import figures  # noqa: E402
from kvweb.lab import LABS  # noqa: E402


def updated(view_class, lab_name: str, **params):
    lab = LABS[lab_name](**params)
    result = lab.run()
    view = view_class()
    view.update(lab, result)
    return result, view


def test_dfs_rank_is_the_online_policy_and_the_optimum_the_offline_order():
    result, view = updated(CacheScheduleView, "cache-schedule", policy="dfs-rank")
    data = view.table.source.data
    rows = dict(zip(data["c0"], data["c1"]))  # order -> hit rate
    assert (
        rows["DFS rank, within the queue (online)"]
        == f"{100 * result['runs']['dfs-rank']['hit_rate']:.1f} %"
        == "75.3 %"
    )
    assert rows["optimum: offline DFS order"] == f"{100 * result['optimal_hit_rate']:.1f} %" == "89.5 %"


def test_an_equal_mean_wait_is_explained_only_when_it_is_equal():
    result, view = updated(CacheScheduleView, "cache-schedule", workload="few-shot", policy="aging")
    waits = {r["mean_wait"] for r in result["runs"].values()}
    # 128 requests present at step 0, 32 in the queue: waits 0..31 for the first 32 served, then
    # every later one waited 31 steps in the queue: (31 x 32 / 2 + 96 x 31) / 128 = 27.125
    assert waits == {(31 * 32 / 2 + 96 * 31) / 128} == {27.125}
    assert result["mean_wait_same_in_every_order"] is True and "Little's law" in view.summary.text
    result, view = updated(CacheScheduleView, "cache-schedule", workload="multi-turn", policy="aging")
    assert len({r["mean_wait"] for r in result["runs"].values()}) == 3
    assert result["mean_wait_same_in_every_order"] is False and "Little's law" not in view.summary.text


def test_the_beam_peak_saving_names_its_blocks():
    result, view = updated(SharingView, "beam-search")
    # 4 beams of a 20-token prompt in blocks of 8: at step 5 the third block (4 + 4 tokens) is full and
    # every beam starts a new block: 4 x 4 = 16 blocks without sharing; with it, 9
    peak = max(m["shared"] for m in result["memory"]), max(m["unshared"] for m in result["memory"])
    assert peak == (9, 16) == (result["peak_blocks_with_sharing"], result["peak_blocks_without_sharing"])
    assert result["saving_peak"] == 1 - 9 / 16
    assert "at the peak: 9 blocks with sharing (step 5) against 16 without (step 5)" in view.summary.text
    assert "the pool a server must reserve" in view.summary.text


def test_block_hashes_ahead_of_the_radix_tree_are_explained_by_eviction():
    result, view = updated(PrefixHashView, "prefix-hash")
    sweep = result["block_sweep"]
    assert sweep["hit_rate"]["hash"][:2] > sweep["hit_rate"]["radix"][:2]  # blocks of 1 and 2 tokens
    assert sweep["hit_rate"]["hash"][2] < sweep["hit_rate"]["radix"][2]
    assert "\nblock size 1, 2: the block hashes beat the radix tree here. It is the unit of eviction" in (
        view.summary.text
    )
    result, view = updated(PrefixHashView, "prefix-hash", capacity=100_000)  # nothing evicted: never ahead
    assert "unit of eviction" not in view.summary.text


def test_the_schedulers_view_names_the_session_rate_and_both_request_rates():
    result, view = updated(SchedulersView, "schedulers", requests=60)
    assert "chat sessions start at rate / turns per second: 2 / 6 = 0.333" in view.header.text
    row = figures(view)["requests/s: arrived / served (whole run)"]
    for m in result["modes"]:
        assert row[m["mode"]] == f"{m['arrival_rate_per_s']:.2f} / {m['requests_per_s_whole_run']:.2f}"
        assert m["requests_per_s_whole_run"] < m["arrival_rate_per_s"] < 2  # the closed loop comes slower


def test_the_roofline_table_names_a_what_if_decode():
    result, view = updated(RooflineView, "roofline")
    data = view.table.source.data
    figures = dict(zip(data["c0"], data["c1"]))
    assert figures["one decode step, what-if (ms)"] == f"{1e3 * result['decode_step_s_what_if']:.4g}"  # 43.14
    assert figures["decode throughput, what-if (tokens/s)"] == "741.8"  # 32 / 43.14 ms
    assert figures["KV capacity (tokens)"] == "11,969" and figures["weights, all GPUs (GB)"] == "26.19"


def test_the_schedulers_header_says_where_its_step_times_come_from():
    result, view = updated(SchedulersView, "schedulers", requests=30)
    assert view.header.text.endswith(
        "\nstep times: the paper GPU's roofline (assumed efficiencies: cost_model=measured "
        "for kernels measured on real GPUs)"
    )
    result, view = updated(SchedulersView, "schedulers", requests=30, scenario="B", cost_model="measured")
    line = view.header.text.splitlines()[-1]
    vllm, sglang = result["step_cost"]["vllm-v1"], result["step_cost"]["sglang"]
    assert line == f"step times: {vllm}; {sglang}"  # the papers' engine's are vLLM's: named once
    assert vllm.startswith(
        "measured kernels, vLLM 0.24.0 (all-reduce 0.19.0) on H100-SXM, aiconfigurator-core 0.12.0 "
        "data; error TPOT ±18 %, TTFT ±78 % (MAPE on 133 held-out vLLM H100 deployments replayed"
    )
