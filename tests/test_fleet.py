"""The fleet: N replicas on one clock behind a router (kvweb/fleet/fleet.py)."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.fleet.candidate import PERCENTILES, Candidate
from kvweb.fleet.disaggregation import Link, SharedLink, serve_split
from kvweb.fleet.fleet import serve
from kvweb.fleet.routers import ROUTERS
from kvweb.jsonable import jsonable
from kvweb.lab import ParamError, param_names
from kvweb.labs.fleet import FleetLab, split_points
from kvweb.labs.plan import PlanLab
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.modes import MODES
from kvweb.parsing import make
from kvweb.query import from_query
from kvweb.serving.load.workload import Request
from lab_json import cli_result


def lab(**values: object) -> SchedulersLab:
    return SchedulersLab(**{"requests": 40, "rate": 4.0, **values})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workload", ["scenario", "multi-turn"])
def test_one_replica_is_the_single_engine(mode: str, workload: str) -> None:
    """Field by field: the same requests finish at the same times, with the same sums."""
    lb = lab(workload=workload)
    requests = lb.requests_at(lb.rate)
    single = lb.scheduler(mode).run(requests)
    fleet = serve(requests, lambda: lb.scheduler(mode), 1, "round-robin")
    run = fleet.runs[0]
    for f in fields(single):
        a, b = getattr(run, f.name), getattr(single, f.name)
        if f.name == "sequences":
            assert [(s.id, s.first_token_t, s.finish_t) for s in a] == [(s.id, s.first_token_t, s.finish_t) for s in b]
        elif f.name == "itl":
            assert np.array_equal(a, b)
        elif f.name == "rejected":
            assert fleet.rejected == b
        else:
            assert a == b, f.name
    assert len(single.sequences) == 40


def test_a_later_turn_is_routed_when_it_arrives() -> None:
    """Multi-turn through round robin on 2 replicas: every turn is a decision of its own, and
    a session's turns alternate between the replicas when nothing else arrives."""
    lb = lab(workload="multi-turn", requests=6, turns=6, scenario="B")
    requests = lb.requests_at(lb.rate)
    fleet = serve(requests, lambda: lb.scheduler("sglang"), 2, "round-robin")
    assert [d.replica for d in fleet.decisions] == [0, 1, 0, 1, 0, 1]
    assert [d.request for d in fleet.decisions] == [r.id for r in requests]
    # turn k+1 holds turn k's prompt and answer: after the first, the other replica had it all
    regrets = [d.regret for d in fleet.decisions]
    assert regrets[0] == 0 and all(r > 0 for r in regrets[1:])


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 5), st.integers(1, 1500), st.integers(1, 600)), min_size=1, max_size=25),
    st.integers(1, 4),
    st.sampled_from(sorted(ROUTERS)),
    st.sampled_from(list(MODES)),
)
def test_every_request_is_served_once_or_rejected_with_a_reason(rows: list, n: int, router: str, mode: str) -> None:
    requests = [Request(i, t, p, o) for i, (t, p, o) in enumerate(sorted(rows))]
    lb = lab()
    fleet = serve(requests, lambda: lb.scheduler(mode), n, router)
    served = [s.id for run in fleet.runs for s in run.sequences]
    gone = [r.id for r, why in fleet.rejected]
    assert sorted(served + gone) == list(range(len(requests)))  # exactly once each
    assert all(why for _, why in fleet.rejected)
    chosen = {d.request: d.replica for d in fleet.decisions}
    assert len(fleet.decisions) == len(requests)
    assert all(chosen[i] == k for i, k in fleet.served_by().items())  # served where it was routed
    for run in fleet.runs:  # each replica's own conservation: its tokens are its requests'
        assert run.generated == sum(s.req.output for s in run.sequences)


