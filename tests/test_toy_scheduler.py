"""A scheduler added in one place (issue 37): a toy mode registered here, in `MODES` only, runs in
the schedulers lab, its view, the fleet's candidates and the planner's choices, with no other file
touched. The toy is first come, first served without preemption, from existing parts: the papers'
engine on memory that reserves each request's maximum length at admission (Orca's reservation),
so nothing ever runs short."""

import sys

import pytest

import kvweb.labs  # noqa: F401  (registers the labs)
from kvweb.fleet.candidate import Candidate, Workload, evaluate
from kvweb.labs.plan import PlanLab
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.modes import MODES, Mode, Settings
from kvweb.serving.memory.allocator import ALLOCATORS
from kvweb.serving.loop.continuous_batching import ContinuousBatching
from kvweb.serving.schedulers.paper_scheduler import PaperConfig, PaperScheduler, paper_refusal
from kvweb.serving.memory.reserved_memory import ReservedMemory


def reserving(s: Settings) -> ContinuousBatching:
    memory = ReservedMemory("max", ALLOCATORS["first-fit"](s.cost.kv_capacity_tokens), s.max_len)
    return PaperScheduler(s.cost, memory, PaperConfig(s.max_len, max_seqs=s.max_seqs), s.slo, s.give_up_after)


TOY = Mode(
    "fcfs",
    reserving,
    "vllm",
    paper_refusal,
    (),
    cell="block",
    prefix_cache=False,
    tiered=False,
    layers_apart="",
    holds_transfers=False,
    hashes_blocks=False,
    stepwise=False,
    color="#2ca02c",
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Mode:
    monkeypatch.setitem(MODES, TOY.name, TOY)
    return TOY


def test_the_toy_runs_in_the_schedulers_lab_beside_the_others(toy, monkeypatch):
    lab = SchedulersLab(requests=60, rate=4.0, workload="sharegpt")
    result = lab.run()
    rows = {m["mode"]: m for m in result["modes"]}
    assert list(rows) == ["paper", "vllm-v1", "sglang", "fcfs"]
    fcfs, paper = rows["fcfs"], rows["paper"]
    assert fcfs["finished"] == result["submitted"] == 60
    assert fcfs["preemptions"] == 0 and paper["preemptions"] > 0  # it reserves; the papers' engine pages and preempts
    # each request holds the scenario's 2,048 tokens: at most capacity // 2,048 run at once
    assert fcfs["max_batch"] <= result["scenario"]["kv_capacity_tokens"] // 2048 < paper["max_batch"]
    assert fcfs["prefix_hit_rate"] == 0.0 and "hit_rate" not in fcfs["trace"]["curves"]  # no prefix cache
    assert len(result["timeline"]["frames"]) == 4  # its frames on the lab's one clock
    with_toy = lab.estimate().seconds  # its run is counted in the lab's work
    monkeypatch.delitem(MODES, toy.name)
    assert 0 < lab.estimate().seconds < with_toy


def test_the_toy_is_drawn_by_the_schedulers_view(toy):
    if sys.platform == "emscripten":
        pytest.skip("the app (Panel) is tested in CPython only")
    from app.views.schedulers import SchedulersView

    lab = SchedulersLab(requests=30, rate=4.0, workload="sharegpt")
    view = SchedulersView()
    view.update(lab, lab.run())
    assert view.maps["fcfs"].figure.visible
    assert view.maps["fcfs"].figure.title.text.startswith("fcfs: ")
    assert "fcfs" not in view.group_maps and "fcfs" not in view.tiered
    assert len(view.curves["fcfs"].data["t"]) > 0


def test_the_toy_serves_a_fleet_and_is_a_planners_choice(toy):
    workload = Workload("llama-3.1-8b", "sharegpt", requests=40, rate=8.0, seed=0, max_len=4096)
    candidate = Candidate("H100-SXM", 1, "16-bit", "16-bit", "fcfs", 2, "round-robin")
    figures = evaluate(candidate, workload, 0)
    assert figures["finished"] + figures["rejected"] == 40 and figures["preemptions"] == 0
    plan = PlanLab(schedulers="fcfs,sglang", gpus="H100-SXM", tps="1", weight_precisions="16-bit", replicas="1")
    assert [c.scheduler for c in plan.candidates()] == ["fcfs", "sglang"]


def test_without_the_toy_the_planner_refuses_its_name():
    with pytest.raises(Exception, match="schedulers: 'fcfs' is not allowed"):
        PlanLab(schedulers="fcfs", gpus="H100-SXM", tps="1", weight_precisions="16-bit", replicas="1").candidates()
