"""Measured-kernel step times (kvweb/gpu/measured.py): interpolation by hand from the tables' own
entries, monotonicity, the closed-loop fit recovering known terms, and a CI guard on a fixed subset
of measured deployments. Needs neither .venv-measured nor the network: only the derived JSON."""

import json
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import kvweb.gpu
from kvweb.gpu import GPUS, MODELS
from kvweb.gpu.hf_config import from_config
from kvweb.gpu.measured import (
    STEP_OVERHEAD_S,
    TABLES,
    TTFT_OUTSIDE_S,
    MeasuredCost,
    Sample,
    closed_loop,
    fit_closed_loop,
    fit_relative,
    kernel_tables,
    silicon_rows,
)

H100, H200 = GPUS["H100-SXM"], GPUS["H200"]
RAW = json.loads((TABLES / "h100_sxm_vllm.json").read_text())
CONFIGS = Path(kvweb.gpu.__file__).parent / "configs"


def test_gemm_corners_are_the_table_and_midpoints_its_geometric_means():
    raw, table = RAW["gemm"]["bfloat16"], kernel_tables("h100_sxm", "vllm")["gemm"]["bfloat16"]
    m, n, k, us = raw["m"], raw["n"], raw["k"], raw["us"]
    assert table(m[5], n[3], k[4]) == pytest.approx(us[5][3][4] * 1e-6, rel=1e-12)
    # halfway in log(m): the geometric mean of the two latencies
    mid = math.sqrt(m[5] * m[6])
    assert table(mid, n[3], k[4]) == pytest.approx(math.sqrt(us[5][3][4] * us[6][3][4]) * 1e-6, rel=1e-9)
    # halfway in log(m) and log(n): the geometric mean of four corners
    corners = [us[i][j][4] for i in (5, 6) for j in (3, 4)]
    assert table(mid, math.sqrt(n[3] * n[4]), k[4]) == pytest.approx(math.prod(corners) ** 0.25 * 1e-6, rel=1e-9)
    # edges: clamped below, in proportion above
    assert table(0.5, n[3], k[4]) == pytest.approx(us[0][3][4] * 1e-6)
    assert table(2 * m[-1], n[3], k[4]) == pytest.approx(2 * us[-1][3][4] * 1e-6)


def test_attention_tables_interpolate_and_extrapolate_as_documented():
    key = "h8_kv1_d128_w0_bfloat16"
    gen, tables = RAW["generation_attention"][key], kernel_tables("h100_sxm", "vllm")
    b, s, us = gen["batch"], gen["kv_len"], gen["us"]
    point = (math.sqrt(b[2] * b[3]), math.sqrt(s[7] * s[8]))
    expected = math.prod(us[i][j] for i in (2, 3) for j in (7, 8)) ** 0.25 * 1e-6
    assert tables["generation"][key](*point) == pytest.approx(expected, rel=1e-9)
    ctx = RAW["context_attention"][key]
    # past the longest measured prefill: causal pairs grow as the square of the length
    assert tables["context"][key](3 * ctx["s"][-1]) == pytest.approx(9 * ctx["us"][-1] * 1e-6)


def test_the_tables_are_monotone_along_every_axis():
    for dtype, t in RAW["gemm"].items():
        grid = t["us"]
        for i in range(len(grid) - 1):
            assert all(grid[i][j][l] <= grid[i + 1][j][l] for j in range(len(t["n"])) for l in range(len(t["k"])))


