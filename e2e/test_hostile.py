"""Hostile URLs end to end, in the served app and in the static site: no script runs, no
request leaves 127.0.0.1, every bad value gets a plain message naming it while the good ones
stay, and the app stays usable. And sessions under `panel serve` stay apart."""

from urllib.parse import parse_qsl, quote

import pytest
from conftest import INJECTED, data_fingerprint, open_folds, plain_text, set_param, wait_ready
from site_fixtures import static_site, site_server, wait_live  # noqa: F401  (fixtures)

from app.route import MAX_QUERY, URL_EXTRAS
from app.i18n import translate
from kvweb.query import MAX_MESSAGES, from_query

CASES = {  # URL query, {parameter: value its widget shows}, words the message holds besides from_query's
    "markup and numbers": (
        "lab=roofline&gpu="
        + quote("<img src=x onerror=alert(1)>")
        + "&model="
        + quote("<script>alert(2)</script>")
        + "&tokens="
        + "9" * 400
        + "&batch=%E2%91%A0&context=1e309&mem_util=NaN&custom_layers=%D9%A1%D9%A2"
        + "&swap_copies=%FF%FE&block_size=8&block_size=32&host_link_gb_s=-0&custom_heads=1?2&lang=%C2%B2"
        + "&step="
        + quote('"><svg onload=alert(3)>')
        + "&"
        + "&".join(f"k{i}=1" for i in range(300)),
        {"block_size": "32", "gpu": "A100-40GB", "host_link_gb_s": "0"},
        ["lang: '²'", "step: '\"><svg onload=alert(3)>'", "more problems"],
    ),
    "deep JSON trace": (
        "lab=engine&requests=50&workload=trace&trace=" + "%5B" * 3000,
        {"requests": "50", "workload": "scenario"},
        ["trace: JSON nested 3000 deep", "using the defaults for trace, workload"],
    ),
    "CSV of a thousand columns": (
        "lab=sweep&requests=20&workload=trace&trace=" + "1%2C" * 1000 + "1",
        {"requests": "20", "workload": "scenario"},
        ["trace row 1: 1001 fields; expected 3"],
    ),
}


@pytest.fixture(params=["served", "site"])
def open_app(request, page):
    """Open a query in the served app, then (second run) in the static site."""
    base = request.getfixturevalue("served_app" if request.param == "served" else "static_site")

    def open_query(query: str) -> None:
        page.goto(f"{base}?{query}")
        if request.param == "site":
            wait_live(page)  # Python starts in the page first

    return open_query


def widget_value(page, name: str) -> str:
    return page.locator(f".kv-param-{name} select, .kv-param-{name} input").first.input_value()


@pytest.mark.parametrize("case", CASES)
def test_hostile_url_keeps_good_values_and_names_the_bad(page, open_app, guard, case):
    query, kept, said = CASES[case]
    open_app(query)
    wait_ready(page)
    text = plain_text(page, "kv-message").inner_text()
    expected = from_query(dict(parse_qsl(query, keep_blank_values=True)), ignore=URL_EXTRAS)[1]  # what the library says
    for words in [*expected, *said]:
        assert words in text, (words, text)
    assert len(text.splitlines()) <= MAX_MESSAGES + 2  # + the shell's own lang and step lines
    open_folds(page)  # a folded parameter's widget is in the page once its card is opened
    assert {name: widget_value(page, name) for name in kept} == kept
    assert page.evaluate(INJECTED) == [] and guard.dialogs == [] and guard.errors == []
    set_param(page, "block_size" if "roofline" in query else "requests", "24")  # still usable
    page.wait_for_function("() => /(block_size|requests)=24/.test(location.search)")
    wait_ready(page)


def test_an_overlong_url_is_refused_whole_and_the_tour_opens(page, open_app, guard):
    open_app("lab=roofline&batch=7&x=" + "y" * 40_000)
    page.locator(".kv-tour").wait_for()
    text = plain_text(page, "kv-message").inner_text()
    assert f"characters long; at most {MAX_QUERY} are read" in text and guard.errors == []


def test_sessions_stay_apart(browser, served_app):
    """Four people at once: one runs a heavy search; two change the same lab together, in two
    languages, at two steps; one is in another lab. Nothing crosses over, and the light changes
    finish while the heavy run still computes (the run pool, app/pool.py)."""
    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in range(4)]
    try:
        heavy = contexts[0].new_page()
        heavy.goto(f"{served_app}?lab=cache-sweep&workload=few-shot&tasks=25&per_task=50&points=11&queue=8")
        wait_ready(heavy)
        set_param(heavy, "queue", "745")  # about 16 s of work by its estimate, within the budget
        heavy_bar = heavy.locator("progress.kv-progress")
        heavy_bar.wait_for(state="visible", timeout=30_000)  # it computes from now on
        pages = tables_zh, tables, fragments = [c.new_page() for c in contexts[1:]]
        queries = [
            "lab=block-tables&num_blocks=1&seed=3&step=2&lang=zh",
            "lab=block-tables&seed=4&step=5",
            "lab=fragmentation&requests=300",
        ]
        for page, query in zip(pages, queries):
            page.goto(f"{served_app}?{query}", wait_until="commit")  # all three load at once
        for page in pages:
            wait_ready(page)
        zh_header = translate("kvweb: the KV cache of LLM serving, computed for real", "zh")
        assert "num_blocks: 1 blocks" in plain_text(tables_zh, "kv-message").inner_text()
        assert (
            not plain_text(tables, "kv-message").is_visible() and not plain_text(fragments, "kv-message").is_visible()
        )
        set_param(tables_zh, "seed", "5")  # three changes in flight together, two to the same lab
        set_param(tables, "seed", "6")
        set_param(fragments, "requests", "400")
        for page, words in zip(pages, ("seed=5", "seed=6", "requests=400")):
            page.wait_for_function(f"() => location.search.includes('{words}')")
            wait_ready(page)
        assert heavy_bar.is_visible()  # the light changes were answered while the heavy run computes
        heavy.locator(".kv-cancel button").click()
        plain_text(heavy, "kv-message").filter(has_text="run cancelled").wait_for(timeout=10_000)
        assert query_of(heavy, "queue") == "8"  # the URL as it was before the stopped run
        assert [p.get_by_text(zh_header).count() for p in pages] == [1, 0, 0]
        assert [query_of(p, "lab") for p in pages] == ["block-tables", "block-tables", "fragmentation"]
        assert [query_of(p, "step") for p in pages[:2]] == ["2", "5"]
        assert (widget_value(tables_zh, "num_blocks"), widget_value(tables_zh, "seed")) == ("12", "5")
        assert (widget_value(tables, "seed"), widget_value(fragments, "requests")) == ("6", "400")
        fresh = contexts[1].new_page()  # a new session with the same URL: in English, with the same results
        fresh.goto(f"{served_app}{tables.evaluate('() => location.search')}")
        wait_ready(fresh)
        assert fresh.get_by_text(zh_header).count() == 0 and fresh.get_by_text("kvweb: the KV cache").count() == 1
        assert data_fingerprint(fresh) == data_fingerprint(tables)
    finally:
        for c in contexts:
            c.close()


def query_of(page, key: str) -> str:
    return page.evaluate(f"() => new URLSearchParams(location.search).get('{key}')")
