"""The served app's run pool (app/pool.py) and the runner on it: a bounded number of runs at
once, one per session, a newer run in place of a waiting one, cancel."""

import sys
import threading
from contextlib import contextmanager

import pytest

if sys.platform == "emscripten":
    pytest.skip("the pool is the served app's (threads)", allow_module_level=True)

import panel as pn  # noqa: E402
from bokeh.document import Document  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

from app.pool import RunPool  # noqa: E402
from app.runner import CANCELLED, HIDDEN, Runner  # noqa: E402
from kvweb.budget import Estimate, constant  # noqa: E402
from kvweb.lab import Lab  # noqa: E402

WAIT = 10  # seconds: a bound for a thread to get going, never a timing goal


class Gate:
    """A run that says when it starts, then waits to be let go."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log
        self.started, self.go = threading.Event(), threading.Event()

    def __call__(self) -> None:
        self.log.append(self.name)
        self.started.set()
        assert self.go.wait(WAIT)


def test_at_most_workers_runs_at_once_and_one_per_session():
    log: list[str] = []
    pool = RunPool(workers=2)
    a1, b1, a2, c1 = (Gate(n, log) for n in ("a1", "b1", "a2", "c1"))
    pool.submit("a", a1)
    pool.submit("b", b1)
    assert a1.started.wait(WAIT) and b1.started.wait(WAIT)
    pool.submit("a", a2)  # a is computing: a2 waits, though...
    pool.submit("c", c1)
    a1.go.set()  # ...a1's slot frees first: a2 came first, it goes first
    assert a2.started.wait(WAIT)
    assert not c1.started.is_set()  # both slots taken (b1, a2)
    b1.go.set()
    assert c1.started.wait(WAIT)
    a2.go.set()
    c1.go.set()
    assert sorted(log[:2]) == ["a1", "b1"] and log[2:] == ["a2", "c1"]


def test_a_newer_run_replaces_the_waiting_one_in_its_turn():
    log: list[str] = []
    pool = RunPool(workers=1)
    busy, first, other, newer = (Gate(n, log) for n in ("busy", "first", "other", "newer"))
    pool.submit("x", busy)
    assert busy.started.wait(WAIT)
    pool.submit("a", first)
    pool.submit("b", other)
    pool.submit("a", newer)  # a's waiting run is replaced; a keeps its turn before b
    assert pool.waiting() == 2
    for gate in (busy, newer, other):
        gate.go.set()
    assert other.started.wait(WAIT)
    assert log == ["busy", "newer", "other"]
    pool.drop("b")  # nothing waits: dropping is harmless
    assert pool.waiting() == 0


def test_a_quick_run_takes_the_quick_lane_while_every_slot_computes():
    log: list[str] = []
    pool = RunPool(workers=1, quick_lane=1)
    heavy, quick, other, quick_too = (Gate(n, log) for n in ("heavy", "quick", "other", "quick too"))
    pool.submit("a", heavy)
    assert heavy.started.wait(WAIT)
    pool.submit("b", other)  # not quick: waits for the slot
    pool.submit("c", quick, quick=True)  # passes it, in the quick lane
    assert quick.started.wait(WAIT)
    pool.submit("a", quick_too, quick=True)  # still one run per session: a's heavy one computes
    quick.go.set()
    assert not other.started.is_set() and not quick_too.started.is_set()
    heavy.go.set()  # the slot takes the oldest waiting (b); the lane takes a's quick one
    assert other.started.wait(WAIT) and quick_too.started.wait(WAIT)
    other.go.set()
    quick_too.go.set()
    assert log[:2] == ["heavy", "quick"] and sorted(log[2:]) == ["other", "quick too"]


def test_drop_forgets_the_waiting_run():
    log: list[str] = []
    pool = RunPool(workers=1)
    busy, dropped, after = (Gate(n, log) for n in ("busy", "dropped", "after"))
    pool.submit("x", busy)
    assert busy.started.wait(WAIT)
    pool.submit("a", dropped)
    pool.drop("a")
    pool.submit("b", after)
    busy.go.set()
    after.go.set()
    assert after.started.wait(WAIT)
    assert log == ["busy", "after"]


def test_a_run_that_raises_leaves_its_thread_serving():
    # A run's end reaches its session through the session's document; a session that ended while its
    # run computed has none left, and raising there once ended the thread: runs after it never started.
    pool = RunPool(workers=1, quick_lane=0)

    def late() -> None:
        raise RuntimeError("Attempting to add session callback to already-destroyed Document")

    pool.submit("closed", late)
    after = threading.Event()
    pool.submit("next", after.set)
    assert after.wait(WAIT)


class Steps(Lab):
    """A run of many progress reports; `release` lets it go on after its first one."""

    release: threading.Event
    reached: threading.Event

    def estimate(self) -> Estimate:
        return constant(5.0)

    def run(self, progress=None):
        for i in range(1000):
            progress(i / 1000, "step")
            if i == 0:
                self.reached.set()
                assert self.release.wait(WAIT)
        return {"steps": 1000}


def steps() -> Steps:
    lab = Steps()
    lab.release, lab.reached = threading.Event(), threading.Event()
    return lab


class Finished:
    def __init__(self) -> None:
        self.outcomes: list[tuple] = []
        self.done = threading.Event()

    def __call__(self, result, error) -> None:
        self.outcomes.append((result, error))
        self.done.set()


@contextmanager
def session(monkeypatch, pool: RunPool):
    """A session's runner on `pool`, its document's next-tick callbacks run by hand."""
    doc = Document()
    ticks: list = []
    doc.add_next_tick_callback = ticks.append  # the server would run them under the lock
    monkeypatch.setattr(pn.state, "add_periodic_callback", lambda *a, **k: None)  # no server loop here
    monkeypatch.setattr("app.runner.under_lock", lambda callback: callback())
    with set_curdoc(doc):
        yield Runner(pool), ticks


@pytest.fixture
def served(monkeypatch):
    """A session's runner on its own pool."""
    with session(monkeypatch, RunPool(workers=1)) as runner_and_ticks:
        yield runner_and_ticks


