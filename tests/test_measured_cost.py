"""The schedulers' cost model with measured kernels (kvweb/gpu/measured_cost.py): it prices a
step as the per-operation sum of kvweb/gpu/measured.py does, within a stated tolerance, through
the interface the schedulers already use, and a serving run with it gives a lone request its
measured prefill and decode prices."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kvweb.labs  # noqa: F401
from kvweb.gpu import GPUS, MODELS
from kvweb.gpu.measured_cost import MeasuredCostModel
from kvweb.lab import LABS, ParamError

CASES = [
    ("H100-SXM", "llama-3.1-8b", 1, "vllm"),
    ("H200", "llama-3.1-70b", 8, "vllm"),
    ("H200", "qwen2.5-72b", 4, "sglang"),
    ("H100-SXM", "llama-3.1-70b", 4, "sglang"),
]


def cost(gpu: str, model: str, tp: int, engine: str) -> MeasuredCostModel:
    return MeasuredCostModel(GPUS[gpu], MODELS[model], tp=tp, engine=engine)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{c[0]}-tp{c[2]}-{c[3]}" for c in CASES])
def test_steps_match_the_per_operation_sum(case):
    """A decode step within 8 % of the per-operation sum (the schedulers price its attention linear
    in the contexts: the fit's error), a prefill within 1 % (only the LM head's rows differ)."""
    m = cost(*case)
    for batch, context in ((1, 1000), (8, 500), (64, 2000), (256, 4000), (32, 30000)):
        direct = m.kernels.decode_step_cost(batch, batch * context)
        assert m.decode_step_cost(batch, batch * context) == pytest.approx(direct, rel=0.08)
    for tokens in (16, 512, 2048, 8192, 20000):
        assert m.prefill_cost(tokens) == pytest.approx(m.kernels.prefill_cost(tokens), rel=0.01)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 100_000), st.floats(0, 0.1)), min_size=1, max_size=20))
def test_step_times_are_step_time_elementwise_and_more_tokens_never_cost_less(steps):
    m = cost(*CASES[0])
    flops, attention = np.array([s[0] for s in steps]), np.array([s[1] for s in steps])
    assert m.step_times(flops, attention).tolist() == [m.step_time(f, a) for f, a in steps]
    assert all(m.step_time(f + 64, a) >= m.step_time(f, a) for f, a in steps)


def test_a_lone_request_gets_the_measured_prefill_and_decode():
    """One request alone: its first token is one prefill of its prompt plus the engine's time outside
    the steps (39.5 ms for vLLM, 245.1 ms for SGLang: kvweb/gpu/measured.py), each later token one
    decode step (priced at its context's middle: 505 of 500..510)."""
    lab = LABS["schedulers"](
        scenario="B",
        cost_model="measured",
        workload="fixed",
        requests=1,
        prompt_len=500,
        output_len=11,
        prefix_caching=False,
    )
    result = lab.run()
    for m in result["modes"]:
        priced = lab.scheduler_cost(m["mode"])
        outside = {"sglang": 245.1e-3}.get(m["mode"], 39.5e-3)
        assert priced.ttft_outside_s == m["ttft_outside_s"] == outside
        assert m["ttft_s"]["p50"] == pytest.approx(priced.prefill_cost(500) + outside, rel=1e-12)
        assert m["tpot_s"]["p50"] == pytest.approx(priced.decode_step_cost(1, 505), rel=1e-5)
        assert m["step_cost"].startswith("measured kernels, " + ("SGLang" if m["mode"] == "sglang" else "vLLM"))
    sglang, vllm = (lab.scheduler_cost(mode) for mode in ("sglang", "vllm-v1"))
    assert sglang.kernels.engine == "sglang" and vllm.kernels.engine == "vllm"


def test_a_measured_figure_carries_the_held_out_error_of_its_gpu_and_engine():
    """The band is the measured model's MAPE on the deployments of that GPU and engine it was not
    fitted on (kvweb/gpu/measured/bands.json, written by bench/silicon.py), else of the engine."""
    from kvweb.gpu.measured_cost import _bands

    lab = LABS["schedulers"](scenario="B", cost_model="measured", requests=30)
    result = lab.run()
    h100_vllm, sglang = _bands()[0]["H100 vllm"], _bands()[0]["sglang"]
    assert result["step_cost"]["vllm-v1"].endswith(
        f"error TPOT ±{h100_vllm['tpot_pct']:.0f} %, TTFT ±{h100_vllm['ttft_pct']:.0f} % (MAPE on {h100_vllm['rows']} "
        "held-out vLLM H100 deployments replayed through the schedulers, docs/accuracy.md)"
    )
    assert result["step_cost"]["sglang"].endswith(
        f"(MAPE on {sglang['rows']} held-out SGLang H100 deployments replayed through the schedulers, docs/accuracy.md)"
    )
    # the replay's band (bench.silicon --schedulers, 2026-12-04): SGLang's within the goals, vLLM's TTFT not
    assert (h100_vllm["tpot_pct"], h100_vllm["ttft_pct"], sglang["tpot_pct"], sglang["ttft_pct"]) == (
        17.5,
        78.4,
        7.6,
        12.4,
    )
    assert all(m["step_cost"] == result["step_cost"][m["mode"]] for m in result["modes"])


def test_no_tables_is_one_message_naming_the_gpu():
    with pytest.raises(
        ParamError,
        match="cost_model: measured: no measured kernels for A100-40GB; they exist for "
        "A100-80GB, H100-SXM, H200, B200; use cost_model=roofline",
    ):
        LABS["schedulers"](scenario="A", cost_model="measured").admit()


def test_a_fleet_prices_only_its_own_engines_kernels():
    """A100-80GB has vLLM's kernel tables only: a vLLM fleet on it runs measured, an SGLang one is refused."""
    params = {"gpu": "A100-80GB", "model": "llama-3.1-8b", "requests": 40, "cost_model": "measured"}
    result = LABS["fleet"](**params, mode="vllm-v1").run()
    assert result["step_cost"].startswith("measured kernels, vLLM 0.14.0") and " on A100-80GB, " in result["step_cost"]
    assert result["step_cost"].endswith(
        "(MAPE on 196 held-out vLLM deployments replayed through the schedulers, docs/accuracy.md)"
    )  # no A100 rows
    with pytest.raises(ParamError, match="^cost_model: measured: no measured sglang kernels for A100-80GB; "):
        LABS["fleet"](**params, mode="sglang").admit()


def test_a_measured_plan_prunes_gpus_without_kernels_and_opens_in_the_fleet_lab_with_its_figures():
    """A100-40GB has no kernel tables: its candidates are pruned, counted by that reason; every
    simulated candidate opened in the fleet lab gives the plan's figures to the last bit, measured."""
    from kvweb.fleet.candidate import Candidate
    from kvweb.labs.fleet import FleetLab
    from kvweb.labs.plan import PlanLab

    plan = PlanLab(
        model="llama-3-8b",
        gpus="A100-40GB,H100-SXM",
        tps="1,2",
        weight_precisions="16-bit,fp8",
        schedulers="vllm-v1,sglang",
        replicas="1",
        requests=30,
        rate=6.0,
        cost_model="measured",
    )
    result = plan.run()
    assert result["pruned"] == {"does not fit": 0, "cannot reach the rate": 0, "no measured kernels": 8}
    rows = [r for r in result["candidates"] if r["pruned"] is None]
    assert {r["gpu"] for r in rows} == {"H100-SXM"} and len(rows) == 8
    for row in rows:
        got = FleetLab.of_candidate(plan, Candidate.of(row)).run()
        assert got["step_cost"].startswith(
            "measured kernels, " + ("SGLang" if row["scheduler"] == "sglang" else "vLLM")
        )
        assert got["routers"][0]["throughput_tok_s"] == row["throughput_tok_s"], row["key"]
        assert got["routers"][0]["ttft_s"]["p90"] == row["ttft_p90_s"], row["key"]
    roofline = PlanLab(model="llama-3-8b", gpus="A100-40GB", tps="1", schedulers="vllm-v1", replicas="1", requests=30)
    assert list(roofline.run()["pruned"]) == ["does not fit", "cannot reach the rate"]  # as before: no new key


def test_mxfp4_prices_the_experts_with_the_mxfp4_moe_table_and_the_rest_at_16_bits():
    from kvweb.gpu.measured import MeasuredCost

    for engine in ("vllm", "sglang"):
        cost = MeasuredCostModel(GPUS["H200"], MODELS["gpt-oss-120b"], tp=2, weight_precision="mxfp4", engine=engine)
        kernels = MeasuredCost(GPUS["H200"], MODELS["gpt-oss-120b"], engine, 2, "16-bit", moe_precision="w4a16_mxfp4")
        assert cost.kernels == kernels
        assert cost.prefill_cost(2048) == pytest.approx(kernels.prefill_cost(2048), rel=0.01)
    with pytest.raises(ValueError, match="no measured int4 GEMMs|weight precision one of"):
        MeasuredCostModel(GPUS["H200"], MODELS["gpt-oss-120b"], weight_precision="int4")


@pytest.mark.parametrize(
    "lab, params", [("roofline", {"model": "llama-3.1-8b"}), ("engine", {}), ("schedulers", {"cost_model": "measured"})]
)
def test_mxfp4_on_a_model_without_experts_is_one_message_naming_the_parameter(lab, params):
    with pytest.raises(
        ParamError, match=r"^weight_precision mxfp4 quantizes routed experts only .* has none: use 16-bit"
    ):
        run = LABS[lab](weight_precision="mxfp4", **params)
        run.check()
        run.run()


def test_the_ttft_explanation_names_the_time_outside_the_steps_only_when_measured():
    for cost_model, outside in (("roofline", None), ("measured", 0.2451)):
        lab = LABS["schedulers"](scenario="B", cost_model=cost_model, requests=20)
        sglang = lab.explain(lab.run())["ttft_p50"]["sglang"]
        assert dict((name, value) for name, value, _ in sglang.terms).get("time outside the steps") == outside
        assert sglang.formula.endswith("+ time outside the steps") == (outside is not None)


def test_auto_prices_by_measured_kernels_where_they_exist_and_says_so():
    """cost_model=auto (the schedulers, fleet and plan labs' default): scenario B's H100 has kernel
    tables for both engines, so its run is the measured one; scenario A's paper GPU (A100-40GB) has
    none, so its run is the roofline's, byte for byte, with no step_cost line. Compared side by side,
    modes are priced alike: on an A100-80GB (vLLM's kernels only) a fleet of vLLM V1 is measured, of
    SGLang and the schedulers lab's three modes the roofline's. A plan prunes what measured kernels
    cannot price once any candidate has them, and says so."""
    small = {"requests": 12, "workload": "fixed", "prompt_len": 300, "output_len": 20, "rate": 50.0}
    for scenario, pricing in (("B", "measured"), ("A", "roofline")):
        auto = LABS["schedulers"](scenario=scenario, **small).run()
        assert auto == LABS["schedulers"](scenario=scenario, cost_model=pricing, **small).run()
        assert ("step_cost" in auto) == (pricing == "measured")
    for mode, measured in (("vllm-v1", True), ("sglang", False)):
        fleet = LABS["fleet"](gpu="A100-80GB", model="llama-3-8b", mode=mode, **small)
        assert isinstance(fleet.scheduler_cost(mode), MeasuredCostModel) == measured
    lab = LABS["schedulers"](model="llama-3-8b", **small)
    assert (
        lab.setup().with_(gpu="A100-80GB").cost_model()
        == lab.setup().with_(gpu="A100-80GB", pricing="roofline").cost_model()
    )
    grid = dict(requests=8, tps="2", weight_precisions="16-bit", schedulers="vllm-v1", replicas="1", model="llama-3-8b")
    plan = LABS["plan"](gpus="A100-40GB,H100-SXM", **grid).run()
    assert plan["pricing"] == "measured" and plan["pruned"]["no measured kernels"] == 1
    assert [r["gpu"] for r in plan["candidates"] if r["pruned"] == "no measured kernels"] == ["A100-40GB"]
    assert LABS["plan"](gpus="A100-40GB", **grid).run()["pricing"] == "roofline"
    assert "pricing" not in LABS["plan"](gpus="H100-SXM", cost_model="roofline", **grid).run()  # as it was