def test_a_hand_made_routing_case() -> None:
    """Two SGLang replicas, request 1 shares request 0's first 100 prompt tokens and comes after
    it finished: round robin sends it to the other replica (regret 100 tokens), the exact prefix
    scorer to the one holding them (regret 0)."""
    rng = np.random.default_rng(0)
    shared = rng.integers(0, 30000, 100)
    a = np.concatenate([shared, [1] * 50, rng.integers(0, 30000, 10)])
    b = np.concatenate([shared, [2] * 50, rng.integers(0, 30000, 10)])
    requests = [Request(0, 0.0, 150, 10, a), Request(1, 30.0, 150, 10, b)]
    lb = lab(scenario="B")
    for router, replica, regret in (("round-robin", 1, 100), ("exact-prefix", 0, 0)):
        fleet = serve(requests, lambda: lb.scheduler("sglang"), 2, router)
        d = fleet.decisions[1]
        assert (d.replica, d.best, d.regret) == (replica, 100, regret)
        figures = fleet.figures(lb.setup().slo)
        assert figures["hit_tokens"] == 100 - regret
        assert (figures["regret"]["total_tokens"], figures["regret"]["share_with_regret"]) == (regret, regret / 200)
        series = figures["series"]
        assert len(series["t"]) == 100 and series["t"][-1] == max(run.sim_time for run in fleet.runs)
        assert [s[-1] for s in series["outstanding"]] == [0, 0]  # both served by the end
        assert [s[0] for s in series["outstanding"]] == [1, 0]  # request 0 on replica 0 from t = 0


def hit_rates(workload: str, n: int) -> dict[str, float]:
    lb = lab(workload=workload, scenario="B", requests=60)
    requests = lb.requests_at(lb.rate)
    out = {}
    for router in ("round-robin", "exact-prefix"):
        fleet = serve(requests, lambda: lb.scheduler("sglang"), n, router)
        out[router] = fleet.figures(lb.setup().slo)["prefix_hit_rate"]
    return out


def test_round_robin_loses_the_prefixes_that_exact_prefix_keeps() -> None:
    """On multi-turn chat in roomy memory, round robin's hit rate falls as replicas are added
    (a session's next turn finds its history on the same replica about 1/N of the time) while
    the exact prefix scorer keeps the single engine's; on traffic without shared prefixes every
    router's hit rate is 0."""
    one, two, four = (hit_rates("multi-turn", n) for n in (1, 2, 4))
    assert one["round-robin"] == one["exact-prefix"] > 0.8
    assert one["round-robin"] > two["round-robin"] > four["round-robin"]
    assert two["exact-prefix"] == four["exact-prefix"] == one["exact-prefix"]
    assert hit_rates("scenario", 4) == {"round-robin": 0.0, "exact-prefix": 0.0}


def test_cli_json_is_the_library_run() -> None:
    result = cli_result(
        "fleet", {"replicas": 2, "routers": "round-robin,exact-prefix", "requests": 30, "workload": "few-shot"}
    )
    assert [r["router"] for r in result["routers"]] == ["round-robin", "exact-prefix"]
    assert len(result["series"]["exact-prefix"]["outstanding"]) == 2  # one series per replica


def test_the_kv_transfer_time_by_hand() -> None:
    """Llama-3-8B's KV: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes a token.
    1,000 tokens over 50 GB/s: 2.62144 ms, plus 10 us; on 2 GPUs each sends half (1.31072 ms)."""
    one, two = (lab(scenario="B", tp=tp).setup().cost_model() for tp in (1, 2))
    assert one.kv_bytes_per_token_per_gpu == 131_072

    def alone(link: Link, per_token: int) -> float:
        line = SharedLink(link, per_token)
        assert line.send(0.0, 7, 1000) == []
        [(t2, request)] = line.run(1.0)
        assert request == 7
        return t2

    assert alone(Link(), one.kv_bytes_per_token_per_gpu) == pytest.approx(2.63144e-3, rel=1e-12)
    assert alone(Link(), two.kv_bytes_per_token_per_gpu) == pytest.approx(1.32072e-3, rel=1e-12)
    assert alone(Link(25.0, 0.0), one.kv_bytes_per_token_per_gpu) == pytest.approx(5.24288e-3, rel=1e-12)


