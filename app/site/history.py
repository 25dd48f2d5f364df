"""The browser's history, which Panel's Location leaves alone (it pushes an entry for every
change, and never hears Back or Forward)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import panel as pn

from app.site.upstream import LinkedTextInput


class History:
    """`show(search, push)` puts a query in the address bar, as a new entry or in place of the
    current one; `on_pop(callback)` calls back with the query Back or Forward reached. Two hidden
    text boxes carry these between Python and the browser (a Bokeh CustomJS on the first does
    the browser's part), so the static site needs nothing Panel's Pyodide build lacks
    (ReactiveHTML needs nh3).

    The box holds "N ?query", N the entries added so far: the page adds one when N has grown
    since the value it last saw. The static site sends a redraw's changes as one message, so a
    new lab's entry and the step written after it reach the page as one value; a "push" mode
    would have been lost under the "replace" that followed it.
    """

    def __init__(self, on_pop: str = "") -> None:
        """`on_pop`: the app's script to run on the page at Back or Forward, before Python hears of
        it (with `popped`, the box's model, and `window.location` already the entry's)."""
        self.popped = pn.widgets.TextInput()  # "N ?query": the Nth Back or Forward, and where it went
        self.pushes = 0  # entries added: the box says "pushes ?query"
        # The app writes its first URL while the session's document is built (app/router.py), before
        # the page can hear it: under `panel serve` the box's script runs once more when the page
        # has rendered; the static site's page does that itself (static/handler.js).
        self.entry = LinkedTextInput(
            _SHOW.replace("// on pop\n", on_pop),
            {"popped": self.popped},
            on_render=sys.platform != "emscripten",
            css_classes=["kv-history"],
        )
        self.layout = pn.Row(self.popped, self.entry, visible=False)  # `popped`'s model is made first

    def show(self, search: str, push: bool) -> None:
        self.pushes += push
        self.entry.value = f"{self.pushes} {search}"

    def on_pop(self, callback: Callable[[str], None]) -> None:
        self.popped.param.watch(lambda event: callback(event.new.partition(" ")[2]), "value")


# The browser's part. The popstate listener is added the first time this runs: once the page
# has rendered the first document (the app wrote its first URL while building it), so that
# entries from before a reload still bring Back and Forward into the app.
_SHOW = """
const [count, search] = cb_obj.value.split(" ")
const pushes = Number(count)
// The first value this page sees counts the entries of earlier pages (before a reload): in place.
const push = window.kvwebPushes !== undefined && pushes > window.kvwebPushes
window.kvwebPushes = pushes
if (!window.kvwebPopstate) {
  window.kvwebPops = 0
  window.kvwebPopstate = () => {
    window.kvwebPops += 1
    // on pop
    popped.value = `${window.kvwebPops} ${window.location.search}`
  }
  window.addEventListener("popstate", window.kvwebPopstate)
}
if (!search || search === window.location.search) return
const url = window.location.pathname + search + window.location.hash
if (push) window.history.pushState(null, "", url)
else window.history.replaceState(null, "", url)
"""
