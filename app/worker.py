"""The web worker's link to the page (static site only), with one addition to Panel's: a redraw
leaves as one message.

Panel's own link (`panel.io.pyodide._link_docs_worker`) posts every document change as a
message of its own. One redraw of a lab is 20-40 changes; the page applies each in a task of
its own, repaints a figure once per message that touches it, and Panel walks the document's
~500 models after each change to mark them sent. `Link` sends changes one by one like Panel's,
except inside `one_message()`, where they wait and leave together, in order, at its end.

Only a redraw (a view drawing a result or a step) is wrapped: no progress is reported inside
it, and it runs within one call from the page, so the page hears of it before "idle".
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Send = Callable[[list[Any]], None]


class Link:
    """A document's change events, handed to `send` one by one, or as one list inside
    `one_message`. Events whose setter is `setter` came from the page, which has them already."""

    def __init__(self, send: Send, setter: str | None = None) -> None:
        self.send, self.setter = send, setter
        self.held: list[Any] | None = None  # inside one_message: the events waiting

    def on_change(self, event: Any) -> None:
        if self.setter is not None and getattr(event, "setter", None) == self.setter:
            return
        if self.held is None:
            self.send([event])
        else:
            self.held.append(event)

    @contextmanager
    def one_message(self) -> Iterator[None]:
        if self.held is not None:  # nested: the outer one sends
            yield
            return
        self.held = []
        try:
            yield
        finally:
            events, self.held = self.held, None
            if events:
                self.send(events)


_link: Link | None = None


def link(doc: Any, dispatch: Any, setter: str = "js") -> None:
    """What `_link_docs_worker` does, through a `Link`: `dispatch(patch, buffers, msg_id)` is
    static/worker.mjs's function that posts a patch to the page."""
    global _link
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

    _link = Link(send, setter)
    doc.on_change(_link.on_change)
    doc.unhold()
    doc.on_event("document_ready", functools.partial(state._schedule_on_load, doc))
    doc.callbacks.trigger_event(DocumentReady())


@contextmanager
def one_message() -> Iterator[None]:
    """The document changes made inside reach the page as one message (static site; elsewhere
    nothing changes: Bokeh's server has its own way)."""
    if _link is None:
        yield
        return
    with _link.one_message():
        yield
