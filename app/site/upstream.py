"""Every private Panel and Bokeh API kvweb uses, in one place: they offer no public way to do these.

Each is checked by tests/test_site_upstream.py against the installed Panel and Bokeh (the
Pyodide-only ones by name and signature there, and by what they do in e2e/test_site.py; the
DataTable guard's BokehJS names in the installed bundle), so a release that changes one fails
there, not in a learner's browser. They are why Panel is pinned to one
version (docs/site.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import panel as pn
from bokeh.document import Document
from bokeh.models import CustomJS
from panel.io.location import Location
from panel.io.state import state
from panel.util import edit_readonly


# Bokeh 3.9's DataTable sizes its grid in after_layout, which a sibling's first render can
# call before the table's own after_render has made the grid (seen whenever a page's first
# document already holds a lab's table): wait for the grid instead of failing.
# It also redraws its rows only when its CDSView's indices change, so new data with as many rows
# as before kept the old cells on screen (bokeh#15328: the schedulers, engine, fsm and radix-demo
# tables showed the first run's numbers): new data or a patch redraws the grid too.
DATATABLE_GUARD = """
function guardDataTables() {
  const view = window.Bokeh?.Tables?.DataTable?.prototype?.default_view;
  if (view == null || view.prototype.kvwebGuarded) return;
  for (const name of ["_after_layout", "_after_resize"]) {
    const original = view.prototype[name];
    view.prototype[name] = function () { if (this.grid !== undefined) original.call(this); };
  }
  const connect = view.prototype.connect_signals;
  view.prototype.connect_signals = function () {
    connect.call(this);
    const source = this.model.source;
    const redraw = () => { if (this.grid !== undefined) this.updateGrid(); };
    this.connect(source.properties.data.change, redraw);
    this.connect(source.patching, redraw);
  };
  view.prototype.kvwebGuarded = true;
}
"""


def location_of(doc: Document) -> Location | None:
    """The Location Panel made or was given for `doc` (`pn.state.location` returns it)."""
    return state._locations.get(doc)


def give_location(doc: Document, location: Location) -> None:
    """Make `location` the document's: Panel then never makes its own for it."""
    state._locations[doc] = location


def set_readonly(obj: Any, values: dict[str, Any]) -> None:
    """Set parameters Panel marks read-only (a Location's fields come from the browser)."""
    with edit_readonly(obj):
        obj.param.update(values)


def onload_runner(doc: Document) -> Callable[[Any], None]:
    """A `document_ready` handler that runs the document's `pn.state.onload` callbacks, as
    Panel's own worker link does (`_link_docs_worker`)."""
    return functools.partial(state._schedule_on_load, doc)


def patch_message(doc: Document, events: list[Any]) -> tuple[Any, Any]:
    """Document change events as the page's patch and buffers (JS objects). Pyodide only."""
    import js
    import pyodide.ffi
    from panel.io.pyodide import _dict_converter, _process_document_events

    patch, buffers = _process_document_events(doc, events)
    return (
        pyodide.ffi.to_js(patch, dict_converter=_dict_converter),
        js.Map.new(js.Object.entries(pyodide.ffi.to_js(buffers))),
    )


def apply_page_patch(doc: Document, patch: Any, setter: str) -> None:
    """Apply a patch the page sent (a JS object) to the document. Pyodide only."""
    from panel.io.pyodide import _convert_json_patch

    doc.apply_json_patch(_convert_json_patch(patch), setter=setter)


def use_conversion_scripts(worker: str, handler: str, pre: str) -> None:
    """Make `panel.io.convert` write `worker` (a Jinja template) as the web worker, `handler`
    as the page's side of it, and run `pre` before the app's code in the worker."""
    import panel.io.convert as pc

    pc.WEB_WORKER_TEMPLATE = pc._pn_env.from_string(worker)
    pc.WORKER_HANDLER_TEMPLATE = pc._pn_env.from_string(handler)
    pc.PRE = pc.PRE + pre


def write_every_queued_patch() -> None:
    """Make the server write every patch it queues for a page (`panel serve`).

    Panel queues a session's patches when its socket is busy and writes them in tasks
    (`panel.io.document._dispatch_msgs`). A task that finds the socket busy puts its messages back
    and retries; if another task ends meanwhile, it marks the queue done (`_WRITE_BLOCK` dropped)
    and the retry then returns at once: the messages stay queued until the session's next change.
    Under load a run's last patches ("ready", the URL) were left there (issue 39). After each
    task, messages queued with no task to write them get one."""
    from panel.io import document as served

    dispatch = served._dispatch_msgs
    if getattr(dispatch, "writes_every_patch", False):
        return

    @functools.wraps(dispatch)
    async def dispatch_all(doc: Document) -> None:
        await dispatch(doc)
        if served._WRITE_MSGS.get(doc) and doc not in served._WRITE_BLOCK:
            served._WRITE_BLOCK[doc] = True
            served._dispatch_write_task(doc, served._dispatch_msgs, doc)

    dispatch_all.writes_every_patch = True  # type: ignore[attr-defined]
    served._dispatch_msgs = dispatch_all


class _Linked:
    """A widget whose Bokeh model runs `code` (a Bokeh CustomJS) when its value changes, with
    `args` as its arguments: the models of widgets (of the same layout, made first) or plain
    values (`set_args` changes those later).

    Panel's `jscallback` would do the same, but then Panel walks every model of the page after
    each layout change, looking for linked ones (0.1-0.3 s a lab switch in the browser).
    With `on_render`, `code` also runs once when the page has rendered the document, for the
    value the widget was built with (a change made before the page could hear it).
    """

    def __init__(self, code: str, args: dict[str, Any], on_render: bool = False, **params: Any) -> None:
        super().__init__(**params)
        self._js_code, self._js_args, self._on_render = code, dict(args), on_render
        self._js_callbacks: list[CustomJS] = []

    def _get_model(self, doc: Document, root: Any = None, parent: Any = None, comm: Any = None) -> Any:
        model = super()._get_model(doc, root, parent, comm)
        ref = (root or model).ref["id"]
        args = {
            name: arg._models[ref][0] if isinstance(arg, pn.viewable.Viewable) else arg
            for name, arg in self._js_args.items()
        }
        callback = CustomJS(args=args, code=self._js_code)
        self._js_callbacks.append(callback)
        model.js_on_change("value", callback)
        if self._on_render:
            doc.js_on_event("document_ready", CustomJS(args={"box": model}, code="box.properties.value.change.emit()"))
        return model

    def set_args(self, values: dict[str, Any]) -> None:
        """New plain values for some of the callback's arguments (on the page too)."""
        self._js_args.update(values)
        for callback in self._js_callbacks:
            callback.args = {**callback.args, **values}


class LinkedTextInput(_Linked, pn.widgets.TextInput):
    """A text box with a CustomJS on its value (`_Linked`)."""


class LinkedSelect(_Linked, pn.widgets.Select):
    """A select with a CustomJS on its value (`_Linked`)."""
