"""Calibrating the measured model with your own benchmark runs (kvweb/gpu/calibration.py): a fit
that recovers the step overhead and outside time a synthetic run was made with, runs that reach
the labs' step prices and share URL, and one message naming the run and field for bad input."""

import json

import pytest

import kvweb.labs  # noqa: F401
from kvweb.gpu import GPUS, MODELS
from kvweb.gpu.calibration import MAX_RUNS, fit, parse_runs
from kvweb.gpu.measured import QUEUED_SHARE, MeasuredCost, closed_loop
from kvweb.gpu.measured_cost import cost_source
from kvweb.lab import LABS, ParamError
from kvweb.query import from_query, to_query

KERNELS = MeasuredCost(GPUS["H100-SXM"], MODELS["llama-3-8b"], "vllm")


def summaries(overhead_s: float, outside_s: float, points=((1, 512, 128), (8, 1024, 256), (32, 2048, 128))) -> str:
    """vllm bench serve summaries of runs made with this overhead and outside time (200 requests each)."""
    made = MeasuredCost(KERNELS.gpu, KERNELS.model, "vllm", step_overhead_s=overhead_s)
    runs = []
    for c, isl, osl in points:
        ttft, tpot = closed_loop(made, c, isl, osl, QUEUED_SHARE["vllm"], outside_s)
        runs.append(
            {
                "backend": "vllm",
                "max_concurrency": c,
                "completed": 200,
                "total_input_tokens": 200 * isl,
                "total_output_tokens": 200 * osl,
                "mean_ttft_ms": 1e3 * ttft,
                "mean_tpot_ms": 1e3 * tpot,
            }
        )
    return "\n".join(json.dumps(r) for r in runs)  # JSON lines, as sglang.bench_serving appends them


def test_the_fit_recovers_the_terms_a_synthetic_run_was_made_with():
    calibration = fit(parse_runs(summaries(3.2e-3, 0.045)), KERNELS)
    assert calibration.step_overhead_s == pytest.approx(3.2e-3, rel=1e-9)
    assert calibration.outside_s == pytest.approx(0.045, rel=1e-9)
    assert calibration.worst() == pytest.approx((0.0, 0.0), abs=1e-9)
    one = fit(parse_runs(json.dumps(json.loads(summaries(3.2e-3, 0.045).splitlines()[1]))), KERNELS)
    assert one.step_overhead_s == pytest.approx(3.2e-3, rel=1e-9)  # one run fixes both terms


def test_a_calibration_prices_the_labs_steps_and_stays_in_the_share_url():
    text = summaries(2.5e-3, 0.030)
    lab = LABS["schedulers"](
        scenario="B",
        cost_model="measured",
        workload="fixed",
        requests=1,
        prompt_len=500,
        output_len=11,
        prefix_caching=False,
        calibration=text,
    )
    vllm, sglang = lab.scheduler_cost("vllm-v1"), lab.scheduler_cost("sglang")
    assert vllm.kernels.step_overhead_s == pytest.approx(2.5e-3, rel=1e-9)
    assert sglang.calibration is None  # a vLLM run calibrates vLLM's kernels only
    result = lab.run()
    v1 = next(m for m in result["modes"] if m["mode"] == "vllm-v1")
    assert v1["tpot_s"]["p50"] == pytest.approx(vllm.decode_step_cost(1, 505), rel=1e-5)
    # the fitted time outside the steps is in the lab's TTFT: one prefill + 30 ms
    assert v1["ttft_outside_s"] == pytest.approx(0.030, rel=1e-9)
    assert v1["ttft_s"]["p50"] == pytest.approx(vllm.prefill_cost(500) + 0.030, rel=1e-9)
    assert (
        "; calibrated to your 3 runs: step overhead 2.50 ms, outside the steps 30.0 ms, worst residual TTFT 0.0 %, "
        "TPOT 0.0 %" in result["step_cost"]["vllm-v1"]
    )
    assert "one concurrency" not in result["step_cost"]["vllm-v1"]  # three concurrencies: 1, 8, 32
    again, messages = from_query(to_query(lab))
    assert messages == [] and again.calibration == text and again.scheduler_cost("vllm-v1") == vllm


def test_runs_at_one_concurrency_are_flagged():
    """One concurrency's TTFT does not carry to others (docs/accuracy.md): the step-cost line says so."""
    same = summaries(2.5e-3, 0.030, points=((8, 512, 128), (8, 2048, 256)))
    lab = LABS["schedulers"](scenario="B", cost_model="measured", calibration=same)
    assert cost_source(lab.scheduler_cost("vllm-v1")).endswith(
        "TPOT 0.0 %; all at one concurrency, so TTFT at another may be far off: add runs at other concurrencies"
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "calibration: not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        (
            '{"max_concurrency": null}',
            "calibration: run 1: max_concurrency is null; calibrate with runs at a fixed "
            "--max-concurrency (a closed loop)",
        ),
        (
            '[{"max_concurrency": 4, "completed": true}]',
            "calibration: run 1: completed is true; expected a whole number above 0",
        ),
        (
            '{"max_concurrency": 4, "completed": 10, "total_input_tokens": 100, "total_output_tokens": 10, '
            '"mean_ttft_ms": 5}',
            "calibration: run 1: mean_tpot_ms is missing; expected a vllm bench serve",
        ),
        (
            '{"max_concurrency": 4, "completed": 10, "total_input_tokens": 100, "total_output_tokens": 10, '
            '"mean_ttft_ms": 5, "mean_tpot_ms": 1}',
            "calibration: run 1: 1 output tokens a request; TPOT needs at least 2",
        ),
        ("[[[[[1]]]]]", "calibration: JSON nested 5 deep"),
        (json.dumps([{}] * (MAX_RUNS + 1)), f"calibration: expected 1 to {MAX_RUNS} objects"),
    ],
)
def test_bad_runs_get_one_message_naming_the_run_and_field(text, message):
    with pytest.raises(ParamError) as error:
        parse_runs(text)
    assert str(error.value).startswith(message)


def test_mixed_engines_and_a_roofline_calibration_are_refused():
    vllm = json.loads(summaries(1e-3, 0.01).splitlines()[0])
    with pytest.raises(ParamError, match="^calibration: runs of vLLM and SGLang together"):
        parse_runs(json.dumps([vllm, {**vllm, "backend": "sglang"}]))
    with pytest.raises(ParamError, match="^calibration: given, but cost_model is roofline"):
        LABS["schedulers"](calibration=json.dumps(vllm), cost_model="roofline").check()
    # auto on scenario A's paper GPU (an A100-40GB: no kernel tables) prices by the roofline too
    with pytest.raises(ParamError) as auto:
        LABS["schedulers"](calibration=json.dumps(vllm)).check()
    assert str(auto.value) == (
        "calibration: given, but no measured kernels price opt-13b-like on A100-40GB "
        "(cost_model=auto takes the roofline there); set cost_model to measured to see why"
    )
    assert LABS["schedulers"](calibration=json.dumps(vllm), scenario="B").scheduler_cost("vllm-v1").calibration
