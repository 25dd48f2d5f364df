"""The browser's address and history, read and written as `Route`s: nothing else in the app
touches them.

A route with another history entry (`Route.entry`: another lab or page) adds an entry;
any other change (a widget, a step, the language) replaces the current one. Back or Forward
draws the entry's route, and the next route written replaces that entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlencode

import panel as pn

from app import i18n
from app.route import DEFAULT_PAGE, Route
from app.runner import under_lock
from app.site.history import History
from app.site.location import install
from kvweb.lab import shown

Draw = Callable[[Route, list[str]], None]
log = logging.getLogger(__name__)


class Router:
    """Opens URL queries by drawing their route (`draw(route, messages)`), and writes the
    route drawn back into the address bar (`write`)."""

    def __init__(self, draw: Draw, on_pop: str = "") -> None:
        """`on_pop`: the page's script at Back or Forward (`History`)."""
        self.draw = draw
        self.history = History(on_pop)
        self._search: str | None = None  # the query last opened or written
        self._entry: str | None = None  # what the browser's current history entry stands for

    def start(self) -> None:
        """Open the browser's URL at once, while the session's document is built: the page's
        first document then already shows its route, drawn in one layout, with no round trip
        after the page has loaded (docs/site.md, "A fresh session's first page"). The URL is the
        request's under `panel serve` and the page's in the static site's worker, read raw
        (`install`), before Panel makes a Location that parses the query itself."""
        if pn.state.curdoc is None:
            self.open("")
            return
        install()
        self.history.on_pop(self._on_pop)
        self.open(pn.state.location.search)

    def _on_pop(self, search: str) -> None:
        """Back or Forward: the browser already shows the entry; the app follows its URL."""
        self._entry = None  # the next URL written replaces the entry, whatever it shows
        self.open(search)

    def open(self, search: str) -> None:
        """Draw the route a URL query holds; bad parts become messages. Whatever goes wrong on
        the way, the page stays usable: it shows the tour and says so."""
        if search == self._search:
            return
        try:
            self.draw(*Route.parse(search))
        except Exception as err:  # noqa: BLE001  (no URL may leave a blank page)
            log.warning("could not open the URL query %s: %r", shown(search, 200), err)
            self.draw(
                Route(i18n.current(), DEFAULT_PAGE),
                [f"this URL could not be opened ({type(err).__name__}); showing the tour"],
            )

    def reopen(self) -> None:
        """Draw again the route last written (what the URL shows), as after a cancelled run."""
        search, self._search = self._search, None
        if search is not None:
            self.open(search)

    def navigate(self, query: dict[str, str]) -> None:
        """Open a URL query (a lab with parameters, or a page) as if it had been typed."""
        if i18n.current() != "en":
            query = {**query, "lang": i18n.current()}
        search = "?" + urlencode(query)
        under_lock(lambda: self.open(search))

    def write(self, route: Route) -> None:
        """Show the route's URL: a new history entry for a new lab or page, else in place."""
        if pn.state.location is None:
            return
        self._search = route.search()
        self.history.show(self._search, push=self._entry is not None and route.entry != self._entry)
        self._entry = route.entry
