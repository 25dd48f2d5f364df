"""A roofline figure's explanation (kvweb/gpu/explain.py): its terms, put into its formula,
reproduce the figure the lab shows, for dense, MoE, window and latent models, over tp and precisions."""

import math

import pytest

import kvweb.labs  # noqa: F401
from kvweb.gpu.measured_cost import cost_source
from kvweb.lab import LABS

CASES = [
    {},
    {"gpu": "H100-SXM", "model": "llama-3-70b", "tp": 4, "weight_precision": "fp8"},
    {"gpu": "H200", "model": "mixtral-8x7b", "tp": 2, "kv_precision": "fp8"},
    {"gpu": "H200", "model": "gpt-oss-20b"},
    {"gpu": "H200", "model": "deepseek-v3", "tp": 8, "weight_precision": "fp8"},
    {"gpu": "A100-40GB", "model": "llama-3-70b", "ignore_weights": True},
]


def terms(explanation) -> dict[str, float]:
    return {name: value for name, value, _ in explanation.terms}


@pytest.mark.parametrize("params", CASES, ids=[p.get("model", "default") for p in CASES])
def test_each_formula_with_its_values_reproduces_the_figure(params):
    lab = LABS["roofline"](**params)
    result, explained = lab.run(), lab.explain()
    shown = {k: result.get(k, result.get(f"{k}_what_if")) for k in explained}
    assert all(e.value == shown[k] for k, e in explained.items())  # the figure the table shows
    t = {k: terms(e) for k, e in explained.items()}
    per_token = t["kv_bytes_per_token_per_gpu"]
    kinds = [name[: -len(" layers")] for name in per_token if name.endswith(" layers")]
    assert (
        sum(per_token[f"{k} layers"] * per_token[f"K and V elements per {k} layer"] for k in kinds)
        * per_token["bytes per element"]
        == shown["kv_bytes_per_token_per_gpu"]
    )
    left = t["kv_bytes_free_per_gpu"]
    assert max(0.0, left["HBM"] * left["mem_util"] - left["weights, one GPU"]) == shown["kv_bytes_free_per_gpu"]
    capacity = t["kv_capacity_tokens"]
    assert (
        math.floor(capacity["memory left for KV, one GPU"] / capacity["KV per token, one GPU"])
        == shown["kv_capacity_tokens"]
    )
    for key in ("prefill_s", "decode_step_s"):
        s = t[key]
        roofline = max(
            s["FLOPs"] / (s["peak"] * s["compute efficiency"]), s["bytes"] / (s["bandwidth"] * s["memory efficiency"])
        )
        assert roofline + s["all-reduces"] + s["step overhead"] == pytest.approx(shown[key], rel=1e-12)
    assert (
        t["decode_tokens_per_s"]["batch"] / t["decode_tokens_per_s"]["one decode step"] == shown["decode_tokens_per_s"]
    )


def test_the_weights_formula_reproduces_the_weights_of_a_dense_model():
    lab = LABS["roofline"](gpu="H100-SXM", model="llama-3-70b", tp=4, weight_precision="fp8")
    w = terms(lab.explain()["weight_bytes_per_gpu"])
    assert (
        (w["parameters"] - w["embedding and LM head"]) * w["bytes per parameter"] + w["embedding and LM head"] * 2
    ) / w["tp"] == lab.run()["weight_bytes_per_gpu"]


def test_the_text_names_the_formula_the_values_and_the_source():
    text = LABS["roofline"]().explain()["kv_capacity_tokens"].text()
    assert text.splitlines() == [
        "KV capacity = ⌊memory left for KV, one GPU ÷ KV per token, one GPU⌋",
        "memory left for KV, one GPU = 9,805,015,040 B; KV per token, one GPU = 819,200 B",
        "= 11,969 tokens",
        "source: the paper roofline's assumptions: compute efficiency 0.7, memory efficiency 0.8, 0.5 ms a step, "
        "0.9 of HBM usable",
    ]


def test_a_served_runs_figures_are_reproduced_by_their_formulas():
    lab = LABS["schedulers"](requests=30, workload="few-shot")
    result = lab.run()
    explained = lab.explain(result)
    for m in result["modes"]:
        e = {k: {name: v for name, v, _ in explained[k][m["mode"]].terms} for k in explained}
        assert e["throughput_tok_s"]["output tokens"] / e["throughput_tok_s"]["simulated time"] == m["throughput_tok_s"]
        hits = e["prefix_hit_rate"]
        assert (hits["prompt tokens from the cache"] / hits["prompt tokens"] if hits["prompt tokens"] else 0.0) == m[
            "prefix_hit_rate"
        ]
        assert explained["ttft_p50"][m["mode"]].value == m["ttft_s"]["p50"]
        assert explained["kv_capacity_tokens"][m["mode"]].value == result["kv_capacity_tokens"]
        assert explained["throughput_tok_s"][m["mode"]].source[1] == (cost_source(lab.scheduler_cost(m["mode"])),)


def test_a_fleets_and_a_plans_figures_are_reproduced_by_their_formulas():
    fleet = LABS["fleet"](requests=30, replicas=2, routers="round-robin,cache-aware")
    result = fleet.run()
    explained = fleet.explain(result)
    for row in result["routers"]:
        t = {name: v for name, v, _ in explained["throughput_tok_s"][row["router"]].terms}
        assert t["output tokens"] / t["simulated time"] == row["throughput_tok_s"]
        assert explained["tpot_p50"][row["router"]].value == row["tpot_s"]["p50"]
    plan = LABS["plan"](requests=30, replicas="1,2", gpus="H100-SXM", tps="1,2")
    result = plan.run()
    best, explained = result["cheapest"], plan.explain(result)
    hour = {name: v for name, v, _ in explained["cost_per_hour"][best["key"]].terms}
    # 1 H100 at $3: priced by measured kernels (cost_model=auto), whose memory is the engine's own and fits
    # Llama-3.1-70B's FP8 weights on one H100 with a short context, as vLLM serves it (the roofline needs 2)
    assert hour["GPUs"] * hour["dollars per GPU-hour"] == best["cost_per_hour"] == 3.0
    million = {name: v for name, v, _ in explained["cost_per_million_tokens"][best["key"]].terms}
    assert million["cost per hour"] / (3600 * million["throughput"]) * 1e6 == best["cost_per_million_tokens"]
