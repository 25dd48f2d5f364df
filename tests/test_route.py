"""app/route.py: a URL query read as a Route and written back (a round trip), and hostile
values, each refused with a message and its default."""

import sys
from urllib.parse import urlencode

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

from app.pages.tour import STEPS  # noqa: E402
from app.route import DEFAULT_PAGE, MAX_QUERY, Route  # noqa: E402
from kvweb.lab import LABS  # noqa: E402
from kvweb.query import to_query  # noqa: E402


def full(lab: str, **extra: str) -> str:
    """A lab's URL as the app writes it: every parameter, then tour, lang and step."""
    return "?" + urlencode({**to_query(LABS[lab]()), **extra})


@pytest.mark.parametrize(
    "search",
    [
        full("roofline"),
        full("block-tables", step="3"),
        full("fsm", tour="2", lang="zh", step="0"),
        full("engine", tour=str(len(STEPS))),
        "?page=tour",
        "?page=exercises&exercise=watermark&answer=shown&lang=zh",
        "?page=report",
    ],
)
def test_a_written_url_reads_back_as_the_same_route(search):
    route, messages = Route.parse(search)
    assert messages == [] and route.search() == search
    again, _ = Route.parse(route.search())
    assert (again.lang, again.page, dict(again.page_state), again.tour, again.step) == (
        route.lang,
        route.page,
        dict(route.page_state),
        route.tour,
        route.step,
    )
    assert again.lab is None if route.lab is None else again.lab.values() == route.lab.values()


def test_a_route_knows_its_parts():
    route, _ = Route.parse("?lab=roofline&tokens=4096&tour=3&step=7&lang=zh")
    assert (route.lang, route.page, route.tour, route.step) == ("zh", None, 3, 7)
    assert route.lab.lab_name == "roofline" and route.lab.tokens == 4096
    assert Route.parse("?lab=roofline")[0].step is None  # the step its result opens on
    page, _ = Route.parse("?page=exercises&exercise=watermark")
    assert (page.page, dict(page.page_state), page.lab) == ("exercises", {"exercise": "watermark"}, None)


def test_only_another_lab_page_or_tour_step_is_another_history_entry():
    entry = Route.parse(full("roofline"))[0].entry
    assert Route.parse("?lab=roofline&tokens=5&step=3&lang=zh")[0].entry == entry
    assert Route.parse("?lab=roofline&tour=2")[0].entry != entry
    assert Route.parse("?lab=fsm")[0].entry != entry
    assert Route.parse("?page=exercises")[0].entry == Route.parse("?page=exercises&exercise=watermark")[0].entry


@pytest.mark.parametrize(
    "search, said, default",
    [
        ("", [], Route(page=DEFAULT_PAGE)),
        ("?page=%E2%91%A0", ["page: '①' is not allowed"], Route(page=DEFAULT_PAGE)),
        ("?page=tour&lang=%3Cb%3E", ["lang: '<b>' is not allowed"], Route(page=DEFAULT_PAGE)),
        ("?lab=" + "x" * MAX_QUERY, ["the URL query is 16005 characters long"], Route(page=DEFAULT_PAGE)),
        ("?lab=roofline&step=-1", ["step: '-1' is not allowed"], Route(lab=LABS["roofline"](), step=0)),
        ("?lab=roofline&step=%C2%B2", ["step: '²' is not allowed"], Route(lab=LABS["roofline"](), step=0)),
        ("?lab=roofline&tour=99", ["tour: '99' is not allowed"], Route(lab=LABS["roofline"]())),
        ("?lab=%F0%9F&tokens=x", ["unknown lab '\ufffd'"], Route(lab=LABS["roofline"]())),
    ],
)
def test_a_hostile_value_gives_a_message_and_the_default(search, said, default):
    route, messages = Route.parse(search)
    assert len(messages) >= len(said)
    for words, line in zip(said, messages):
        assert line.startswith(words), (words, messages)
    assert route.search() == default.search()
