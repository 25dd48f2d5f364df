"""LoRA adapters in the fleet: the replicas' views of their slots, the lora-affinity router counted
by hand against round robin, the prefix routers keyed by adapter, and the fleet lab's figures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.fleet.candidate import Candidate, replica
from kvweb.fleet.fleet import Replica, serve
from kvweb.fleet.replica_view import Adapters
from kvweb.fleet.routers import ROUTERS, CacheAware, LoraAffinity, lora_affinity
from kvweb.lab import ParamError
from kvweb.labs.fleet import FleetLab
from kvweb.labs.plan import PlanLab, adapter_batch
from kvweb.serving.load.workload import Request, poisson_workload, with_adapters
from test_lora import lora_v1
from test_radix_lora import lora_sglang

# adapters 1, 1, 2, 2, 1, 1, 2, 2, one request a second (each finished before the next arrives)
PATTERN = [1, 1, 2, 2, 1, 1, 2, 2]


def spaced(adapters: list[int]) -> list[Request]:
    return [Request(i, float(i), 20, 4, adapter=a) for i, a in enumerate(adapters)]


def loads(router: str) -> list[int]:
    fleet = serve(spaced(PATTERN), lambda: lora_v1(1), 2, router)
    assert fleet.adapters is not None
    return [a["loads"] for a in fleet.adapters]


def test_lora_affinity_loads_each_adapter_once_where_round_robin_loads_eight_times() -> None:
    """2 replicas, 2 adapters, max_loras 1, requests of adapters 1,1,2,2,1,1,2,2 one at a time.
    Round robin: replica 0 gets requests 0,2,4,6 (adapters 1,2,1,2), replica 1 requests 1,3,5,7
    (1,2,1,2): its one slot changes adapter at every request, 4 loads each, 8 in all.
    lora-affinity: request 0 finds both replicas with a free slot (0.9 each, queues alike): the
    lowest, replica 0 loads adapter 1; request 1 finds adapter 1 in replica 0's slot (1.0); request
    2 (adapter 2): replica 0's slot is taken by idle adapter 1 (room: 0.8), replica 1's free (0.9):
    replica 1 loads adapter 2; from then on every request finds its adapter loaded. 1 load each."""
    assert loads("round-robin") == [4, 4]
    assert loads("lora-affinity") == [1, 1]
    fleet = serve(spaced(PATTERN), lambda: lora_v1(1), 2, "lora-affinity")
    assert fleet.served_by() == {i: 0 if a == 1 else 1 for i, a in enumerate(PATTERN)}
    assert [d.reason for d in fleet.decisions] == ["queue", "adapter", "free slot", *["adapter"] * 5]
    assert [a["in_slots"] for a in fleet.adapters or []] == [[1], [2]]


def test_llm_d_affinity_tiers() -> None:
    """llm-d's 1.0 / 0.8 / 0.6 / 0 with kvweb's slots read as active and a free slot at 0.9."""
    view = Adapters(loaded=frozenset({1, 2}), running=frozenset({1}), waiting=frozenset({3}), max_loras=3)
    assert lora_affinity(2, view) == 1.0  # idle in a slot: no load
    assert lora_affinity(4, view) == 0.9  # 2 adapters running or waiting of 3, a slot of 3 free
    roomy = Adapters(frozenset({1, 2}), frozenset({1}), frozenset(), 2)
    assert lora_affinity(3, roomy) == 0.8  # room in the batch, but an idle adapter is evicted
    free = Adapters(frozenset({1}), frozenset({1}), frozenset(), 2)
    assert lora_affinity(3, free) == 0.9
    full = Adapters(frozenset({1, 2}), frozenset({1, 2}), frozenset({3}), 2)
    assert lora_affinity(3, full) == 0.6 and lora_affinity(4, full) == 0.0
    assert lora_affinity(0, full) == lora_affinity(4, None) == 1.0  # the base model, a replica without slots


def test_a_replica_view_names_its_adapters_and_probes_its_cache_under_one() -> None:
    """A request of adapter 1 served on a vLLM V1 replica with prefix caching: its slot holds 1, and
    the same 64 tokens are 64 cached tokens under adapter 1, none under adapter 2 or the base model."""
    tokens = np.arange(100, dtype=np.int64)
    replica = Replica(lora_v1(2, prefix_caching=True))
    replica.engine.submit(Request(0, 0.0, 64, 4, tokens[:68], adapter=1))
    replica.sent += 1
    replica.engine.advance(5.0)
    assert replica.adapters() == Adapters(frozenset({1}), frozenset(), frozenset(), 2)
    assert [replica.prefix_match(tokens[:64], a) for a in (1, 2, 0)] == [64, 0, 0]


class Idle:
    """A replica with nothing running: every load 0, no slots."""

    def outstanding(self) -> int:
        return 0

    def waiting(self) -> int:
        return 0

    def adapters(self) -> None:
        return None


def test_cache_aware_keeps_one_tree_per_adapter() -> None:
    """The same 32 tokens under adapter 1 to replica 0 (the least loaded); again under adapter 1: a
    match (replica 0); under adapter 2: no match in adapter 2's tree, so the least loaded, and the
    request goes into a tree of its own."""
    tokens = np.arange(33, dtype=np.int64)
    router, views = CacheAware(2), [Idle(), Idle()]
    assert router.route(Request(0, 0.0, 32, 1, tokens, adapter=1), views) == 0 and router.reason == "least loaded"
    assert router.route(Request(1, 1.0, 32, 1, tokens, adapter=1), views) == 0 and router.reason == "match"
    router.route(Request(2, 2.0, 32, 1, tokens, adapter=2), views)
    assert router.reason == "least loaded" and sorted(router.trees) == [0, 1, 2]
    assert router.tree.size == [0, 0] and router.trees[1].size == [32, 0]


def test_without_adapters_lora_affinity_is_the_queue() -> None:
    router = LoraAffinity()

    class Queued(Idle):
        def __init__(self, n: int) -> None:
            self.n = n

        def waiting(self) -> int:
            return self.n

    assert router.route(Request(0, 0.0, 8, 1), [Queued(3), Queued(1), Queued(2)]) == 1 and router.reason == "queue"


def test_sglang_replicas_load_as_vllm_ones_on_the_same_pattern() -> None:
    """The same pattern on SGLang replicas of max_loras_per_batch 1. Each one slot starts with the
    base model, no adapter to evict, which the router reads as a free slot (0.9): lora-affinity sends
    the requests of adapter 2 to replica 1, 1 + 1 loads (the base model's zeros cost none); round
    robin 4 + 4, as vLLM's; the figures list adapters only."""
    for router, expected, held in (("round-robin", [4, 4], [[2], [2]]), ("lora-affinity", [1, 1], [[1], [2]])):
        fleet = serve(spaced(PATTERN), lambda: lora_sglang(1), 2, router)
        assert fleet.adapters is not None
        assert [a["loads"] for a in fleet.adapters] == expected and [a["in_slots"] for a in fleet.adapters] == held


def test_the_fleet_lab_runs_adapters_on_vllm_v1_replicas() -> None:
    lab = FleetLab(mode="vllm-v1", loras=4, max_loras=1, replicas=2, routers="round-robin,lora-affinity", requests=40)
    result = lab.run()
    rows = {r["router"]: r for r in result["routers"]}
    for name, row in rows.items():
        per = result["per_replica"][name]
        assert row["adapter_loads"] == sum(p["lora"]["loads"] for p in per) >= 4  # each adapter at least once
        assert all(len(p["lora"]["in_slots"]) == 1 for p in per)
    assert rows["lora-affinity"]["adapter_loads"] < rows["round-robin"]["adapter_loads"]
    with pytest.raises(ParamError, match="loras: 2 is not allowed with mode paper"):
        FleetLab(loras=2, mode="paper").check()
    with pytest.raises(ParamError, match="prefill_replicas: 1 is not allowed with loras 2"):
        FleetLab(loras=2, mode="vllm-v1", prefill_replicas=1).check()
    assert (
        "adapter_loads"
        not in FleetLab(mode="vllm-v1", replicas=2, requests=20, routers="round-robin").run()["routers"][0]
    )


def plan_lab(**kw) -> PlanLab:
    base = dict(
        model="llama-3.1-8b",
        gpus="H100-SXM",
        tps="1",
        weight_precisions="16-bit",
        schedulers="vllm-v1,sglang",
        replicas="2",
        routers="round-robin,lora-affinity",
        loras=8,
        max_loras=2,
        requests=100,
        rate=4.0,
        cost_model="roofline",
    )
    return PlanLab(**{**base, **kw})


def test_the_planner_prunes_schedulers_without_adapters_and_runs_the_rest_as_the_fleet_lab() -> None:
    """The papers' engine's candidates are pruned with a named reason; each vLLM V1 and SGLang
    candidate is a fleet whose replicas have 2 slots of rank 16 taken from their KV cache: the fleet
    lab opened on it gives the same figures to the last bit, its adapter loads included."""
    assert plan_lab(schedulers="paper,vllm-v1").run()["pruned"]["runs no LoRA adapters"] == 2
    lab = plan_lab()
    result = lab.run()
    assert result["pruned"]["runs no LoRA adapters"] == 0 and result["evaluated"] == 4
    for row in result["candidates"]:
        assert row["pruned"] is None
        fleet = FleetLab.of_candidate(lab, Candidate.of(row)).run()["routers"][0]
        assert fleet["ttft_s"]["p50"] == row["ttft_p50_s"] and fleet["adapter_loads"] == row["adapter_loads"]
    v1 = Candidate.of(next(row for row in result["candidates"] if row["scheduler"] == "vllm-v1"))
    slots = replica(v1, lab.workload_spec()).pool.n_blocks + 1
    cost = v1.cost_model("llama-3.1-8b")
    assert slots == cost.kv_capacity_blocks(16) - 2 * 13  # two slots of 13 blocks (test_lora.py)
    assert "adapter_loads" not in plan_lab(loras=0, schedulers="vllm-v1").run()["candidates"][0]


def test_the_planner_prunes_slots_that_leave_no_kv_and_refuses_a_model_without_adapters() -> None:
    """64 slots of rank 256 on every linear layer of Llama-3.1-8B: 64 x 1.34 GB, more than an
    A100-40GB has beside the weights."""
    big = plan_lab(gpus="A100-40GB", schedulers="vllm-v1", routers="round-robin", replicas="1")
    big.param.update(max_loras=64, lora_rank=256, lora_targets="all-linear")
    assert big.run()["pruned"]["no KV cache beside the adapter slots"] == 1
    with pytest.raises(ParamError, match="loras: 2 is not allowed with model gpt-oss-20b; its layers are not all"):
        plan_lab(model="gpt-oss-20b", loras=2).check()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    loras=st.integers(1, 6),
    max_loras=st.integers(1, 3),
    replicas=st.integers(1, 3),
    router=st.sampled_from(list(ROUTERS)),
)
def test_every_request_is_served_once_and_each_adapter_a_replica_served_was_loaded_there(
    seed, loras, max_loras, replicas, router
) -> None:
    requests = with_adapters(poisson_workload("fixed", 30, 20.0, 2048, seed, 64, 8), loras, seed)
    fleet = serve(requests, lambda: lora_v1(max_loras), replicas, router)
    served = fleet.served_by()
    assert sorted(served) == [r.id for r in requests] and not fleet.rejected
    adapter = {r.id: r.adapter for r in requests}
    for i, slots in enumerate(fleet.adapters or []):
        assert slots["loads"] >= len({adapter[q] for q, at in served.items() if at == i})
    if replicas == 1:  # one replica is the single engine, adapters and all
        alone = lora_v1(max_loras).run(requests)
        assert [s.first_token_t for s in fleet.runs[0].sequences] == [s.first_token_t for s in alone.sequences]


