"""The browser's address: read as raw text for kvweb's own parser (`kvweb.query.from_query`),
written into the browser's history by `History`.

Panel's Location parses the query itself whenever `search` changes (`panel.util.parse_query`
calls int() on anything `str.isdigit()` accepts, so '①' or 5000 digits raise) and, under
`panel serve`, splits the request URI on '?' into exactly two parts (a second '?' raises):
a hostile URL broke the page before kvweb saw its text. `RawLocation` keeps the query as
text, and `install` puts one in place before Panel makes its own.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import panel as pn
from bokeh.models import CustomJS
from panel.io.location import Location
from panel.util import edit_readonly


# Query keys the app reads itself (`from_query` is told to skip them): not a lab's parameters.
URL_EXTRAS = ("step", "lang", "page", "tour")


class RawLocation(Location):
    """Panel's Location with the query left as text (its only change)."""

    @property
    def query_params(self) -> dict[str, str]:
        return dict(parse_qsl(self.search[1:], keep_blank_values=True))


def install(fields: Mapping[str, Any] | None = None) -> None:
    """Make a RawLocation the current document's location, if it has none of ours yet.

    `fields` are window.location's (the static site passes them); by default they come from
    the request that opened the page under `panel serve`. Panel's `state.location` returns
    whatever its per-document registry holds, so the app and Panel itself read this one.
    """
    doc = pn.state.curdoc
    if doc is None or isinstance(pn.state._locations.get(doc), RawLocation):
        return
    if fields is None:
        request = doc.session_context.request if doc.session_context else None
        query = getattr(request, "query", "") if request is not None else ""
        host = urlsplit(f"//{getattr(request, 'host', '') or ''}")  # for share URLs before the browser reports
        fields = {"pathname": getattr(request, "path", ""), "search": f"?{query}" if query else "",
                  "protocol": f"{getattr(request, 'protocol', 'http')}:", "hostname": host.hostname or "",
                  "port": str(host.port or "")}
    location = RawLocation()
    with edit_readonly(location):
        location.param.update({k: v for k, v in fields.items() if k in location.param and k != "name"})
    pn.state._locations[doc] = location


class History:
    """The browser's history, which Panel's Location leaves alone (it pushes an entry for
    every change, and never hears Back or Forward).

    `show(search, push)` puts a query in the address bar, as a new entry (a lab or page
    change) or in place of the current one (a widget, a step, a language); `on_pop(callback)`
    calls back with the query Back or Forward reached. Two hidden text boxes carry these
    between Python and the browser (a Bokeh CustomJS on the first does the browser's part), so
    the static site needs nothing Panel's Pyodide build lacks (ReactiveHTML needs nh3).
    """

    def __init__(self) -> None:
        self.popped = pn.widgets.TextInput()  # "N ?query": the Nth Back or Forward, and where it went
        self.entry = _Entry(self.popped, css_classes=["kv-history"])  # "push ?query" or "replace ?query"
        self.layout = pn.Row(self.popped, self.entry, visible=False)  # `popped`'s model is made first

    def show(self, search: str, push: bool) -> None:
        self.entry.value = f"{'push' if push else 'replace'} {search}"

    def on_pop(self, callback: Callable[[str], None]) -> None:
        self.popped.param.watch(lambda event: callback(event.new.partition(" ")[2]), "value")


class _Entry(pn.widgets.TextInput):
    """The history box, with the browser's part (`_SHOW`) as a Bokeh CustomJS on its own model.

    Panel's `jscallback` would do the same, but then Panel walks every model of the page after
    each layout change, looking for linked ones (0.1-0.3 s a lab switch in the browser).
    """

    def __init__(self, popped: pn.widgets.TextInput, **params: Any) -> None:
        super().__init__(**params)
        self._popped = popped

    def _get_model(self, doc: Any, root: Any = None, parent: Any = None, comm: Any = None) -> Any:
        model = super()._get_model(doc, root, parent, comm)
        popped = self._popped._models[(root or model).ref["id"]][0]
        model.js_on_change("value", CustomJS(args={"popped": popped}, code=_SHOW))
        return model


# The browser's part. The popstate listener is added the first time this runs: when the app
# writes its first URL, or (static site, whose first URL is written before the page renders
# and put in the address bar by static/handler.js) when handler.js runs it once after render,
# so that entries from before a reload still bring Back and Forward into the app.
_SHOW = """
const [mode, search] = cb_obj.value.split(" ")
if (!window.kvwebPopstate) {
  window.kvwebPops = 0
  window.kvwebPopstate = () => { window.kvwebPops += 1; popped.value = `${window.kvwebPops} ${window.location.search}` }
  window.addEventListener("popstate", window.kvwebPopstate)
}
if (!search || search === window.location.search) return
const url = window.location.pathname + search + window.location.hash
if (mode === "push") window.history.pushState(null, "", url)
else window.history.replaceState(null, "", url)
"""
