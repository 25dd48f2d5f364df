"""The capacity planner: its answer against brute force, the roofline's pruning by hand, the same
figures on every backend, the CLI's JSON equal to the library's run."""

import io
import json
import sys

import pytest

from kvweb.cli import main
from kvweb.fleet.backends import Processes, RayBackend, Serial
from kvweb.fleet.candidate import Candidate, Workload, evaluate
from kvweb.fleet.planner import (
    DOES_NOT_FIT,
    GPU_PRICES,
    NO_EXPERTS,
    TOO_SLOW,
    candidate_seed,
    cheapest,
    grid,
    pareto,
    plan,
    rate_bound,
    roofline,
)
from kvweb.jsonable import jsonable
from kvweb.lab import Cancelled
from kvweb.labs.plan import PlanLab
from kvweb.parsing import make

# A small grid: 2 GPUs x 2 tp x 2 weight precisions x 2 schedulers x (1 replica + 2 replicas x 2 routers) = 48
PYODIDE = sys.platform == "emscripten"  # no processes there: the serial backend only
SMALL = {
    "model": "llama-3-8b",
    "gpus": "A100-40GB,H100-SXM",
    "tps": "1,2",
    "weight_precisions": "16-bit,int4",
    "schedulers": "paper,sglang",
    "replicas": "1,2",
    "routers": "round-robin,least-outstanding",
    "requests": "60",
    "rate": "8",
    "workload": "long-context",
    "ttft_slo_s": "0.5",
    "tpot_slo_ms": "40",
    "cost_model": "roofline",
}  # the grid mixes GPUs with and without measured kernels: priced alike by the roofline


def small_lab(**changes: str) -> PlanLab:
    return make("plan", {**SMALL, **changes})


def small_plan(lab: PlanLab, on=Serial()) -> dict:
    return lab.plan(lambda f, m: None, on)


def test_the_answer_is_the_cheapest_of_an_exhaustive_grid_and_the_front_its_undominated():
    lab = small_lab()
    result = small_plan(lab)
    workload = lab.workload_spec()
    everything = []  # every candidate that fits, evaluated: the pruned ones too
    for c in grid(
        ["A100-40GB", "H100-SXM"],
        [1, 2],
        ["16-bit", "int4"],
        ["16-bit"],
        ["paper", "sglang"],
        [1, 2],
        ["round-robin", "least-outstanding"],
    ):
        if c.cost_model("llama-3-8b").fits:
            everything.append(
                {
                    "key": c.key,
                    "cost_per_hour": c.gpus * GPU_PRICES[c.gpu],
                    **evaluate(c, workload, candidate_seed(0, c)),
                }
            )
    assert result["candidates_total"] == 48  # 2 x 2 x 2 x 2 x (1 replica + 2 replicas x 2 routers)
    meeting = [r for r in everything if r["meets_slo"]]
    best = min(meeting, key=lambda r: (r["cost_per_hour"], r["ttft_p90_s"], r["key"]))
    assert 0 < len(meeting) < len(everything)
    assert result["cheapest"]["key"] == best["key"]
    assert result["cheapest"]["ttft_p90_s"] == best["ttft_p90_s"]
    # what the roofline pruned for speed could not have met the SLO here
    too_slow = {r["key"] for r in result["candidates"] if r["pruned"] == TOO_SLOW}
    assert too_slow and not any(r["meets_slo"] for r in everything if r["key"] in too_slow)
    evaluated = [r for r in everything if r["key"] not in too_slow]
    front = {r["key"] for r in result["pareto"]}
    for r in evaluated:
        dominated = any(
            o["cost_per_hour"] <= r["cost_per_hour"]
            and o["ttft_p90_s"] <= r["ttft_p90_s"]
            and (o["cost_per_hour"], o["ttft_p90_s"]) != (r["cost_per_hour"], r["ttft_p90_s"])
            for o in evaluated
        )
        assert (r["key"] in front) == (
            not dominated
            and r["key"]
            == min(
                (
                    o
                    for o in evaluated
                    if (o["cost_per_hour"], o["ttft_p90_s"]) == (r["cost_per_hour"], r["ttft_p90_s"])
                ),
                key=lambda o: o["key"],
            )["key"]
        ), r["key"]


