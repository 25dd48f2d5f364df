"""The served app's runs share one bounded pool, so that one session's heavy runs cannot starve
the others.

At most `MAX_RUNNING` runs compute at once on a server, and at most one per session: a session's
run waits while its previous one is still computing (cancelled, it stops: app/runner.py).
A session has at most one run waiting; a newer one takes its place in the queue (the older one
is dropped, never started). Sessions are served in the order their runs came. A run the lab
estimates under `QUICK_S` (`estimate().seconds`, kvweb/budget.py) may also take the quick lane,
`QUICK_LANE` more threads that take only such runs: a light change is answered even while every
slot computes a heavy run. The pool's threads only schedule: the server's pool (`children`)
computes each lab run not estimated quick, and the report, in a child process (app/child.py: lower priority, a
memory and a CPU-time cap per run), so the server's own thread keeps Python's lock. Quick runs
compute in the thread (most take milliseconds, a child's hop about 5 ms, and there they keep the
server's memos), and so do the exercises' answers.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Hashable

# Runs computing at once per server: a core is left to the server's thread, but never fewer than
# two, so that one session's heavy run never holds every slot (docs/site.md). The runs in children
# are niced: on this app's 2-core machines the server's thread still gets the CPU first.
# (the static site imports this module too: Pyodide's `os` has no sched_getaffinity)
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
MAX_RUNNING = max(2, CORES - 1)
QUICK_S = 0.5  # a run estimated under this many seconds may also take the quick lane
QUICK_LANE = 1  # threads that take only quick runs, beside the MAX_RUNNING
log = logging.getLogger(__name__)


class RunPool:
    """`submit(session, run, quick)` calls `run()` in one of `workers` threads (or of the
    `quick_lane`'s, if `quick`), one run per session at a time; `drop(session)` forgets the
    session's waiting run. `children`: the runs given to it compute labs in child processes."""

    def __init__(self, workers: int = MAX_RUNNING, quick_lane: int = QUICK_LANE, children: bool = False) -> None:
        self.children = children
        self._changed = threading.Condition()
        self._waiting: dict[Hashable, tuple[Callable[[], None], bool]] = {}  # one per session, oldest first
        self._running: set[Hashable] = set()
        for quick_only in [False] * workers + [True] * quick_lane:
            threading.Thread(target=self._work, args=(quick_only,), daemon=True, name="kvweb-run").start()

    def submit(self, session: Hashable, run: Callable[[], None], quick: bool = False) -> None:
        """Queue `run` for `session`, in place of the run it has waiting (kept in its turn)."""
        with self._changed:
            self._waiting[session] = run, quick
            self._changed.notify_all()

    def drop(self, session: Hashable) -> None:
        with self._changed:
            self._waiting.pop(session, None)

    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)

    def _next(self, quick_only: bool) -> tuple[Hashable, Callable[[], None]]:
        with self._changed:
            while True:
                session = next(
                    (
                        s
                        for s, (_, quick) in self._waiting.items()
                        if s not in self._running and (quick or not quick_only)
                    ),
                    None,
                )
                if session is not None:
                    self._running.add(session)
                    return session, self._waiting.pop(session)[0]
                self._changed.wait()

    def _work(self, quick_only: bool) -> None:
        while True:
            session, run = self._next(quick_only)
            try:
                run()
            except Exception:  # noqa: BLE001  (e.g. its session's document was destroyed meanwhile)
                log.exception("a run of the served app's pool failed; its thread serves on")
            finally:
                with self._changed:
                    self._running.discard(session)
                    self._changed.notify_all()


_pool: RunPool | None = None
_made = threading.Lock()


def server_pool() -> RunPool:
    """The server's pool, made by its first run (the browser has no threads: it never asks)."""
    global _pool
    with _made:
        if _pool is None:
            _pool = RunPool(children=True)
        return _pool
