"""Running a lab without freezing the app: progress, cancel, and only the latest run counts.

Under `panel serve` a run goes to the server's bounded pool (app/pool.py), which computes a lab
run not estimated quick, and the report, in a child process (app/child.py), so the server keeps answering; a
periodic callback shows the lab's progress and the cancel button stops it: a child is killed
within `POLL_S`, a run in a thread stops at its next progress report. In the browser (Pyodide)
the app already runs in a web worker, so the page stays responsive and the run is simply called;
its own progress reports then draw the bar (each change reaches the page at once, while the run
goes on). A click on cancel reaches Python only once the run has ended, so there the page stops
the run itself (static/handler.js): through Pyodide's interrupt buffer when the page is
cross-origin isolated (a KeyboardInterrupt in the run, allowed only inside `stoppable()`, which
the worker plugs in: app/site/interrupt.py), else by starting a fresh worker on the URL as it
was (docs/site.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import panel as pn

from app.i18n import tr
from app.pool import QUICK_S, RunPool, server_pool
from app.text import LiveText
from kvweb.jsonable import jsonable
from kvweb.lab import Cancelled, Lab, ParamError

Finish = Callable[[dict[str, Any] | None, str | None], None]
Outcome = tuple[dict[str, Any] | None, str | None]
IN_BROWSER = sys.platform == "emscripten"
SHOW_AFTER_S = 0.3  # short runs never flash a progress bar
REDRAW_S = 0.1  # in the browser, the bar is redrawn at most this often (each redraw is a message)
HIDDEN, SHOWN = {"visibility": "hidden"}, {"visibility": "visible"}
CANCELLED = "cancelled"  # the error `finish` gets when the user stopped the run
_stoppable: Callable[[], AbstractContextManager[None]] = nullcontext


def stoppable_with(guard: Callable[[], AbstractContextManager[None]]) -> None:
    """Make a browser run happen inside `guard()`, the only place the page may interrupt it."""
    global _stoppable
    _stoppable = guard


def under_lock(callback: Callable[[], object]) -> None:
    """Run `callback` holding the Bokeh document lock.

    Some front-end events (Enter in a text box, button clicks) reach Python without the lock,
    and touching a Bokeh model then fails; under `panel serve` the callback is rescheduled on
    the next tick, which holds the lock. In the browser there is no lock to take.
    """
    pn.state.execute(callback, schedule=not IN_BROWSER)


class Runner:
    """One session's runs; the latest counts. Under `panel serve` they go to `pool` (the
    server's unless one is given); in the browser `pool` is None and a run is simply called
    (tests that want the result on return set it to None too)."""

    def __init__(self, pool: RunPool | None = None) -> None:
        # The bar keeps its place and its box is hidden by style: showing and hiding a component
        # makes Bokeh lay out the whole page again (about 0.5 s each time on a big lab in a
        # browser). The style goes on a box around it: Panel copies a widget's own first style
        # onto its inner element and never updates it there.
        # The cancel button is in that box too: the page stops a browser run itself (static/handler.js).
        self.progress = pn.indicators.Progress(value=0, max=1000, width=280, css_classes=["kv-progress"])
        self.left = LiveText(css_class="kv-progress-text", margin=(0, 10))  # "40 %, about 3 s left"
        self.cancel = pn.widgets.Button(name=tr("cancel"), width=100, css_classes=["kv-cancel"])
        self.cancel.on_click(lambda event: self._stop())
        self.bar = pn.Column(self.progress, self.left, self.cancel, styles=HIDDEN, margin=0)
        self.pool = pool if pool is not None or IN_BROWSER else server_pool()
        self._generation = 0
        self._fraction = 0.0
        self._started = 0.0
        self._seconds: float | None = None  # the lab's estimate of the whole run (kvweb/budget.py)
        self._drawn = 0.0  # when the browser's bar was last redrawn
        self._ticker: Any = None
        self._finish: Finish | None = None  # the running lab's, until it ends or is cancelled
        # Whether a run is in flight: a tick that comes after the bar was hidden draws nothing (a
        # periodic callback added while the session is being created may start only once it has
        # connected, after a quick first run has ended).
        self._running = False
        # The run's outcome, kept until delivered: the document's next tick delivers it (once the
        # page has connected), or failing that the ticker's next tick does.
        self._pending: tuple[int, Outcome | Exception, Finish] | None = None
        if self.pool is not None and pn.state.curdoc is not None:
            # A session that ends (its page closed, or never connected: a bare request of a URL
            # draws its lab, app/router.py) stops its run and drops its waiting one, as cancel does.
            pn.state.curdoc.on_session_destroyed(lambda context: self._forget())

    def start(self, lab: Lab, finish: Finish) -> None:
        """Run `lab`; `finish(result, error)` is called under the document lock when it ends."""
        self._generation += 1
        generation = self._generation
        self._fraction, self._started, self._drawn, self._running = 0.0, time.monotonic(), 0.0, True
        self.progress.value = 0  # the bar starts empty: never the last run's fraction
        # a lab's work estimate; the report's and the exercises' jobs are no labs and have none
        estimate = getattr(lab, "estimate", None)
        self._seconds = estimate().seconds if estimate is not None else None
        if self.pool is None:
            try:
                with _stoppable():
                    outcome = self._call(lab, generation)
            except KeyboardInterrupt:  # the page's stop, as the run ended
                outcome = None, CANCELLED
            self._hide()
            finish(*outcome)
            return
        self._finish = finish
        doc = pn.state.curdoc
        if self._ticker is None:

            def tick() -> None:
                if not self._tick():
                    ticker.stop()  # idle: Panel started it only after its run had ended (see `_running`)

            ticker = self._ticker = pn.state.add_periodic_callback(tick, period=200)

        quick = self._seconds is not None and self._seconds < QUICK_S
        in_child = self.pool.children and not quick and (isinstance(lab, Lab) or hasattr(lab, "in_child"))

        def run() -> None:
            try:
                outcome: Outcome | Exception = self._call(lab, generation, in_child)
            except Exception as err:  # noqa: BLE001  (raised again under the lock, where Panel logs it)
                outcome = err
            self._pending = generation, outcome, finish
            # delivered once the page has connected: a change made to a session's document after it
            # was sent with the page and before the page connects never reaches the page (seen
            # for a first run started while the session is set up: its bar stayed, or its status
            # never said ready)
            doc.add_next_tick_callback(lambda: pn.state.onload(lambda: self._done(generation, outcome, finish)))

        self.pool.submit(self, run, quick=quick)

    def _call(self, lab: Lab, generation: int, in_child: bool = False) -> Outcome:
        def progress(fraction: float, message: str) -> None:
            if generation != self._generation:
                raise Cancelled
            self._fraction = fraction
            if self.pool is None and time.monotonic() - self._drawn >= REDRAW_S:
                self._drawn = time.monotonic()
                self._tick()

        try:
            if generation != self._generation:
                raise Cancelled  # replaced or cancelled while it waited for the pool
            if in_child:
                from app.child import run_in_child  # not in the browser: it has no processes

                return run_in_child(lab, progress), None
            return jsonable(lab.run(progress)), None
        except ParamError as err:
            return None, str(err)
        except (Cancelled, KeyboardInterrupt):  # a newer run, cancel, or the page's stop
            return None, CANCELLED

    def _done(self, generation: int, outcome: Outcome | Exception, finish: Finish) -> None:
        if self._pending is not None and self._pending[0] == generation:
            self._pending = None
        if generation != self._generation or self._finish is not finish:
            return  # a newer run replaced this one, it was cancelled, or it was delivered already
        self._finish = None
        self._hide()
        if isinstance(outcome, Exception):
            raise outcome
        finish(*outcome)

    def _stop(self) -> None:
        """The running lab stops (its child killed, or in a thread at its next progress report; a
        waiting one never starts); the app says so at once."""
        finish = self._finish
        self._forget()
        if finish is not None:
            under_lock(lambda: (self._hide(), finish(None, CANCELLED)))

    def _forget(self) -> None:
        """The running lab stops and a waiting one never starts; nothing of theirs is drawn."""
        self._finish = None
        self._generation += 1
        if self.pool is not None:
            self.pool.drop(self)

    def _hide(self) -> None:
        self._running = False
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self.bar.styles = HIDDEN

    def _tick(self) -> bool:
        """Draw the bar, or deliver the run's outcome if its tick went missing; returns whether
        there is more to draw (a run in flight, or an outcome not yet delivered)."""
        if self.pool is not None and not pn.state.loaded:
            return True  # the page has not connected: nothing drawn now would reach it (see `start`)
        if self._pending is not None:
            self._done(*self._pending)
            return self._running
        if self._running and time.monotonic() - self._started > SHOW_AFTER_S:
            self.bar.styles = SHOWN
            self.progress.value = int(self._fraction * 1000)
            text = f"{int(self._fraction * 100)} %"
            if self._seconds is not None:
                left = max(1, round(self._seconds * (1 - self._fraction)))
                text += ", " + tr("about {seconds} s left").format(seconds=left)
            self.left.text = text
        return self._running