def test_pareto_and_cheapest_by_hand():
    rows = [
        {"key": k, "cost_per_hour": c, "ttft_p90_s": t, "meets_slo": m}
        for k, c, t, m in (
            ("a", 1.0, 9.0, False),
            ("b", 2.0, 3.0, True),
            ("c", 2.0, 3.0, True),
            ("d", 3.0, 4.0, True),
            ("e", 4.0, 1.0, True),
        )
    ]
    assert [r["key"] for r in pareto(rows, "ttft", "p90")] == ["a", "b", "e"]
    assert cheapest(rows, "ttft", "p90")["key"] == "b"
    assert cheapest(rows[:1], "ttft", "p90") is None
    # a fleet that finished nothing has no latency: on no front, never the cheapest (it meets no SLO)
    idle = {"key": "z", "cost_per_hour": 0.5, "ttft_p90_s": None, "meets_slo": False}
    assert [r["key"] for r in pareto([idle, *rows, dict(idle, key="y")], "ttft", "p90")] == ["a", "b", "e"]


def test_a_70b_model_at_16_bit_does_not_fit_one_80_gb_gpu():
    workload = Workload("llama-3.1-70b", "fixed", 10, 1.0, 0, 4096)
    one = Candidate("H100-SXM", 1, "16-bit", "16-bit", "vllm-v1", 1, "round-robin")
    # 70.55e9 parameters x 2 B = 141.1 GB of weights; 0.9 x 80 GB = 72 GB usable
    assert one.cost_model("llama-3.1-70b").weight_bytes == pytest.approx(141.1e9, rel=1e-3)
    assert roofline(one, workload) == (DOES_NOT_FIT, 0.0)
    # over two GPUs 70.55 GB each leaves 1.45 GB for KV
    assert roofline(Candidate("H100-SXM", 2, "16-bit", "16-bit", "vllm-v1", 1, "round-robin"), workload)[0] is None
    # in fp8 on one GPU the embedding and the LM head stay 16-bit (2 x 128,256 x 8,192 params, 2.1 GB
    # at 16 bits instead of 1.05): 72.65 GB of weights > 72 GB usable
    fp8 = Candidate("H100-SXM", 1, "fp8", "16-bit", "vllm-v1", 1, "round-robin")
    assert fp8.cost_model("llama-3.1-70b").weight_bytes == pytest.approx(72.65e9, rel=1e-3)
    assert roofline(fp8, workload) == (DOES_NOT_FIT, 0.0)


def test_the_rate_bound_by_hand():
    h100 = Candidate("H100-SXM", 1, "16-bit", "16-bit", "vllm-v1", 1, "round-robin")
    # llama-3-8b: a layer holds 4096 x 128 x (2 x 32 + 2 x 8) + 3 x 4096 x 14336 = 218,103,808 parameters.
    # Prefill-bound: 1000-token prompts, one output token: 2 x 32 x 218,103,808 x 1000 FLOPs per request
    # at 989e12 x 0.7 FLOP/s = 20.163 ms, so one replica keeps up with 49.596 requests/s, two with 99.19.
    prefills = Workload("llama-3-8b", "fixed", 100, 1.0, 0, 4096, prompt_len=1000, output_len=1)
    assert rate_bound(h100, prefills) == pytest.approx(49.596, rel=1e-4)
    assert rate_bound(Candidate(**{**h100.__dict__, "replicas": 2}), prefills) == pytest.approx(99.19, rel=1e-4)
    # Decode-bound: 257 output tokens are 256 places in steps of at most 256 requests, one step per request;
    # a step reads 8,029,995,008 x 2 B of weights at 3.35e12 x 0.8 B/s (5.9925 ms) + 0.5 ms: 154.02 requests/s
    decodes = Workload("llama-3-8b", "fixed", 100, 1.0, 0, 4096, prompt_len=1, output_len=257)
    assert rate_bound(h100, decodes) == pytest.approx(154.02, rel=1e-4)
    assert roofline(h100, Workload(**{**decodes.__dict__, "rate": 154.0}))[0] is None
    assert roofline(h100, Workload(**{**decodes.__dict__, "rate": 155.0}))[0] == TOO_SLOW


def test_the_plan_counts_what_it_pruned_and_evaluates_the_rest():
    result = small_plan(
        small_lab(
            model="llama-3.1-70b",
            gpus="H100-SXM",
            tps="1,2",
            weight_precisions="16-bit",
            schedulers="sglang",
            replicas="1",
            rate="1",
        )
    )
    assert result["pruned"] == {DOES_NOT_FIT: 1, TOO_SLOW: 0} and result["evaluated"] == 1
    assert [r["pruned"] for r in result["candidates"]] == [DOES_NOT_FIT, None]


