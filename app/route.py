"""What the app shows, as one value: a `Route` is read from a URL query and written back as one.

A route is a page (`page=tour|exercises|report` and the page's own keys, e.g. `exercise`,
`answer`) or a lab (`lab=` and every parameter, `tour=N` when the guided tour opened it,
`step=` for an animated view), in a language (`lang=`, left out for English). Parsing is
lenient: each bad part becomes a message and its default, and nothing from the URL is ever
rendered as HTML (messages go through `app.text.plain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

import kvweb.labs  # noqa: F401  (registers every lab)
from app import i18n
from app.pages import pages
from app.pages.tour import STEPS
from kvweb.lab import Lab, shown
from kvweb.parsing import to_number
from kvweb.query import from_query, to_query

# Characters; a longer query is refused as a whole. A share URL must fit: a 4000-character
# trace percent-encoded is up to 12,000, and the other parameters take far less than 4000.
MAX_QUERY = 16_000
MAX_STEP = 999_999
DEFAULT_PAGE = "tour"  # a URL with neither `lab` nor a known `page` opens it
# Query keys a route reads itself besides a lab's parameters (`from_query` is told to skip them).
URL_EXTRAS = ("step", "lang", "page", "tour")


@dataclass(frozen=True, eq=False)
class Route:
    """A page or a lab, as a URL holds it. `step` None: the step the lab's result opens on."""

    lang: str = "en"
    page: str | None = None  # None: a lab
    page_state: Mapping[str, str] = field(default_factory=dict)  # the page's own keys
    lab: Lab | None = None
    tour: int | None = None  # the tour step that opened the lab
    step: int | None = None

    @classmethod
    def parse(cls, search: str) -> tuple[Route, list[str]]:
        """The route a URL query (`?a=b&...`) asks for, and a message for each part refused."""
        messages: list[str] = []
        if len(search) > MAX_QUERY:
            messages.append(f"the URL query is {len(search)} characters long; at most {MAX_QUERY} are read")
            search = ""
        query = dict(parse_qsl(search.lstrip("?"), keep_blank_values=True))
        lang = query.get("lang", "en")
        if lang not in i18n.LANGS:
            messages.append(
                f"lang: {shown(lang)} is not allowed; expected one of {', '.join(i18n.LANGS)}; using the default"
            )
            lang = "en"
        page = query.get("page")
        if page is not None or "lab" not in query:
            if page is not None and page not in pages():
                messages.append(
                    f"page: {shown(page)} is not allowed; expected one of {', '.join(pages())}; using the default"
                )
                page = None
            state = {k: v for k, v in query.items() if k not in ("page", "lang")}
            return cls(lang, page or DEFAULT_PAGE, state), messages
        lab, problems = from_query(query, ignore=URL_EXTRAS)
        tour = _tour_step(query.get("tour"), problems)
        step = to_number(query.get("step", "0"), integer=True)
        if step is None or not 0 <= step <= MAX_STEP:
            problems.append(f"step: {shown(query['step'])} is not allowed; expected a whole number; using 0")
            step = 0
        return cls(lang, lab=lab, tour=tour, step=step if "step" in query else None), messages + problems

    def query(self) -> dict[str, str]:
        """The URL query that opens this route again (what `parse` reads back)."""
        if self.page is not None:
            query = {"page": self.page, **self.page_state}
        else:
            assert self.lab is not None
            query = to_query(self.lab)
            if self.tour is not None:
                query["tour"] = str(self.tour)
        if self.lang != "en":
            query["lang"] = self.lang
        if self.page is None and self.step is not None:
            query["step"] = str(self.step)
        return query

    def search(self) -> str:
        return "?" + urlencode(self.query())

    @property
    def entry(self) -> str:
        """What a browser history entry stands for: a route with another one adds an entry."""
        return self.page or f"{self.lab.lab_name} {self.tour}"


def _tour_step(text: str | None, problems: list[str]) -> int | None:
    if text is None:
        return None
    step = to_number(text, integer=True)
    if step is None or not 1 <= step <= len(STEPS):
        problems.append(f"tour: {shown(text)} is not allowed; expected an integer from 1 to {len(STEPS)}; ignored")
        return None
    return step
