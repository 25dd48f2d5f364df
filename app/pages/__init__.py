"""Pages beside the labs, chosen by `page=` in the URL: the guided tour, the exercises, the report.

A page gets a `navigate(query)` callback that opens another URL query (a lab with its
parameters, or another page) the way a share link would, and keeps any state of its own in
the URL (`restore`/`query`, written through `remember`). Pages, like views, are built in the
session's language and rebuilt when it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

import panel as pn

Navigate = Callable[[dict[str, str]], None]


class Page:
    name: ClassVar[str] = ""  # the `page=` value
    label: ClassVar[str] = ""  # its navigation entry (translated with `tr`)

    def __init__(self, navigate: Navigate) -> None:
        self.navigate = navigate
        self.remember: Callable[[], None] = lambda: None  # the shell's: write the page's state into the URL

    def layout(self) -> pn.viewable.Viewable:
        raise NotImplementedError

    def restore(self, query: Mapping[str, str]) -> list[str]:
        """Take the page's own state from a URL query (beside `page=`); messages for bad parts."""
        return []

    def query(self) -> dict[str, str]:
        """The page's own state as URL query keys (what `restore` reads back)."""
        return {}

    def shown(self) -> None:
        """Called each time the page is opened (start work that needs the page on screen)."""


def pages() -> dict[str, type[Page]]:
    """The pages in navigation order (imported on first use to keep start-up light)."""
    from app.pages.exercises import ExercisesPage
    from app.pages.report import ReportPage
    from app.pages.tour import TourPage

    return {p.name: p for p in (TourPage, ExercisesPage, ReportPage)}
