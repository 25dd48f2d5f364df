"""The app shell: draws a `Route` (a page, or a lab with its parameters and step), and writes the
route it shows back into the URL.

The URL always holds the current route (app/route.py says what it holds); opening it draws that
route again. With neither a lab nor a page, the guided tour opens. `Router` owns the address bar
and history (a lab or page change adds an entry, anything else replaces it; Back or Forward
draws the entry's route), `LabArea` shows and runs a lab, `Frame` is the page around both.
Text from the URL is only ever shown through `app.text.plain` (textContent): nothing from a
URL is rendered as HTML.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import panel as pn

from app import i18n, style
from app.frame import LABS_NAV, Frame
from app.lab_area import PICKED, POPPED, LabArea
from app.pages import Page, pages
from app.route import Route
from app.router import Router
from app.site import resources
from app.site.screen import Screen
from kvweb.lab import LABS
from kvweb.query import DEFAULT_LAB, to_query


class Shell:
    """The app: `route` is what it shows (its lab's parameters and step live in `labs`)."""

    def __init__(self) -> None:
        style.install()  # phones, wrapping, CJK fonts, viewport (app/style.py)
        resources.install()  # only the extensions used, and the DataTable guard (app/site/resources.py)
        self.screen = Screen()  # before any table: each lays out for the page's width (app/view.py)
        self.route: Route | None = None
        self.pages: dict[str, Page] = {}  # made in the session's language
        self.router = Router(self.draw, POPPED)
        self.labs = LabArea(
            lambda messages: self.frame.say(messages), self.remember, self.router.reopen, self.router.navigate
        )
        self.frame = Frame(
            self.labs.sidebar,
            self.labs.main,
            pn.Column(self.router.history.layout, self.labs.kept.traces.layout, self.screen.box, visible=False),
            PICKED,
        )
        self.frame.nav.param.watch(self._on_nav, "value")
        self.frame.lab_select.param.watch(self._on_lab_select, "value")
        self.frame.lang_select.param.watch(self._on_lang, "value")
        self.layout = self.frame.layout
        self.router.start()
        self.labs.kept.traces.ask()  # a trace file the URL named that only the browser keeps (app/trace_picker.py)

    def draw(self, route: Route, messages: list[str]) -> None:
        """Show `route`, with `messages` (about the URL it came from) above it."""
        self._set_lang(route.lang)
        self.route = route
        if route.page is not None:
            self._show_page(route.page, route.page_state, messages)
        else:
            assert route.lab is not None
            self.frame.show_lab(route.lab.lab_name, route.tour, self.router.navigate)
            self.labs.show(route.lab, messages, route.step)

    def current(self) -> Route | None:
        """The route shown now: the page's own state, the lab's parameters and step as they are."""
        if self.route is None:
            return None
        if self.route.page is not None:
            return replace(self.route, page_state=self.pages[self.route.page].query())
        animated = self.labs.view is not None and self.labs.view.animated
        return replace(self.route, lab=self.labs.lab, step=self.labs.step if animated else None)

    def remember(self) -> None:
        """Write the route shown into the URL (and the browser's history)."""
        if (route := self.current()) is not None:
            self.router.write(route)

    def _show_page(self, name: str, state: dict[str, str], messages: list[str]) -> None:
        if name not in self.pages:
            self.pages[name] = pages()[name](self.router.navigate)
            self.pages[name].remember = self.remember
        messages = messages + self.pages[name].restore(state)
        self.frame.show_page(name, self.pages[name].layout())
        self.frame.say(messages)
        self.remember()
        self.pages[name].shown()

    def _set_lang(self, lang: str) -> None:
        """Labels are made in the session's language: a switch rebuilds them, the views and pages."""
        if lang != i18n.current():
            self.labs.kept.clear()
            self.pages.clear()
        i18n.use(lang)
        self.frame.set_lang(lang)

    def _on_nav(self, event: Any) -> None:
        if self.route is None:
            return
        if event.new == LABS_NAV and self.route.page is not None:
            lab = self.labs.lab
            self.router.navigate(to_query(lab) if lab is not None else {"lab": DEFAULT_LAB})
        elif event.new != LABS_NAV and event.new != self.route.page:
            self.router.navigate({"page": event.new})

    def _on_lang(self, event: Any) -> None:
        route = self.current()
        if event.new == i18n.current() or route is None:
            return
        self.draw(replace(route, lang=event.new, step=self.labs.step), [])

    def _on_lab_select(self, event: Any) -> None:
        # Only a person's choice counts: setting the options (first load, language switch)
        # also moves the value, and must not open a lab behind a page.
        if self.route is not None and self.route.page is None and event.new != self.route.lab.lab_name:
            self.draw(Route(i18n.current(), lab=LABS[event.new](), step=0), [])