def test_a_batch_of_at_most_max_loras_adapters_by_hand():
    """Of a batch of 8: the base model's requests (2 of 8) join any batch; of the adapters' ones, the
    share max_loras times the chance two of them share an adapter gives: adapters 1 (4 requests)
    and 2 (2): (4/6)**2 + (2/6)**2 = 20/36."""
    requests = [Request(i, 0.0, 10, 10, adapter=a) for i, a in enumerate([1, 1, 1, 1, 2, 2, 0, 0])]
    assert adapter_batch(requests, 8, 1) == pytest.approx(8 * (2 / 8 + 6 / 8 * 20 / 36))
    assert adapter_batch(requests, 8, 2) == 8  # two slots: every adapter fits
    assert adapter_batch([Request(0, 0.0, 10, 10)], 8, 1) == 8  # no adapters
    assert adapter_batch(requests[:4], 1, 1) == 1.0  # never below one request


def test_the_fleet_estimate_counts_the_steps_adapter_slots_allow():
    """Fewer slots for the same adapters: smaller batches, more general steps, a larger estimate."""
    values = dict(workload="sharegpt", requests=300, rate=8.0, mode="vllm-v1", loras=64, routers="round-robin")
    one, many = FleetLab(**values, max_loras=1).estimate(), FleetLab(**values, max_loras=8).estimate()
    steps = {e: dict((u.name, n) for n, u in e.parts) for e in (one, many)}
    unit = "decode steps of batches the adapter slots allow"
    assert steps[one][unit] > steps[many][unit] > 0 and one.seconds > many.seconds
    assert unit not in dict((u.name, n) for n, u in FleetLab(**{**values, "loras": 0}).estimate().parts)