ULP = 1 + 1e-12  # equal latencies interpolated with other weights may differ in the last bit
LLAMA8 = MeasuredCost(H100, MODELS["llama-3.1-8b"], "vllm", 1)
LLAMA70 = MeasuredCost(H200, MODELS["llama-3.1-70b"], "sglang", 4, "fp8")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([LLAMA8, LLAMA70]), st.integers(1, 40_000), st.integers(1, 5000), st.integers(0, 50_000))
def test_more_tokens_are_never_cheaper(cost, n, more, cached):
    assert cost.prefill_cost(n, cached) <= cost.prefill_cost(n + more, cached) * ULP


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([LLAMA8, LLAMA70]),
    st.integers(1, 1024),
    st.integers(1, 100_000),
    st.integers(1, 64),
    st.integers(1, 20_000),
)
def test_a_bigger_batch_or_a_longer_context_is_never_cheaper(cost, batch, context, more, longer):
    step = cost.decode_step_cost(batch, batch * context)
    assert step <= cost.decode_step_cost(batch + more, (batch + more) * context) * ULP
    assert step <= cost.decode_step_cost(batch, batch * (context + longer)) * ULP


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 30_000), max_size=64), st.integers(1, 8192), st.integers(0, 30_000))
def test_a_prefill_chunk_added_to_a_step_never_makes_it_cheaper(decodes, n, cached):
    assert LLAMA70.step_cost(decodes) <= LLAMA70.step_cost(decodes, [(n, cached)]) * ULP


def test_a_mixed_step_is_its_parts_and_the_overhead_once():
    parts = LLAMA70.step_parts([1000, 3000], [(512, 0)])
    assert sum(parts.values()) == LLAMA70.step_cost([1000, 3000], [(512, 0)])
    assert parts["overhead"] == LLAMA70.step_overhead_s == STEP_OVERHEAD_S["sglang"]
    assert parts["allreduce"] > 0 and parts["moe"] == 0
    assert LLAMA8.step_parts([2000], [])["allreduce"] == 0  # one GPU: no all-reduce
    assert "vLLM 0.24.0" in LLAMA8.source and "H100-SXM" in LLAMA8.source


def test_models_without_measured_kernels_are_refused_by_name():
    with pytest.raises(ValueError, match="latent attention"):
        MeasuredCost(H200, MODELS["deepseek-v3"])
    with pytest.raises(ValueError, match="no measured kernels for A100-40GB"):
        MeasuredCost(GPUS["A100-40GB"], MODELS["llama-3.1-8b"])


class _Kernels:
    """A cost whose prefill and decode steps are fixed kernel times plus an overhead."""

    def __init__(self, prefill: float, decode: float, overhead: float) -> None:
        self.p, self.d, self.o = prefill, decode, overhead

    def prefill_cost(self, n: int) -> float:
        return self.p + self.o

    def decode_step_cost(self, batch: int, total: int) -> float:
        return self.d + self.o


def test_the_fit_recovers_a_known_overhead_queued_share_and_outside_time():
    overhead, share, outside = 3.7e-3, 0.3, 0.04
    samples = []
    for p, d, c, osl in [
        (0.05, 0.01, 4, 1024),
        (0.2, 0.02, 64, 1024),
        (0.03, 0.008, 16, 128),
        (0.5, 0.03, 32, 8192),
        (0.1, 0.012, 8, 512),
        (0.07, 0.02, 128, 2048),
    ]:
        ttft, tpot = closed_loop(_Kernels(p, d, overhead), c, 1, osl, share, outside)
        samples.append(Sample(p, d, c, osl, ttft, tpot))
    fitted_overhead, fitted_share, fitted_outside = fit_closed_loop(samples)
    assert fitted_share == pytest.approx(share)
    assert fitted_overhead == pytest.approx(overhead, rel=1e-9)
    assert fitted_outside == pytest.approx(outside, rel=1e-9)
    assert fit_relative([1.0, 2.0], [1.0, 1.0], [1.5, 2.5]) == pytest.approx(0.5)


