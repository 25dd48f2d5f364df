"""The loop advanced from outside (`start`, `advance` to a time or by iterations, `result`), as a
fleet of engines on one clock will drive it, gives every figure of a whole `run`, to the last bit,
for each of the three schedulers."""

from __future__ import annotations

import pytest

import kvweb.labs  # noqa: F401  (registers the labs)
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.modes import MODES
from kvweb.serving.loop.continuous_batching import ContinuousBatching
from kvweb.serving.loop.engine_trace import TraceRecorder
from kvweb.serving.loop.sequence import Run
from kvweb.serving.load.workload import Request
from test_speed_exact import same_run


def recorder(requests: list[Request]) -> TraceRecorder:
    return TraceRecorder(max(r.arrival for r in requests) / 200, extra_curves=("cached", "hit_rate"))


def in_pieces(engine: ContinuousBatching, requests: list[Request], cuts: list[float]) -> Run:
    """The run advanced to each time in `cuts`, a few iterations one by one after each."""
    engine.start(requests, trace=recorder(requests))
    for t in cuts:
        assert engine.advance(t)
        # every iteration that starts before t has run: the clock is at t or past it, or idle
        assert engine.now >= t or not (engine.running or engine.waiting or engine.busy)
        before = engine.step
        assert engine.advance(iterations=3)
        assert engine.step - before <= 3
    assert not engine.advance()
    return engine.result()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workload, rate", [("scenario", 8.0), ("multi-turn", 3.0)])
def test_advancing_in_pieces_is_the_whole_run(mode: str, workload: str, rate: float):
    lab = SchedulersLab(workload=workload, requests=120, rate=rate)
    requests = lab.workload_at(rate)
    whole = lab.scheduler(mode).run(requests, trace=recorder(requests))
    assert whole.preemptions > 0 or workload == "multi-turn"  # (the scenario's rate fills the memory)
    cuts = [whole.sim_time * f for f in (0.013, 0.2, 0.21, 0.5, 0.77, 0.9)]
    same_run(in_pieces(lab.scheduler(mode), requests, cuts), whole)


@pytest.mark.parametrize("mode", MODES)
def test_a_run_that_gives_up_stops_where_the_whole_run_does(mode: str):
    lab = SchedulersLab(workload="scenario", requests=150, rate=20.0)
    requests = lab.workload_at(20.0)
    whole = lab.scheduler(mode, give_up_after=5).run(requests, trace=recorder(requests))
    assert whole.stopped_early
    engine = lab.scheduler(mode, give_up_after=5)
    engine.start(requests, trace=recorder(requests))
    t = 0.0
    while engine.advance(t):
        t += 0.37
    same_run(engine.result(), whole)
