"""A served run in a child process (app/child.py): the library's result, progress, the caps'
messages, and a cancelled child gone; the runner on a pool that computes in children."""

import os
import sys
import threading
from contextlib import suppress
from functools import partial

import pytest

if sys.platform == "emscripten":
    pytest.skip("child processes are the served app's", allow_module_level=True)


import kvweb.labs  # noqa: E402, F401
import panel as pn  # noqa: E402
from app import i18n  # noqa: E402
from app.i18n import tr_message  # noqa: E402
from app.child import CPU_MESSAGE, MEMORY_MESSAGE, run_in_child  # noqa: E402
from app.pool import RunPool  # noqa: E402
from app.runner import CANCELLED  # noqa: E402
from kvweb.jsonable import jsonable  # noqa: E402
from kvweb.lab import Cancelled, ParamError, get_lab  # noqa: E402
from kvweb.reproduce import reproduce  # noqa: E402
from test_pool import Finished, session  # noqa: E402
from test_pool import run_ticks as pool_run_ticks  # noqa: E402

WAIT = 30  # seconds: a bound for a child to get going, never a timing goal


def heavy_blocks():
    """block-tables at its caps: about 100 MB more memory than a child starts with, and 0.7 s."""
    return get_lab("block-tables")(prompt_a=256, prompt_b=256, decode_steps=128, block_size=64, num_blocks=256)


