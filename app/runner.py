"""Running a lab without freezing the app: progress, cancel, and only the latest run counts.

Under `panel serve` a run goes to a worker thread, so the server keeps answering; a
periodic callback shows the lab's progress and the cancel button stops it at the lab's
next progress report. In the browser (Pyodide) the app already runs in a web worker, so
the page stays responsive and the run is simply called; its own progress reports then draw
the bar (each change reaches the page at once, while the run goes on). There is no cancel
there: a click reaches Python only once the run has ended, since the worker's Python cannot
read a message while it computes (docs/site.md says why).
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import panel as pn

from app.i18n import tr
from kvweb.jsonable import jsonable
from kvweb.lab import Cancelled, Lab, ParamError

Finish = Callable[[dict[str, Any] | None, str | None], None]
IN_BROWSER = sys.platform == "emscripten"
SHOW_AFTER_S = 0.3  # short runs never flash a progress bar
REDRAW_S = 0.1  # in the browser, the bar is redrawn at most this often (each redraw is a message)
HIDDEN, SHOWN = {"visibility": "hidden"}, {"visibility": "visible"}
CANCELLED = "cancelled"  # the error `finish` gets when the user stopped the run


def under_lock(callback: Callable[[], object]) -> None:
    """Run `callback` holding the Bokeh document lock.

    Some front-end events (Enter in a text box, button clicks) reach Python without the lock,
    and touching a Bokeh model then fails; under `panel serve` the callback is rescheduled on
    the next tick, which holds the lock. In the browser there is no lock to take.
    """
    pn.state.execute(callback, schedule=not IN_BROWSER)


class Runner:
    def __init__(self) -> None:
        # The bar keeps its place and its box is hidden by style: showing and hiding a component
        # makes Bokeh lay out the whole page again (about 0.5 s each time on a big lab in a
        # browser). The style goes on a box around it: Panel copies a widget's own first style
        # onto its inner element and never updates it there.
        self.progress = pn.indicators.Progress(value=0, max=1000, width=280, css_classes=["kv-progress"])
        self.bar = pn.Column(self.progress, styles=HIDDEN, margin=0)
        self.cancel = pn.widgets.Button(name=tr("cancel"), visible=False, width=100, css_classes=["kv-cancel"])
        self.cancel.on_click(lambda event: self._stop())
        self._executor = None if IN_BROWSER else ThreadPoolExecutor(max_workers=1)
        self._generation = 0
        self._fraction = 0.0
        self._started = 0.0
        self._drawn = 0.0  # when the browser's bar was last redrawn
        self._ticker: Any = None
        self._finish: Finish | None = None  # the running lab's, until it ends or is cancelled

    def start(self, lab: Lab, finish: Finish) -> None:
        """Run `lab`; `finish(result, error)` is called under the document lock when it ends."""
        self._generation += 1
        generation = self._generation
        self._fraction, self._started, self._drawn = 0.0, time.monotonic(), 0.0
        if self._executor is None:
            outcome = self._call(lab, generation)
            self._hide()
            finish(*outcome)
            return
        self._finish = finish
        doc = pn.state.curdoc
        if self._ticker is None:
            self._ticker = pn.state.add_periodic_callback(self._tick, period=200)
        future = self._executor.submit(self._call, lab, generation)
        future.add_done_callback(lambda f: doc.add_next_tick_callback(lambda: self._done(generation, f, finish)))

    def _call(self, lab: Lab, generation: int) -> tuple[dict[str, Any] | None, str | None]:
        def progress(fraction: float, message: str) -> None:
            if generation != self._generation:
                raise Cancelled
            self._fraction = fraction
            if self._executor is None and time.monotonic() - self._drawn >= REDRAW_S:
                self._drawn = time.monotonic()
                self._tick()

        try:
            return jsonable(lab.run(progress)), None
        except ParamError as err:
            return None, str(err)
        except Cancelled:  # a newer run or the cancel button took over; `_done` drops this one
            return None, CANCELLED

    def _done(self, generation: int, future: Future, finish: Finish) -> None:
        if generation != self._generation:
            return  # a newer run replaced this one, or it was cancelled
        self._finish = None
        self._hide()
        finish(*future.result())

    def _stop(self) -> None:
        """The running lab stops at its next progress report; the app says so at once."""
        finish, self._finish = self._finish, None
        self._generation += 1
        if finish is not None:
            under_lock(lambda: (self._hide(), finish(None, CANCELLED)))

    def _hide(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self.bar.styles = HIDDEN
        self.cancel.visible = False

    def _tick(self) -> None:
        if time.monotonic() - self._started > SHOW_AFTER_S:
            self.bar.styles = SHOWN
            self.cancel.visible = self._executor is not None
            self.progress.value = int(self._fraction * 1000)
