"""Whether the page is as narrow as a phone's, which Python cannot see: the results tables lay
out their first column for it (app/view.py `TextTable`).

A hidden text box (as app/site/history.py's) carries it from the page: "narrow" at most
`PHONE_PAGE_PX` wide, "wide" beyond. The page tells it once it has rendered the document and
again whenever it crosses that width (a phone turned, a window resized); each table of the
session then lays itself out again. The page also keeps it in a cookie, so the served app's next session
in that browser starts with it (its first tables laid out for the phone from their first paint);
otherwise the box starts "wide", so a wide page never sends it.
"""

from __future__ import annotations

import sys
from weakref import WeakKeyDictionary, WeakSet

import panel as pn
from bokeh.document import Document

from app.site.upstream import LinkedTextInput

PHONE_PAGE_PX = 700  # a page at most this wide is a phone's (the labs' tables wrap and fix their row labels)
COOKIE = "kvweb-screen"  # what the page last said: "narrow" or "wide"

_SCREENS: WeakKeyDictionary[Document, Screen] = WeakKeyDictionary()


class Screen:
    """The session's page width: `narrow`; `tables` (weakly held) are laid out again when it changes."""

    def __init__(self) -> None:
        # Under `panel serve` the box's script runs once the page has rendered; the static site's
        # page does that itself (static/handler.js), as for the history box.
        self.box = LinkedTextInput(
            _TELL.replace("PHONE_PAGE_PX", str(PHONE_PAGE_PX)).replace("COOKIE", COOKIE),
            {},
            on_render=sys.platform != "emscripten",
            value="narrow" if pn.state.cookies.get(COOKIE) == "narrow" else "wide",  # served: the last word
            css_classes=["kv-screen"],
        )
        self.tables: WeakSet = WeakSet()  # each has `relayout()`
        self.box.param.watch(lambda event: [table.relayout() for table in list(self.tables)], "value")
        if pn.state.curdoc is not None:
            _SCREENS[pn.state.curdoc] = self

    @property
    def narrow(self) -> bool:
        return self.box.value == "narrow"


def screen() -> Screen | None:
    """The current session's `Screen` (None outside a session: a test, a bench)."""
    return None if pn.state.curdoc is None else _SCREENS.get(pn.state.curdoc)


# The page's part: tell the width now, and follow it (one listener a page, writing to the box of
# the document shown: the static site makes a new one when a run is stopped).
_TELL = """
window.kvwebScreenBox = cb_obj
if (window.kvwebScreen === undefined) {
  window.kvwebScreen = matchMedia("(max-width: PHONE_PAGE_PXpx)")
  window.kvwebScreen.addEventListener("change", (query) => {
    window.kvwebScreenBox.value = query.matches ? "narrow" : "wide"
  })
}
const width = window.kvwebScreen.matches ? "narrow" : "wide"
document.cookie = `COOKIE=${width}; path=/; max-age=31536000; SameSite=Lax`
if (cb_obj.value !== width) cb_obj.value = width
"""