def test_two_overlapping_transfers_share_the_link_by_hand() -> None:
    """Two prompts of 1,000 Llama-3-8B tokens (131.072 MB each) leave one prefill replica over
    50 GB/s, the second 1 ms after the first, no latency. Alone, each takes 2.62144 ms. By 1 ms
    the first has sent 50 MB; then each gets 25 GB/s: the first's last 81.072 MB take 3.24288 ms
    (done at 4.24288 ms), by when the second has sent as much; its last 50 MB, alone again, take
    1 ms (done at 5.24288 ms = both prompts' bytes over the whole bandwidth: nothing idles)."""
    line = SharedLink(Link(50.0, 0.0), 131_072)
    assert line.send(0.0, 0, 1000) == [] and line.send(1e-3, 1, 1000) == []
    assert line.run(4e-3) == []
    done = line.run(1.0)
    assert [i for _, i in done] == [0, 1]
    assert [t for t, _ in done] == [pytest.approx(4.24288e-3, rel=1e-12), pytest.approx(5.24288e-3, rel=1e-12)]
    with_latency = SharedLink(Link(50.0, 10.0), 131_072)
    with_latency.send(0.0, 0, 1000)
    with_latency.send(0.0, 1, 1000)  # two at once: each at half the bandwidth, done together
    assert [t for t, _ in with_latency.run(1.0)] == [pytest.approx(5.25288e-3, rel=1e-12)] * 2


@pytest.mark.parametrize("mode", ["sglang", "vllm-v1"])
def test_a_disaggregated_request_by_hand(mode: str) -> None:
    """One request alone on 1 prefill + 1 decode replica: its first token leaves the prefill
    replica when the co-located fleet's would, and reaches the client one transfer later; the
    decode replica finds the prompt cached (SGLang: all of it; vLLM V1: its 62 whole blocks of 16,
    the last 8 tokens computed again with the first)."""
    lb = lab(scenario="B")
    request = Request(0, 0.0, 1000, 50)
    alone = serve([request], lambda: lb.scheduler(mode), 1, "round-robin").runs[0].sequences[0]
    split = serve_split([request], lambda: lb.scheduler(mode), 1, 1, "round-robin", Link())
    arrival, ttft, tpot, out = split.served[0]
    assert ttft == pytest.approx(alone.first_token_t + 2.63144e-3, rel=1e-12)
    assert split.transfers == [pytest.approx(2.63144e-3, rel=1e-12)] and split.reserved_short == 0
    assert out == 50 and 0 < tpot < 2 * (alone.finish_t - alone.first_token_t) / 49


def test_a_prefill_batch_s_transfers_wait_for_each_other() -> None:
    """Two 1,000-token prompts arriving together are prefilled in one batch on the one prefill
    replica; their KV leaves its link together, each at half the bandwidth: 2 x 2.62144 ms + 10 us
    each, and both first tokens reach their clients then."""
    lb = lab(scenario="B")
    requests = [Request(0, 0.0, 1000, 20), Request(1, 0.0, 1000, 20)]
    together = serve(requests, lambda: lb.scheduler("sglang"), 1, "round-robin").runs[0].sequences
    assert together[0].first_token_t == together[1].first_token_t  # one batch
    split = serve_split(requests, lambda: lb.scheduler("sglang"), 1, 2, "round-robin", Link())
    assert split.transfers == [pytest.approx(5.25288e-3, rel=1e-12)] * 2
    assert [split.served[i][1] for i in (0, 1)] == [pytest.approx(together[0].first_token_t + 5.25288e-3)] * 2


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 5), st.integers(1, 3000), st.integers(1, 600)), min_size=1, max_size=20),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from(["sglang", "vllm-v1"]),
)
def test_disaggregation_serves_every_request_once_or_rejects_it(
    rows: list, prefill: int, decode: int, mode: str
) -> None:
    requests = [Request(i, t, p, o) for i, (t, p, o) in enumerate(sorted(rows))]
    lb = lab()  # scenario A: 2,048 tokens at most, so some are rejected
    split = serve_split(requests, lambda: lb.scheduler(mode), prefill, decode, "least-outstanding", Link())
    assert sorted([*split.served, *(r.id for r, _ in split.rejected)]) == list(range(len(requests)))
    assert all(why for _, why in split.rejected)
    assert all(out == requests[i].output and ttft > 0 for i, (_, ttft, _, out) in split.served.items())
    assert len(split.transfers) == sum(1 for i in split.served if requests[i].output > 1)


