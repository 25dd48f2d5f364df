"""The web worker's link to the page (static site only): the document's changes leave in
batches, not one message per change.

Panel's own link (`panel.io.pyodide._link_docs_worker`) posts every change as a message of
its own, and the page applies and lays out each one by itself; one redraw of a lab is 20-40
changes. Here they wait in a list and leave together, in order: when static/worker.mjs has
handled a message from the page (it calls `flush` before it answers "idle"), as soon as the
oldest has waited `FLUSH_S` (a long run's progress bar keeps moving), or on the event loop's
next turn (changes made outside a message from the page).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

FLUSH_S = 0.1


class Batcher:
    """A document's change events, handed to `send` as one list per batch.

    Events whose setter is `setter` came from the page, which has them already. `later`
    schedules a call on the event loop's next turn.
    """

    def __init__(self, send: Callable[[list[Any]], None], setter: str | None = None, wait_s: float = FLUSH_S,
                 clock: Callable[[], float] = time.monotonic,
                 later: Callable[[Callable[[], None]], object] = lambda call: None) -> None:
        self.send, self.setter, self.wait_s, self.clock, self.later = send, setter, wait_s, clock, later
        self.pending: list[Any] = []
        self.since = 0.0  # when the oldest pending event came

    def on_change(self, event: Any) -> None:
        if self.setter is not None and getattr(event, "setter", None) == self.setter:
            return
        if not self.pending:
            self.since = self.clock()
            self.later(self.flush)
        self.pending.append(event)
        if self.clock() - self.since >= self.wait_s:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            events, self.pending = self.pending, []
            self.send(events)


_batcher: Batcher | None = None


def link(doc: Any, dispatch: Any, setter: str = "js") -> None:
    """What `_link_docs_worker` does, with batches: `dispatch(patch, buffers, msg_id)` is the
    worker's JS function that posts a patch to the page."""
    global _batcher
    import asyncio
    import functools

    import js
    import pyodide.ffi
    from bokeh.events import DocumentReady
    from panel.io.pyodide import _dict_converter, _process_document_events
    from panel.io.state import state

    def send(events: list[Any]) -> None:
        patch, buffers = _process_document_events(doc, events)
        dispatch(pyodide.ffi.to_js(patch, dict_converter=_dict_converter),
                 js.Map.new(js.Object.entries(pyodide.ffi.to_js(buffers))), None)

    _batcher = Batcher(send, setter, later=lambda call: asyncio.get_event_loop().call_soon(call))
    doc.on_change(_batcher.on_change)
    doc.unhold()
    doc.on_event("document_ready", functools.partial(state._schedule_on_load, doc))
    doc.callbacks.trigger_event(DocumentReady())
    _batcher.flush()


def flush() -> None:
    """Send what is waiting now (worker.mjs, before it tells the page the worker is idle)."""
    if _batcher is not None:
        _batcher.flush()
