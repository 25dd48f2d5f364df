"""A served app's run (a lab's, or the report) in a child process of its own, so that it cannot slow the server's
thread or take more than its share of memory and time.

Lab runs are CPU-bound Python: in a thread of the server they hold Python's lock (the GIL)
against the thread that builds pages and answers widgets. In a child process they do not; the
child also runs at a lower CPU priority (`NICE`), so the server answers first, under a memory cap
(`MEMORY_CAP_MB` of address space) and a cap of CPU time (`CPU_CAP_S`), which only a process can
have: a run past either is stopped with one message. A cancel ends the child at once.

Only the lab's name and parameter values go over (the child makes the lab from them, as the CLI
does), or for another job the library function its `in_child()` names (the report's), and
progress reports and the JSON-able result come back. Each thread of the server's pool
that computes in children has a helper process (`python -m app.child`) that imported the library
once and forks one child per run, so a child starts in milliseconds, not in the second an
import of numpy and the labs takes (multiprocessing's own forkserver would import the server's
main script, Panel with it, in every child). Each run has its own socket pair to the parent: a
child that dies mid-message reads there as the end of its run, never as the next run's data.
Memos (kvweb/memo.py) a child fills end with it. Not imported in the browser (Pyodide has no
processes): there the runner calls the lab.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
from contextlib import suppress
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle
from pathlib import Path
from collections.abc import Callable
from typing import Any

from kvweb.budget import BUDGET_S
from kvweb.jsonable import jsonable
from kvweb.lab import Lab, ParamError, Progress, get_lab

NICE = 10  # added to the child's niceness: the server's thread gets the CPU first
MEMORY_CAP_MB = 1024  # address space per run; the heaviest run the budget admits peaks at 607 (docs/site.md)
CPU_CAP_S = 3 * BUDGET_S  # CPU seconds per run: the estimate admits up to BUDGET_S; its worst miss is 1.13x
POLL_S = 0.1  # the parent looks for a cancel at least this often
REPORT_S = 0.05  # the child sends at most one progress report this often
MEMORY_MESSAGE = "this run needed more than {0} MB of memory, the served app's cap per run; it was stopped"
CPU_MESSAGE = "this run computed for more than {0} s, the served app's cap per run; it was stopped"
ENDED_MESSAGE = "this run's process ended without a result ({0})"
ROOT = Path(__file__).resolve().parents[1]  # where `app` is imported from


Work = tuple[Callable[..., Any], dict[str, Any]]  # a module's function (sent by name), its keyword arguments


class Failed(RuntimeError):
    """The child's run raised something other than a refusal: its traceback, for the server's log."""


def run_in_child(
    job: Any, progress: Progress, memory_cap_mb: int = MEMORY_CAP_MB, cpu_cap_s: float = CPU_CAP_S
) -> dict[str, Any]:
    """`jsonable(job.run(progress))`, computed in a child process, which is gone on return.
    `job` is a lab, or a job with `in_child()`: the library function (and its keyword arguments)
    that computes what its `run` would, called with `progress=`.

    `progress` gets the child's reports, and the last one again every `POLL_S`: raising there
    (kvweb.lab.Cancelled) kills the child at once. A refusal in the child is raised here as the
    ParamError it was; a run over a cap, or a child that died, as a ParamError whose message
    says so; any other error as `Failed`."""
    helper = _helper()
    mine, theirs = Pipe()
    try:
        helper.control.send((work_of(job), memory_cap_mb, cpu_cap_s))
        send_handle(helper.control, theirs.fileno(), helper.process.pid)
        pid = helper.control.recv()
    except (OSError, EOFError):
        _helpers.helper = None  # it died: the next run starts another
        mine.close()
        raise
    finally:
        theirs.close()  # the child's end is the child's now
    ended = answered = False
    try:
        fraction, message = 0.0, ""
        while True:
            if not mine.poll(POLL_S):
                progress(fraction, message)
                continue
            try:
                kind, value = mine.recv()
            except (EOFError, OSError):  # it died, maybe mid-message
                ended = True
                raise ParamError(_ended(helper.control.recv(), cpu_cap_s)) from None
            if kind == "progress":
                fraction, message = value
                progress(fraction, message)
                continue
            answered = True  # the child ends by itself
            if kind == "result":
                return value
            elif kind == "refused":
                raise ParamError(value)
            elif kind == "memory":
                raise ParamError(MEMORY_MESSAGE.format(memory_cap_mb))
            else:
                raise Failed(value)
    finally:
        mine.close()
        if not ended:
            if not answered:
                with suppress(ProcessLookupError):  # it may have ended just now
                    os.kill(pid, signal.SIGKILL)  # cancelled: its run is of no use any more
            helper.control.recv()  # its exit status: the child is gone, the helper ready


class Helper:
    """A helper process (`serve` below) and the control connection to it."""

    def __init__(self) -> None:
        self.control, theirs = Pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.child", str(theirs.fileno())], pass_fds=[theirs.fileno()], env=env, cwd=ROOT
        )
        theirs.close()


_helpers = threading.local()


def _helper() -> Helper:
    """This thread's helper (each pool thread runs one run at a time, so it has its own)."""
    helper = getattr(_helpers, "helper", None)
    if helper is None or helper.process.poll() is not None:
        helper = _helpers.helper = Helper()
    return helper


def serve(control: Connection) -> None:
    """The helper: for each run the parent asks for, fork a child that computes it on the run's
    own connection, then tell the parent the child's pid and, once it is gone, its exit code."""
    import kvweb.labs  # noqa: F401  (registers every lab, once, before any fork)

    while True:
        try:
            job = control.recv()
        except EOFError:
            return  # the server ended
        run = Connection(recv_handle(control))
        pid = os.fork()
        if pid == 0:
            control.close()
            try:
                _compute(run, *job)
            finally:
                os._exit(0)
        run.close()
        control.send(pid)
        control.send(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))


def _ended(exitcode: int | None, cpu_cap_s: float) -> str:
    if exitcode == -signal.SIGXCPU:
        return CPU_MESSAGE.format(f"{cpu_cap_s:g}")
    return ENDED_MESSAGE.format(
        f"signal {signal.Signals(-exitcode).name}" if exitcode and exitcode < 0 else f"exit code {exitcode}"
    )


def work_of(job: Any) -> Work:
    if isinstance(job, Lab):
        return lab_run, {"name": job.lab_name, "values": job.values()}
    return job.in_child()


def lab_run(name: str, values: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """A lab's run, the lab made in the child from its name and values."""
    return get_lab(name)(**values).run(progress)


def _compute(conn: Connection, work: Work, memory_cap_mb: int, cpu_cap_s: float) -> None:
    """The child: lower priority, the caps, then the run; every outcome is one message back."""
    os.nice(NICE)
    cap = memory_cap_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_cap_s), int(cpu_cap_s) + 5))  # SIGXCPU, then SIGKILL
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU would leave a core file
    sent = 0.0

    def report(fraction: float, message: str) -> None:
        nonlocal sent
        if time.monotonic() - sent >= REPORT_S:
            sent = time.monotonic()
            conn.send(("progress", (fraction, message)))

    try:
        function, kwargs = work
        outcome: tuple[str, Any] = "result", jsonable(function(progress=report, **kwargs))
    except ParamError as err:
        outcome = "refused", str(err)
    except MemoryError:
        outcome = "memory", None
    except Exception:  # noqa: BLE001  (sent to the server, which raises it in its log)
        outcome = "failed", traceback.format_exc()
    conn.send(outcome)
    conn.close()


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