def test_the_lab_sets_disaggregated_beside_co_located() -> None:
    result = FleetLab(workload="few-shot", requests=30, replicas=3, prefill_replicas=1, routers="exact-prefix").run()
    d = result["disaggregation"]
    assert (d["prefill_replicas"], d["decode_replicas"]) == (1, 2)
    assert d["disaggregated"]["gpus"] == d["co_located"]["gpus"] == 3
    assert d["disaggregated"]["finished"] == d["co_located"]["finished"] == 30
    assert [s["prefill_replicas"] for s in d["splits"]] == [1, 2] and d["splits"][0] == d["disaggregated"]
    for s in d["splits"]:  # pays: more requests within the SLO, or as many with a lower TPOT p99
        co = d["co_located"]
        assert s["pays"] == (
            s["slo_attainment"] > co["slo_attainment"]
            or (s["slo_attainment"] == co["slo_attainment"] and s["tpot_s"]["p99"] < co["tpot_s"]["p99"])
        )
    FleetLab(mode="vllm-v1", prefill_replicas=1).check()
    with pytest.raises(ParamError, match="prefill_replicas: 1 is not allowed; expected 0"):
        FleetLab(mode="paper", prefill_replicas=1).check()
    with pytest.raises(ParamError, match="prefill_replicas: 1 is not allowed with model gpt-oss-20b"):
        FleetLab(mode="vllm-v1", model="gpt-oss-20b", scenario="B", prefill_replicas=1).check()


def test_the_splits_shown_are_the_chosen_its_neighbours_and_both_ends() -> None:
    assert split_points(4, 1) == [1, 2, 3]
    assert split_points(8, 4) == [1, 3, 4, 5, 7]
    assert split_points(2, 1) == [1]


def test_a_planner_candidate_opens_in_the_fleet_lab_with_the_plan_s_figures() -> None:
    """Every simulated candidate of a grid over each axis (GPU, tp, both precisions, every
    scheduler, 1 and 2 replicas, two routers), opened in the fleet lab on the plan's workload:
    its router's figures are the plan's for that candidate, to the last bit."""
    plan = PlanLab(
        model="llama-3-8b",
        gpus="A100-40GB,H100-SXM",
        tps="1,2",
        weight_precisions="16-bit,fp8",
        kv_precisions="fp8",
        schedulers="paper,vllm-v1,sglang",
        replicas="1,2",
        routers="round-robin,cost",
        requests=30,
        rate=6.0,
        max_len=3000,
        ttft_slo_s=0.01,
        tpot_slo_ms=6.0,
        cost_model="roofline",
    )
    rows = [r for r in plan.run()["candidates"] if r["pruned"] is None]
    assert len(rows) == 72 and {r["scheduler"] for r in rows} == {"paper", "vllm-v1", "sglang"}
    for row in rows:
        fleet = FleetLab.of_candidate(plan, Candidate.of(row))
        fleet.admit()  # within the lab's rules and budget: the link opens it as it is
        got = fleet.run()["routers"]
        assert [g["router"] for g in got] == [row["router"]]
        figures = {
            **{f"{k}_{p}_s": got[0][f"{k}_s"][p] for k in ("ttft", "tpot") for p in PERCENTILES},
            **{
                k: got[0][k]
                for k in (
                    "slo_attainment",
                    "throughput_tok_s",
                    "finished",
                    "rejected",
                    "preemptions",
                    "prefix_hit_rate",
                )
            },
        }
        assert figures == {k: row[k] for k in figures}, row["key"]
    assert any(0 < r["slo_attainment"] < 1 for r in rows)  # the SLO's limits reach the lab too


