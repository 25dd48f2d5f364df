"""The `trace_file` parameter's control: a trace file picked, or dropped on the picker, is read by the page's
Python (the server's under `panel serve`, the web worker's in the static site), kept there
(`kvweb.serving.load.traces.remember`) and named by its key, `name:rows:digest`: the parameter's value, which the
share URL carries. What the picker says of the file is plain text, never markup.

The browser keeps each file read in its own storage (IndexedDB, by key), so a share URL naming one reopens
it in the same browser where the page's Python no longer holds it (a reloaded static site, another server):
when the page opens, `BrowserTraces` asks the browser for the key the URL named, and the file comes back as if
picked, then the URL is opened again. Hidden boxes in the page (not in the lab's folded controls, which join the
page only when opened) carry this between Python and the browser, as app/site/history.py's do.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import panel as pn
import param

from app.i18n import tr, tr_message
from app.site.upstream import LinkedTextInput
from app.text import plain
from kvweb.lab import ParamError
from kvweb.serving.load import traces

ACCEPT = ".jsonl,.json,.csv,.txt"
KEEP_BYTES = 5_000_000  # larger files are not kept in the browser (Mooncake's conversation trace is about 3 MB)
DATABASE = "kvweb-traces"  # the browser's IndexedDB database: one store, "traces", key -> {name, data (base64)}
_OPEN = f"""
if (!window.indexedDB) return
const opened = indexedDB.open("{DATABASE}", 1)
opened.onupgradeneeded = () => opened.result.createObjectStore("traces")
"""
# A file the page's Python read, "key\nname\nbase64": stored by its key.
_KEEP = (
    """
const [key, name, data] = cb_obj.value.split("\\n")
if (!data) return
"""
    + _OPEN
    + """
opened.onsuccess = () => opened.result.transaction("traces", "readwrite").objectStore("traces").put({name, data}, key)
"""
)
# The key a URL named: if this browser keeps that file, it goes back as "key\nname\nbase64".
_FIND = (
    """
const key = cb_obj.value
if (!key) return
"""
    + _OPEN
    + """
opened.onsuccess = () => {
  const got = opened.result.transaction("traces").objectStore("traces").get(key)
  got.onsuccess = () => { if (got.result) restored.value = [key, got.result.name, got.result.data].join("\\n") }
}
"""
)


class BrowserTraces:
    """The session's link to the files the browser keeps: `keep` stores one read here, `ask` looks for the one
    the page's URL named when the page's Python lacks it, and opens that URL again once it came back."""

    def __init__(self, navigate: Callable[[dict[str, str]], None]) -> None:
        self.navigate = navigate
        self.asked = ("", "")  # the key the URL named, and the URL's query
        self.restored = pn.widgets.TextInput()  # the browser's answer (made first: the finder's argument)
        self.keeper = LinkedTextInput(_KEEP, {})
        self.restored.param.watch(self._restored, "value")
        self.layout = pn.Row(self.restored, self.keeper, visible=False)

    def keep(self, trace: traces.Trace, data: bytes) -> None:
        """Store a file in the browser (one of at most KEEP_BYTES: it travels back to the page as base64)."""
        if len(data) <= KEEP_BYTES:
            self.keeper.value = f"{trace.key}\n{trace.name}\n{base64.b64encode(data).decode()}"

    def ask(self) -> None:
        """If the URL the page opened names a file the page's Python does not hold, ask the browser for it: a
        box whose script runs once the page has rendered (its answer: `_restored`)."""
        search = pn.state.location.search if pn.state.location is not None else ""
        asked = dict(parse_qsl(search.lstrip("?"))).get("trace_file", "")
        if not asked:
            return
        try:
            traces.recall(asked)
        except ParamError:
            self.asked = (asked, search)
            self.layout.append(LinkedTextInput(_FIND, {"restored": self.restored}, on_render=True, value=asked))

    def _restored(self, event: Any) -> None:
        """The browser's copy of the file the URL named: read as if picked, then the URL opened again."""
        key, _, rest = event.new.partition("\n")
        name, _, data = rest.partition("\n")
        asked, search = self.asked
        try:
            trace = traces.remember(base64.b64decode(data, validate=True), name)
        except (ParamError, binascii.Error, ValueError):
            return  # not the file kept: the URL's message stands
        if trace.key == key == asked:
            self.navigate(dict(parse_qsl(search.lstrip("?"))))


class TracePicker(pn.widgets.CompositeWidget):
    """A file input, what was read (or why not), and a button that clears the file; `value` is the key."""

    value = param.String(default="")
    description = param.String(default="", doc="the parameter's help, shown by the file input")

    def __init__(self, value: str, label: str, help_text: str, width: int, kept: BrowserTraces | None = None) -> None:
        super().__init__(value=value, description=help_text, width=width)
        self.kept = kept
        self.input = pn.widgets.FileInput(
            accept=ACCEPT, multiple=False, description=help_text, width=width, css_classes=["kv-param-trace_file"]
        )
        self.said = plain(css_class="kv-trace-file-said", mono=True)
        self.clear = pn.widgets.Button(
            name=tr("clear the trace file"), css_classes=["kv-trace-file-clear"], width=width // 2, visible=bool(value)
        )
        self._composite[:] = [
            pn.pane.Bokeh(plain(f"{label} ({tr('pick or drop a trace file')})"), width=width),
            self.input,
            pn.pane.Bokeh(self.said, width=width),
            self.clear,
        ]
        # (the file's bytes and its name may reach the page's Python one after the other: the static site's worker)
        self.input.param.watch(self._picked, ["value", "filename"])
        self.clear.on_click(lambda event: setattr(self, "value", ""))
        self.param.watch(lambda event: self._show(), "value")
        self._show()

    def _picked(self, *events: Any) -> None:
        data = self.input.value
        if not data:
            return
        try:
            trace = traces.remember(data, self.input.filename or "trace")
        except ParamError as err:
            self.said.text = tr_message(str(err))
            return
        if self.kept is not None:
            self.kept.keep(trace, data)
        if trace.key == self.value:
            self._show()
        self.value = trace.key

    def _show(self) -> None:
        """What the picker holds: the file's name, rows, format and rows skipped, or that none is picked."""
        self.clear.visible = bool(self.value)
        if not self.value:
            self.said.text = tr("no trace file picked")
            return
        try:
            summary = traces.recall(self.value).summary()
        except ParamError as err:
            self.said.text = tr_message(str(err))
            return
        self.said.text = tr("{0}: {1} rows ({2}), {3} skipped, digest {4}").format(
            summary["name"], f"{summary['rows']:,}", summary["format"], f"{summary['skipped']:,}", summary["digest"]
        )
