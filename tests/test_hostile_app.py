"""Hostile URLs in the app: the raw location, the shell's URL reading, translated messages.

The same URLs in a real browser (served app and static site) are e2e/test_hostile.py.
"""

import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import panel as pn  # noqa: E402
from bokeh.document import Document  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

import app.route  # noqa: E402
from app import i18n  # noqa: E402
from app.shell import Shell  # noqa: E402
from app.site.location import RawLocation, install  # noqa: E402
from kvweb.query import MAX_MESSAGES  # noqa: E402

# Each breaks Panel's own Location (panel.util.parse_query or its request parsing).
PANEL_BREAKERS = ["?lab=roofline&tokens=%E2%91%A0", "?lab=roofline&tokens=" + "9" * 5000, "?lab=roofline&tokens=1?2"]


@pytest.fixture
def shell():
    shell = Shell()
    shell.labs.runner.pool = None  # run labs in this thread: the result is there on return
    return shell


@pytest.mark.parametrize("search", PANEL_BREAKERS)
def test_the_raw_location_keeps_the_query_as_text(search):
    with set_curdoc(Document()):
        install({"pathname": "/main", "search": search, "href": "http://127.0.0.1/main" + search, "origin": "x"})
        location = pn.state.location
        assert isinstance(location, RawLocation) and location.search == search
        location.search = "?lab=roofline&batch=%C2%B2"  # the browser moved: still no parsing
        assert location.query_params == {"lab": "roofline", "batch": "²"}
        install({"search": "?other"})  # the first one stays
        assert pn.state.location is location


@pytest.mark.parametrize(
    "search, lab, kept, said",
    [
        ("?lab=roofline&tokens=%E2%91%A0&batch=7&step=%C2%B2", "roofline", {"batch": 7}, ["tokens: '①'", "step: '²'"]),
        ("?lab=roofline&tokens=" + "9" * 5000 + "&batch=7", "roofline", {"batch": 7}, ["tokens: '9999"]),
        ("?lab=roofline&tokens=1?2&context=99", "roofline", {"context": 99}, ["tokens: '1?2'"]),
        ("?lab=roofline&gpu=%FF%FE&tokens=5&tokens=6", "roofline", {"tokens": 6}, ["gpu: '\ufffd\ufffd'"]),
        ("?lab=%F0%9F&batch=3", "roofline", {"batch": 3}, ["unknown lab '\ufffd'"]),
        (
            "?lab=engine&requests=50&workload=trace&trace=" + "%5B" * 3000,
            "engine",
            {"requests": 50},
            ["trace: JSON nested 3000 deep", "using the defaults for trace"],
        ),
        (
            "?lab=roofline&batch=9&" + "&".join(f"k{i}=1" for i in range(1000)),
            "roofline",
            {"batch": 9},
            ["1000 unknown parameters for lab roofline ignored: 'k0'"],
        ),
    ],
)
def test_hostile_urls_open_the_lab_with_good_values_kept(shell, search, lab, kept, said):
    shell.router.open(search)
    assert shell.route.page is None and shell.labs.lab.lab_name == lab
    assert {k: getattr(shell.labs.lab, k) for k in kept} == kept
    lines = shell.frame.message.text.split("\n")
    assert shell.frame.message.text and len(lines) <= MAX_MESSAGES + 1  # + the step's line
    for words in said:
        assert any(words in line for line in lines), (words, lines)


def test_hostile_page_and_language_show_the_tour(shell):
    shell.router.open("?page=%E2%91%A0&lang=" + "x" * 20_000)
    assert shell.route.page == "tour" and "the URL query is" in shell.frame.message.text
    shell.router.open("?page=%E2%91%A0&lang=%E2%91%A0")
    assert (
        shell.route.page == "tour"
        and "page: '①'" in shell.frame.message.text
        and "lang: '①'" in shell.frame.message.text
    )


def test_any_failure_while_opening_leaves_the_tour_and_a_message(shell, monkeypatch):
    def broken(query, ignore=()):
        raise RecursionError("somewhere deep")

    monkeypatch.setattr(app.route, "from_query", broken)
    shell.router.open("?lab=roofline&tokens=5")
    assert shell.route.page == "tour"
    assert shell.frame.message.text == "this URL could not be opened (RecursionError); showing the tour"
    monkeypatch.undo()
    shell.router.open("?lab=roofline&tokens=5")  # and the app still works
    assert shell.labs.lab.tokens == 5 and shell.frame.message.text == ""


@pytest.mark.parametrize(
    "line, chinese",
    [
        ("trace: bad; using the defaults for trace, workload", "trace: bad；改用以下参数的默认值：trace, workload"),
        (
            "1000 unknown parameters for lab roofline ignored: 'k0', ...; allowed: gpu, model",
            "实验 roofline 没有这 1000 个参数，已忽略：'k0', ...；可用参数：gpu, model",
        ),
        ("... and 12 more problems", "……另有 12 个问题"),
        (
            "this URL could not be opened (RecursionError); showing the tour",
            "无法打开此 URL（RecursionError）；显示导览",
        ),
    ],
)
def test_new_messages_have_chinese(line, chinese):
    i18n.use("zh")
    try:
        assert i18n.tr_message(line) == chinese
    finally:
        i18n.use("en")
