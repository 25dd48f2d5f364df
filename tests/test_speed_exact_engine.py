"""Speed-ups of the serving engine and its labs that must change nothing (issue 12): the engine's
quiet steps while the queue is blocked and requests are refused, the max-rate trials a search
reuses, the sweep points a change leaves alone: each gives, to the last bit, what the plain
computation gives."""

from __future__ import annotations

import pytest

from kvweb.jsonable import jsonable
from kvweb.memo import clear_memos
from kvweb.parsing import make
from kvweb.labs import max_rate, sweep
from kvweb.labs.max_rate import Trial, trial
from kvweb.serving.schedulers.paper_scheduler import PaperScheduler
from kvweb.serving.loop.engine_setup import Setup
from kvweb.serving.load.workload import Request
from test_speed_exact import fresh, full_path, same_run, warm


# -- the engine: quiet steps while the queue's head is blocked -----------------------------------
@pytest.mark.parametrize("memory", ["oracle", "max", "paged"])
@pytest.mark.parametrize("trace", [False, True])
def test_quiet_steps_with_a_blocked_queue_change_nothing(memory: str, trace: bool, monkeypatch: pytest.MonkeyPatch):
    setup = Setup("A", memory)
    requests = setup.workload(200, 5.0, seed=4)  # overloaded: the queue's head waits most of the run
    blocked = []
    submit = PaperScheduler._submit

    def counted(engine: PaperScheduler, request: Request) -> None:
        blocked.append(engine.blocked)
        submit(engine, request)

    monkeypatch.setattr(PaperScheduler, "_submit", counted)
    run = setup.run(requests, trace=trace)
    assert sum(blocked) > 50  # arrivals to a blocked queue
    same_run(run, full_path(setup, requests, trace))


def test_a_refused_arrival_gives_up_where_the_plain_loop_does():
    """A request that can never run is a miss, maybe one too many: the run gives up exactly where
    the step-by-step loop does, also when the queue is blocked."""
    setup = Setup("A", "max")
    requests = setup.workload(150, 6.0, seed=2)
    long = Request(len(requests), requests[40].arrival + 1e-6, 2000, 100)  # longer than the model allows
    requests = sorted([*requests, long], key=lambda r: r.arrival)
    requests = [Request(i, r.arrival, r.prompt, r.output) for i, r in enumerate(requests)]
    assert len(setup.run(requests).rejected) == 1
    stopped = []
    for give_up in (None, 3, 30):
        run = setup.run(requests, trace=True, give_up_after=give_up)
        same_run(run, full_path(setup, requests, True, give_up=give_up))
        stopped.append(run.stopped_early)
    assert stopped == [False, True, True]


# -- max-rate: a remembered trial answers for the give-up levels it claims ---------------------
@pytest.mark.parametrize("kind, rate", [("oracle", 0.8), ("oracle", 1.6), ("paged", 2.2), ("max", 0.5)])
def test_a_trial_answers_exactly_for_the_give_up_levels_it_claims(kind: str, rate: float):
    setup = Setup("A", kind)
    base = setup.workload(120, 1.0, seed=5)
    seen = {allowed: trial(setup, base, rate, allowed) for allowed in (0, 2, 6, 12, 24, 120)}
    claims = 0
    for allowed, t in seen.items():
        for other, u in seen.items():
            if t.answers(other):
                claims += 1
                assert (u.met, u.throughput) == (t.met, t.throughput), (allowed, other)
    assert claims > len(seen)  # some trial answers for a level it did not run at
    assert Trial(5, None, None).answers(5) and not Trial(5, None, None).answers(6)
    assert Trial(5, 0.9, 1.0).answers(5) and not Trial(5, 0.9, 1.0).answers(4)


def test_max_rate_reuses_trials_across_targets_and_tolerances():
    small = {"requests": "60", "rel_tol": "0.1"}
    changes = [
        {},
        {"target": "0.95"},
        {"rel_tol": "0.05"},
        {"target": "0.8"},
        {"seed": "2"},
        {"tp": "2"},
        {"preemption": "swap"},
        {"target": "0.95", "rel_tol": "0.05"},
        {},
    ]
    expected = [fresh("max-rate", small, c) for c in changes]
    assert len({repr(e) for e in expected}) >= 6  # the changes do change the result
    clear_memos()
    assert [warm("max-rate", small, c) for c in changes] == expected
    assert len(max_rate._SEARCHES) <= max_rate.SEARCHES_KEPT


def test_a_tolerance_change_runs_nothing_new(monkeypatch: pytest.MonkeyPatch):
    small = {"requests": "60", "rel_tol": "0.05"}
    runs = []

    def counted(*args: object) -> Trial:
        runs.append(args[2])
        return trial(*args)

    monkeypatch.setattr(max_rate, "trial", counted)
    clear_memos()
    warm("max-rate", small, {})
    assert len(runs) >= 4 * 5
    runs.clear()
    warm("max-rate", small, {"rel_tol": "0.1"})  # the same bisection, stopped sooner
    assert runs == []
    warm("max-rate", small, {"target": "0.8"})  # the same first trials, some new ones
    assert 0 < len(runs) < 4 * 5


# -- sweep: remembered points ------------------------------------------------------------------
def test_sweep_remembers_points_and_they_are_the_points():
    small = {"requests": "40"}
    changes = [
        {},
        {"block_size": "32"},
        {"sweep": "watermark"},
        {"watermark": "0.05"},
        {"sweep": "preemption"},
        {"rate": "3"},
        {"seed": "1"},
        {"allocator": "buddy"},
        {"sweep": "watermark", "block_size": "8"},
        {"preemption": "swap"},
        {"ttft_slo_s": "0.5"},
        {},
    ]
    expected = [fresh("sweep", small, c) for c in changes]
    clear_memos()
    assert [warm("sweep", small, c) for c in changes] == expected
    assert len(sweep._POINTS) <= sweep.POINTS_KEPT


@pytest.mark.parametrize(
    "change",
    [
        {"rate": "3"},
        {"seed": "1"},
        {"watermark": "0.05"},
        {"preemption": "swap"},
        {"ttft_slo_s": "0.5"},
        {"scenario": "B"},
        {"requests": "121"},
    ],
)
def test_every_input_of_a_sweep_point_is_in_its_key(change: dict[str, str]):
    small = {"requests": "120", "rate": "8", "sweep": "block_size"}
    clear_memos()
    before = jsonable(make("sweep", small).run())["rows"]
    after = jsonable(make("sweep", {**small, **change}).run())["rows"]
    assert after != before
    assert after == fresh("sweep", small, change)["rows"]