def test_mxfp4_for_a_dense_model_is_pruned_for_what_it_is_and_counted():
    result = small_plan(
        small_lab(
            model="llama-3.1-8b",
            gpus="H100-SXM",
            tps="1",
            weight_precisions="16-bit,mxfp4",
            schedulers="sglang",
            replicas="1",
            rate="1",
        )
    )
    assert result["pruned"] == {DOES_NOT_FIT: 0, TOO_SLOW: 0, NO_EXPERTS: 1} and result["evaluated"] == 1
    assert [(r["weight_precision"], r["pruned"]) for r in result["candidates"]] == [
        ("16-bit", None),
        ("mxfp4", NO_EXPERTS),
    ]


def test_the_grid_order_and_the_evaluation_order_do_not_move_a_figure():
    lab = small_lab()
    candidates = lab.candidates()
    forward = plan(
        candidates, lab.workload_spec(), GPU_PRICES, "ttft", lambda jobs: Serial().map(jobs, lambda *a: None)
    )
    backward = plan(
        candidates[::-1],
        lab.workload_spec(),
        GPU_PRICES,
        "ttft",
        lambda jobs: [evaluate(*job) for job in jobs[::-1]][::-1],
    )
    assert forward == backward


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip(
        "ray", reason="ray is not installed (pip install kvweb[ray]): the Ray backend is untested"
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.skipif(PYODIDE, reason="no processes in Pyodide")
def test_serial_processes_and_ray_give_identical_results(local_ray):
    lab = small_lab(gpus="H100-SXM", weight_precisions="16-bit,int4")
    serial = small_plan(lab)
    assert small_plan(lab, Processes(2)) == serial
    assert small_plan(lab, RayBackend(2)) == serial
    assert local_ray.is_initialized()  # a Ray started by the caller is left running


@pytest.mark.parametrize(
    "on",
    [Serial(), pytest.param(Processes(2), marks=pytest.mark.skipif(PYODIDE, reason="no processes in Pyodide"))],
    ids=["serial", "processes"],
)
def test_a_cancel_stops_between_candidates(on):
    seen = []

    def progress(fraction: float, message: str) -> None:
        seen.append(message)
        if len(seen) == 3:
            raise Cancelled("stop")

    with pytest.raises(Cancelled):
        small_lab().plan(progress, on)
    assert len(seen) == 3 and seen[0].startswith("1/")


def test_cli_json_equals_the_library_run():
    args = [x for k, v in SMALL.items() for x in (f"--{k}", v)]
    out, err = io.StringIO(), io.StringIO()
    on = "serial" if PYODIDE else "processes"
    assert main(["plan", *args, "--backend", on, "--workers", "2", "--json"], out, err) == 0, err.getvalue()
    printed = json.loads(out.getvalue())
    assert printed["backend"] == {"backend": on, "workers": 2, "address": None}
    assert printed["result"] == jsonable(small_lab().run())


@pytest.mark.parametrize(
    "args, words",
    [
        (["--tps", "1,3"], "tps: '3' is not allowed; expected a comma-separated list of 1, 2, 4, 8"),
        (["--replicas", "0"], "replicas: '0' is not allowed"),
        (["--prices", "H100-SXM=free"], "prices: 'H100-SXM=free' is not allowed"),
        (["--backend", "mpi"], "backend: 'mpi' is not allowed; expected one of serial, processes, ray"),
        (["--workers", "0"], "--workers: '0' is not allowed"),
    ],
)
def test_bad_input_is_one_line_naming_it(args, words):
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", *args], out, err) == 2 and out.getvalue() == ""
    assert words in err.getvalue() and err.getvalue().count("\n") == 1


def test_prices_replace_the_defaults_and_price_every_gpu():
    result = small_plan(
        small_lab(
            prices="H100-SXM=2.5",
            gpus="H100-SXM",
            tps="2",
            weight_precisions="16-bit",
            schedulers="sglang",
            replicas="2",
            routers="round-robin",
        )
    )
    assert result["prices_per_gpu_hour"]["H100-SXM"] == 2.5 and result["candidates"][0]["cost_per_hour"] == 10.0


@pytest.mark.skipif(PYODIDE, reason="no subprocess in Pyodide")
def test_ray_is_imported_only_when_chosen():
    import subprocess

    code = "import sys, kvweb.cli, kvweb.labs.plan; sys.exit('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