def test_the_fleet_lab_takes_any_gpu_and_length_limit() -> None:
    """gpu and max_len put in place of the scenario's: the H200's KV and the longer limit reach
    the replicas; a URL or the CLI sets them like any parameter."""
    lab_a = FleetLab(requests=20, replicas=2, routers="round-robin", workload="sharegpt")
    lab_h = FleetLab(requests=20, replicas=2, routers="round-robin", workload="sharegpt", gpu="H200", max_len=4096)
    a, h = lab_a.setup(), lab_h.setup()
    assert (a.spec.gpu, a.spec.max_len, h.spec.gpu, h.spec.max_len) == ("A100-40GB", 2048, "H200", 4096)
    assert h.cost_model().gpu.name == "H200" and h.cost_model().model.name == a.cost_model().model.name
    assert lab_h.scheduler("sglang").max_len == 4096
    result = lab_h.run()
    assert result["scenario"]["gpu"] == "H200" and result["scenario"]["max_len"] == 4096
    assert cli_result(
        "fleet",
        {
            "gpu": "H200",
            "max_len": 4096,
            "replicas": 2,
            "routers": "round-robin",
            "requests": 20,
            "workload": "sharegpt",
        },
    ) == json.loads(json.dumps(jsonable(result)))
    with pytest.raises(ParamError, match="max_len: 1 is not allowed"):
        FleetLab(max_len=1).check()


def test_the_fleet_lab_has_no_rate_search() -> None:
    """The schedulers lab's search (and its target) are dropped: no flag, widget or URL key; an old
    URL naming them gets the message every unknown key gets, the rest of it kept."""
    assert not {"search", "target"} & set(param_names(FleetLab))
    assert {"search", "target"} <= set(param_names(SchedulersLab))
    lab, messages = from_query({"lab": "fleet", "search": "true", "replicas": "3"})
    assert lab.replicas == 3 and lab.search is False
    assert messages == [
        f"1 unknown parameter for lab fleet ignored: 'search'; allowed: {', '.join(param_names(FleetLab))}"
    ]
    with pytest.raises(ParamError, match="unknown parameter 'search' for lab fleet"):
        make("fleet", {"search": "true"})


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 0.02), st.integers(1, 4000)), min_size=1, max_size=12))
def test_a_shared_link_never_idles_and_never_beats_a_transfer_alone(sends: list) -> None:
    """Transfers starting in time order: each takes at least its time alone, and the last is over
    when a queue serving them one at a time would be (the link works while any is in flight)."""
    sends = sorted(sends)
    line = SharedLink(Link(50.0, 0.0), 131_072)
    done = [d for i, (t, tokens) in enumerate(sends) for d in line.send(t, i, tokens)] + line.run(float("inf"))
    assert sorted(i for _, i in done) == list(range(len(sends)))
    alone = [tokens * 131_072 / 50e9 for _, tokens in sends]
    for t2, i in done:
        assert t2 >= sends[i][0] + alone[i] * (1 - 1e-9)
    queue = 0.0
    for (t, _), seconds in zip(sends, alone):
        queue = max(queue, t) + seconds
    assert max(t2 for t2, _ in done) == pytest.approx(queue, rel=1e-9)


def test_a_measured_plan_s_candidate_opens_in_the_fleet_lab_priced_alike() -> None:
    """cost_model=auto (the default) on GPUs with measured kernels: the plan prices by them, and each
    candidate opened in the fleet lab (auto too) is priced the same way, to the last bit."""
    plan = PlanLab(
        model="llama-3-8b",
        gpus="H100-SXM,H200",
        tps="1",
        weight_precisions="16-bit",
        schedulers="vllm-v1,sglang",
        replicas="1,2",
        routers="round-robin",
        requests=20,
        rate=8.0,
        max_len=3000,
    )
    result = plan.run()
    assert result["pricing"] == "measured"
    rows = [r for r in result["candidates"] if r["pruned"] is None]
    assert len(rows) == 8
    for row in rows:
        fleet = FleetLab.of_candidate(plan, Candidate.of(row))
        got = fleet.run()
        assert "measured kernels" in got["step_cost"]
        assert got["routers"][0]["ttft_s"]["p90"] == row["ttft_p90_s"], row["key"]
        assert got["routers"][0]["throughput_tok_s"] == row["throughput_tok_s"], row["key"]