def children_of(pid: int | str) -> list[int]:
    """Linux lists each thread's child processes; a thread or process that ended while we read
    (a helper whose pool thread is gone exits on its own) has none."""
    out = []
    with suppress(FileNotFoundError, ProcessLookupError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with suppress(FileNotFoundError, ProcessLookupError), open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    return out


def runs_computing() -> list[int]:
    """The children the helpers of this process are running."""
    return [run for helper in children_of("self") for run in children_of(helper)]


def new_run_computing(before: list[int]) -> list[int]:
    """The run children that were not there `before`, once there is one (an earlier test's child,
    still ending, is not this test's)."""
    for _ in range(WAIT * 100):
        computing = [pid for pid in runs_computing() if pid not in before]
        if computing:
            return computing
        threading.Event().wait(0.01)
    raise AssertionError("no child started computing")


@pytest.mark.parametrize(
    "name, values", [("block-tables", {"seed": 3}), ("engine", {"requests": 40}), ("prefix-hash", {})]
)
def test_a_childs_result_is_the_librarys(name, values):
    reports = []
    result = run_in_child(get_lab(name)(**values), lambda fraction, message: reports.append(fraction))
    assert result == jsonable(get_lab(name)(**values).run())
    assert all(0 <= f <= 1 for f in reports)


def test_a_refusal_in_the_child_comes_back_as_its_message():
    lab = get_lab("block-tables")()
    lab.lab_name = "no-such-lab"  # the child cannot make it: the library's own refusal
    with pytest.raises(ParamError, match="^unknown lab 'no-such-lab'; allowed: "):
        run_in_child(lab, lambda fraction, message: None)


def test_a_run_over_the_memory_cap_is_stopped_with_the_message():
    with pytest.raises(ParamError) as refused:
        run_in_child(heavy_blocks(), lambda fraction, message: None, memory_cap_mb=200)
    assert str(refused.value) == MEMORY_MESSAGE.format(200)
    assert str(refused.value).startswith("this run needed more than 200 MB of memory")
    i18n.use("zh")
    try:
        assert tr_message(str(refused.value)) == "这次运行需要超过 200 MB 内存（服务端每次运行的上限），已被停止"
    finally:
        i18n.use("en")
    assert run_in_child(heavy_blocks(), lambda fraction, message: None)["peak_used_blocks"] > 0  # fits the real cap


def test_a_run_over_the_cpu_cap_is_stopped_with_the_message():
    with pytest.raises(ParamError) as refused:
        run_in_child(
            get_lab("paged-equivalence")(requests=8, prompt_len=128, output_len=64, block_size=64),
            lambda fraction, message: None,
            cpu_cap_s=1,
        )
    assert (
        str(refused.value)
        == CPU_MESSAGE.format(1)
        == "this run computed for more than 1 s, the served app's cap per run; it was stopped"
    )


def test_a_cancelled_child_is_gone_and_the_helper_runs_the_next():
    seen = []

    def cancel(fraction, message):
        seen.extend(runs_computing())
        raise Cancelled

    with pytest.raises(Cancelled):
        run_in_child(get_lab("paged-equivalence")(requests=8, prompt_len=128, output_len=64), cancel)
    assert len(seen) == 1 and not os.path.exists(f"/proc/{seen[0]}")
    assert run_in_child(get_lab("roofline")(), lambda fraction, message: None) == jsonable(get_lab("roofline")().run())


def end_session() -> None:
    """What Bokeh does when it discards the current session (its page closed, or never connected)."""
    for callback in pn.state.curdoc.session_destroyed_callbacks:
        callback(None)


@pytest.fixture
def served(monkeypatch):
    """A session's runner on a pool that computes in children."""
    with session(monkeypatch, RunPool(workers=1, quick_lane=0, children=True)) as runner_and_ticks:
        yield runner_and_ticks
        end_session()  # a test that failed midway leaves no child computing into the next one


run_ticks = partial(pool_run_ticks, wait=WAIT)


def test_the_runner_computes_a_lab_in_a_child(served, monkeypatch):
    runner, ticks = served
    monkeypatch.setattr(get_lab("block-tables"), "run", lambda self, progress=None: pytest.fail("ran here"))
    lab, finished = get_lab("block-tables")(seed=3), Finished()
    assert lab.estimate().seconds >= 0.5  # not quick: a child's
    runner.start(lab, finished)
    run_ticks(ticks, finished.done)
    monkeypatch.undo()
    assert finished.outcomes == [(jsonable(get_lab("block-tables")(seed=3).run()), None)]


def test_cancel_kills_the_runners_child(served):
    runner, ticks = served
    lab, finished = get_lab("paged-equivalence")(requests=8, prompt_len=128, output_len=64), Finished()
    before = runs_computing()
    runner.start(lab, finished)
    computing = new_run_computing(before)
    runner.cancel.clicks += 1
    assert finished.outcomes == [(None, CANCELLED)]  # said at once
    ended = threading.Event()
    runner.pool.submit("probe", ended.set)  # one worker: this runs once the cancelled run has ended
    assert ended.wait(WAIT)
    run_ticks(ticks, ended)
    assert len(computing) == 1 and not os.path.exists(f"/proc/{computing[0]}")
    assert finished.outcomes == [(None, CANCELLED)]  # the run's own end is dropped


def test_a_newer_run_kills_the_sessions_child_and_replaces_its_waiting_run(served):
    runner, ticks = served
    running, waiting, newest = (
        get_lab("paged-equivalence")(requests=8, prompt_len=128, output_len=64),
        get_lab("block-tables")(seed=4),
        get_lab("block-tables")(seed=3),
    )
    first, second, third = Finished(), Finished(), Finished()
    before = runs_computing()
    runner.start(running, first)
    computing = new_run_computing(before)
    runner.start(waiting, second)  # the running one is cancelled: its child killed
    runner.start(newest, third)  # in place of the waiting one
    run_ticks(ticks, third.done)
    assert first.outcomes == [] and second.outcomes == []
    assert third.outcomes == [(jsonable(get_lab("block-tables")(seed=3).run()), None)]
    assert len(computing) == 1 and not os.path.exists(f"/proc/{computing[0]}")


def test_a_sessions_end_kills_its_child(served):
    """A bare request of a URL draws the URL's lab (app/router.py): if no page ever connects, its
    run must not go on holding a slot."""
    runner, ticks = served
    finished = Finished()
    before = runs_computing()
    runner.start(get_lab("paged-equivalence")(requests=8, prompt_len=128, output_len=64), finished)
    computing = new_run_computing(before)
    end_session()
    ended = threading.Event()
    runner.pool.submit("probe", ended.set)  # one worker: this runs once the killed run has ended
    assert ended.wait(WAIT)
    run_ticks(ticks, ended)
    assert len(computing) == 1 and not os.path.exists(f"/proc/{computing[0]}") and finished.outcomes == []


def test_a_sessions_end_drops_its_waiting_run(served):
    runner, ticks = served
    other, holding, finished = threading.Event(), threading.Event(), Finished()
    runner.pool.submit("other", lambda: (holding.set(), other.wait()))  # another session's run holds the one slot
    assert holding.wait(WAIT)
    runner.start(get_lab("block-tables")(seed=3), finished)
    assert runner.pool.waiting() == 1
    end_session()
    assert runner.pool.waiting() == 0
    other.set()
    ended = threading.Event()
    runner.pool.submit("probe", ended.set)
    assert ended.wait(WAIT)
    run_ticks(ticks, ended)
    assert finished.outcomes == []  # it never ran: it came before the probe, which the one worker ran


class PartOfTheReport:
    """A job that is no lab: its child computes the library function its `in_child` names."""

    def in_child(self):
        return reproduce, {"quick": True, "only": ["paper-gpu", "recovery"]}


def test_a_job_with_in_child_computes_its_library_function_there():
    reports = []
    report = run_in_child(PartOfTheReport(), lambda fraction, message: reports.append(message))
    here = jsonable(reproduce(quick=True, only=["paper-gpu", "recovery"]))

    def timeless(r):  # all but the times it took
        return {**r, "seconds": 0, "sections": [{**s, "seconds": 0} for s in r["sections"]]}

    assert [s["key"] for s in report["sections"]] == ["paper-gpu", "recovery"]
    assert timeless(report) == timeless(here)
    assert reports  # its progress came back (at most one report each REPORT_S)