def run_ticks(ticks: list, until: threading.Event | None = None, wait: int = WAIT) -> None:
    for _ in range(wait * 100):
        while ticks:
            ticks.pop(0)()
        if until is None or until.is_set():
            return
        threading.Event().wait(0.01)
    raise AssertionError("the run's callback never came")


def test_cancel_stops_the_running_lab_at_its_next_report(served):
    runner, ticks = served
    lab, finished = steps(), Finished()
    runner.start(lab, finished)
    assert lab.reached.wait(WAIT)
    runner.cancel.clicks += 1  # the cancel button
    assert finished.outcomes == [(None, CANCELLED)]  # said at once
    lab.release.set()
    ended = threading.Event()
    runner.pool.submit("probe", ended.set)  # one worker: this runs once the cancelled run has ended
    assert ended.wait(WAIT)
    run_ticks(ticks)
    assert finished.outcomes == [(None, CANCELLED)]  # the run's own end is dropped


def test_a_sessions_newer_run_cancels_its_running_one_and_replaces_its_waiting_one(served):
    runner, ticks = served
    running, waiting, newest = steps(), steps(), steps()
    first, second, third = Finished(), Finished(), Finished()
    runner.start(running, first)
    assert running.reached.wait(WAIT)
    runner.start(waiting, second)  # waits: the session's run is still computing
    runner.start(newest, third)  # in its place
    assert runner.pool.waiting() == 1
    running.release.set()  # it stops at its next report (Cancelled), and the newest starts
    newest.release.set()
    run_ticks(ticks, third.done)
    assert first.outcomes == [] and second.outcomes == [] and not waiting.reached.is_set()
    assert third.outcomes == [({"steps": 1000}, None)]


class Light(Lab):
    seconds = 1.0  # its work estimate (kvweb/budget.py)

    def run(self, progress=None):
        return {}

    def estimate(self) -> Estimate:
        return constant(self.seconds)


class Estimated(Light):
    seconds = 0.1


class Submitted:
    """A pool that only records whether each run was sent to the quick lane."""

    children = False

    def __init__(self) -> None:
        self.quick: list[bool] = []

    def submit(self, session, run, quick=False) -> None:
        self.quick.append(quick)