# CI guard: fixed subsets of measured deployments from each half of the split (bench/silicon.py), with the
# measured model's MAPE recorded when the tables and fit were last changed; a change may not make them
# worse than recorded + MARGIN (3 points: room for a refit's drift, not for a regression).
MARGIN = 0.03
GUARDED = [
    # fit half: Llama-3.1-70B FP8, vLLM, 8 x H200, isl 1024, every concurrency and output length
    ("meta-llama/Llama-3.1-70B", "h200_sxm", 8, "fp8", None, MODELS["llama-3.1-70b"], 0.058, 0.036),
    # held out: Qwen3-32B 16-bit, vLLM, 4 x H100
    (
        "Qwen/Qwen3-32B",
        "h100_sxm",
        4,
        "16-bit",
        None,
        from_config((CONFIGS / "qwen3-32b.json").read_text(), "qwen3-32b"),
        0.397,
        0.155,
    ),
    # held out: gpt-oss-120b (MXFP4 experts), vLLM, 8 x H200
    ("openai/gpt-oss-120b", "h200_sxm", 8, "16-bit", "w4a16_mxfp4", MODELS["gpt-oss-120b"], 0.289, 0.070),
]


def guarded_rows(path: str, system: str, tp: int) -> list[dict]:
    """A guarded subset: the model's vLLM rows on that system and tp at isl 1024, neither repeated nor saturated."""
    return [
        r
        for r in silicon_rows()
        if r["model_path"] == path
        and r["system"] == system
        and r["tp_size"] == tp
        and r["backend"] == "vllm"
        and r["isl"] == 1024
        and r["duplicate_of"] is None
        and not r["saturated"]
    ]


@pytest.mark.parametrize("path, system, tp, precision, moe, model, ttft_mape, tpot_mape", GUARDED)
def test_measured_model_error_on_a_fixed_subset_stays_within_its_record(
    path, system, tp, precision, moe, model, ttft_mape, tpot_mape
):
    gpu = {"h100_sxm": H100, "h200_sxm": H200}[system]
    rows = guarded_rows(path, system, tp)
    assert len(rows) >= 6
    cost = MeasuredCost(gpu, model, "vllm", tp, precision, moe_precision=moe)
    ttft, tpot = [], []
    for r in rows:
        t, p = cost.closed_loop(r["batch_size"], r["isl"], r["osl"])
        ttft.append(abs(t * 1e3 / r["silicon_ttft_ms"] - 1))
        tpot.append(abs(p * 1e3 / r["silicon_tpot_ms"] - 1))
    assert statistics.fmean(ttft) <= ttft_mape + MARGIN
    assert statistics.fmean(tpot) <= tpot_mape + MARGIN


def test_a_campaign_fitted_on_its_own_rows_needs_other_terms_than_the_fit_half():
    """docs/accuracy.md, "campaigns differ": the held-out Qwen3-32B vLLM rows (4 x H100, isl 1024) are
    explained by the closed loop's own form (TTFT 4 %, TPOT 6 % in-sample) but with twice the outside
    time the fit half gives (78.5 ms, not 39.5 ms): the transferred terms' 39.7 % above is the campaign's
    set-up, not the form."""
    path, system, tp, precision, moe, model, ttft_mape, _ = GUARDED[1]
    rows = guarded_rows(path, system, tp)
    kernels = MeasuredCost(H100, model, "vllm", tp, precision, step_overhead_s=0.0)
    samples = [
        Sample(
            kernels.prefill_cost(r["isl"]),
            kernels.decode_step_cost(r["batch_size"], int(r["batch_size"] * (r["isl"] + r["osl"] / 2))),
            r["batch_size"],
            r["osl"],
            r["silicon_ttft_ms"] / 1e3,
            r["silicon_tpot_ms"] / 1e3,
        )
        for r in rows
    ]
    overhead, share, outside = fit_closed_loop(samples)
    assert outside > 1.9 * TTFT_OUTSIDE_S["vllm"]
    own = MeasuredCost(H100, model, "vllm", tp, precision, step_overhead_s=overhead)
    ttft = statistics.fmean(
        abs(closed_loop(own, r["batch_size"], r["isl"], r["osl"], share, outside)[0] * 1e3 / r["silicon_ttft_ms"] - 1)
        for r in rows
    )
    assert ttft <= 0.05 < ttft_mape
