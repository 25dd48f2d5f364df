"""The web worker's link to the page (static site only), with one addition to Panel's: a redraw
leaves as one message.

Panel's own link (`panel.io.pyodide._link_docs_worker`) posts every document change as a
message of its own. One redraw of a lab is 20-40 changes; the page applies each in a task of
its own, repaints a figure once per message that touches it, and Panel walks the document's
~500 models after each change to mark them sent. `Link` sends changes one by one like Panel's,
except inside `one_message()` (app/redraw.py), where they wait and leave together, in order, at
its end.

Only a redraw (a view drawing a result or a step) is wrapped: no progress is reported inside
it, and it runs within one call from the page, so the page hears of it before "idle".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import panel as pn
from bokeh.events import DocumentReady

from app import redraw
from app.site import upstream

Send = Callable[[list[Any]], None]
SETTER = "js"  # changes that came from the page carry it: the page has them already


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


def link(dispatch: Any) -> None:
    """What `_link_docs_worker` does for the current document, through a `Link`:
    `dispatch(patch, buffers, msg_id)` is static/worker.mjs's function that posts a patch to the page."""
    doc = pn.state.curdoc
    sender = Link(lambda events: dispatch(*upstream.patch_message(doc, events), None), SETTER)
    doc.on_change(sender.on_change)
    redraw.batch_with(sender.one_message)
    doc.unhold()
    doc.on_event("document_ready", upstream.onload_runner(doc))
    doc.callbacks.trigger_event(DocumentReady())


def apply_patch(patch: Any) -> None:
    """A change the page made (a widget, the history box), applied to the current document."""
    upstream.apply_page_patch(pn.state.curdoc, patch, SETTER)