def test_the_runner_sends_runs_estimated_quick_to_the_quick_lane(served):
    pool = Submitted()
    runner = Runner(pool)
    heavy = Estimated()
    heavy.seconds = 12.0
    job = type("ReportLikeJob", (), {"run": lambda self, progress=None: {}})()  # no lab: no estimate
    for lab in (Estimated(), heavy, Light(), job):  # estimated 0.1, 12 and 1 s, and not at all
        runner.start(lab, Finished())
    assert pool.quick == [True, False, False, False]


def test_a_tick_after_the_run_ended_leaves_the_bar_hidden(served, monkeypatch):
    # A periodic callback added while the session was being created can start only once the page has
    # connected, after a quick first run ended: its ticks must not show the last run's bar again.
    runner, ticks = served
    lab, finished = steps(), Finished()
    runner.start(lab, finished)
    assert lab.reached.wait(WAIT)
    monkeypatch.setattr(runner, "_started", runner._started - 1.0)  # past SHOW_AFTER_S
    runner._tick()
    assert runner.bar.styles != HIDDEN and runner.left.text.startswith("0 %")  # while it runs
    lab.release.set()
    run_ticks(ticks, finished.done)
    assert finished.outcomes == [({"steps": 1000}, None)] and runner.bar.styles == HIDDEN
    runner._tick()  # the late tick
    assert runner.bar.styles == HIDDEN


def test_a_ticker_that_starts_after_its_run_ended_stops_at_its_first_tick(served, monkeypatch):
    # Panel defers a periodic callback added while the session is being created until the page has
    # connected; the ticker of a quick first run may start only after the run ended (and was told
    # to stop): it must not tick on, idle, until the session ends.
    runner, ticks = served
    added = []

    class Ticker:
        running = True

        def stop(self) -> None:
            self.running = False

    monkeypatch.setattr(
        pn.state, "add_periodic_callback", lambda callback, period: added.append((callback, Ticker())) or added[-1][1]
    )
    lab, finished = steps(), Finished()
    runner.start(lab, finished)
    lab.release.set()
    run_ticks(ticks, finished.done)
    ((tick, ticker),) = added
    assert finished.outcomes == [({"steps": 1000}, None)] and not ticker.running  # stopped with the run
    ticker.running = True  # ... and Panel starts it now, as the page connects
    tick()
    assert not ticker.running and runner.bar.styles == HIDDEN


def test_the_ticker_delivers_a_run_whose_next_tick_went_missing_and_only_once(served):
    # The run's thread asks the document for a next tick to deliver its outcome; one added while the
    # session was still being set up was seen to go missing under load: the ticker delivers it then.
    runner, ticks = served
    lab, finished = steps(), Finished()
    runner.start(lab, finished)
    lab.release.set()
    for _ in range(WAIT * 100):
        if ticks:
            break
        threading.Event().wait(0.01)
    lost = ticks.pop()  # the document's tick never comes
    assert finished.outcomes == []
    runner._tick()
    assert finished.outcomes == [({"steps": 1000}, None)] and runner.bar.styles == HIDDEN
    lost()  # had it come after all: nothing is delivered twice
    runner._tick()
    assert finished.outcomes == [({"steps": 1000}, None)]


def test_nothing_is_drawn_before_the_page_has_connected(served, monkeypatch):
    # A change to a session's document after it was sent with the page and before the page connects
    # never reaches the page: a first run that ends in that window waits for the page (Panel's onload).
    runner, ticks = served
    monkeypatch.setattr(type(pn.state), "loaded", property(lambda self: False))
    lab, finished = steps(), Finished()
    runner.start(lab, finished)
    monkeypatch.setattr(runner, "_started", runner._started - 1.0)  # past SHOW_AFTER_S
    lab.release.set()
    for _ in range(WAIT * 100):
        if ticks:
            break
        threading.Event().wait(0.01)
    while ticks:
        ticks.pop(0)()
    runner._tick()
    assert finished.outcomes == [] and runner.bar.styles == HIDDEN  # not yet: the page has not connected
