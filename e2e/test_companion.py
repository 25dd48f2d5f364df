"""The lecture companion end to end: the guided tour opens its labs, the language switch keeps
the state, the report page renders, an exercise's share URL opens its lab with its parameters."""

from urllib.parse import parse_qs, urlparse

import pytest
from conftest import INJECTED, plain_text, wait_ready

from app.pages.tour import STEPS
from app.route import URL_EXTRAS
import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.lab import LABS
from kvweb.query import from_query, to_query


def query(page):
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query, keep_blank_values=True).items()}


def wait_query(browser_page, **expected):
    """Wait until the browser's URL holds these parameters."""
    checks = " && ".join(f"p.get({k!r}) === {v!r}" for k, v in expected.items())
    browser_page.wait_for_function(
        f"() => {{ const p = new URLSearchParams(location.search); return {checks}; }}", timeout=60_000
    )


def nav(page, label):
    page.locator(".kv-nav button", has_text=label).click()


def test_start_page_is_the_tour_and_every_step_opens_its_lab(page, served_app, guard):
    page.goto(served_app)
    page.locator(".kv-tour-0-0").wait_for()
    wait_query(page, page="tour")
    for i, step in enumerate(STEPS):
        for j, (label, expected) in enumerate(step.links):
            button = page.locator(f".kv-tour-{i}-{j} button")
            assert button.inner_text().strip() == label
            button.click()
            canonical = to_query(from_query(expected, ignore=URL_EXTRAS)[0])  # e.g. rate=10 is written back as 10.0
            wait_query(page, **{k: canonical.get(k, v) for k, v in expected.items()}, tour=str(i + 1))
            wait_ready(page)
            assert page.locator(".kv-lab-select select").input_value() == LABS[expected["lab"]].title
            assert "page" not in query(page)
            nav(page, "Guided tour")
            page.locator(f".kv-tour-{i}-{j}").wait_for()
            wait_query(page, page="tour")
    assert guard.errors == []  # e.g. "reference ... isn't known": an update outran its models


def test_language_switch_changes_text_and_keeps_the_state(page, served_app):
    page.goto(f"{served_app}?lab=parallel-sampling&n=3&block_size=4&prompt_len=18")
    wait_ready(page)
    before = query(page)
    assert before["n"] == "3" and before["block_size"] == "4" and "lang" not in before
    assert page.locator(".kv-nav button", has_text="Exercises").count() == 1
    page.locator(".kv-lang button", has_text="中文").click()
    wait_query(page, lang="zh")
    plain_text(page, "kv-status").filter(has_text="就绪").wait_for(timeout=60_000)
    after = query(page)
    assert after.pop("lang") == "zh" and after == before
    assert page.locator(".kv-nav button", has_text="练习").count() == 1
    assert page.locator(".kv-lab-select select").input_value() == "并行采样 (parallel sampling)"
    assert page.locator(".kv-param-n .noUi-handle").first.get_attribute("aria-valuenow").startswith("3")
    # and back: the same parameters, no lang
    page.locator(".kv-lang button", has_text="English").click()
    page.wait_for_function("() => !location.search.includes('lang=')", timeout=60_000)
    wait_ready(page)
    assert query(page) == before


def test_language_switch_on_a_page_keeps_the_page(page, served_app):
    page.goto(f"{served_app}?page=tour")
    page.locator(".kv-tour-0-0").wait_for()
    page.locator(".kv-lang button", has_text="中文").click()
    wait_query(page, page="tour", lang="zh")
    page.locator(".kv-tour-0-0 button", has_text="打开").wait_for()
    assert page.locator(".kv-tour").get_by_text("内存是瓶颈").is_visible()


def test_report_page_renders_with_charts_and_paper_figures(page, served_app):
    page.goto(f"{served_app}?page=report")
    report = page.locator(".kv-report")
    report.locator("svg").nth(10).wait_for(timeout=180_000)  # the charts, drawn inline
    text = "\n".join(report.locator("section").all_inner_texts())
    assert (
        "vLLM paper (Kwon et al., SOSP 2023), section 6.2" in text
        and "SGLang paper (Zheng et al., NeurIPS 2024)" in text
    )
    assert "vLLM blog post (20 June 2023)" in text
    assert report.locator("p", has_text="What changed and why: the paper GPU").count() == 1
    assert "Highest rate within the SLO" in text and "Why ours differs" in text
    plain_text(page, "kv-report-status").filter(has_text="ready").wait_for()
    assert page.evaluate(INJECTED) == []
    # the same report in Chinese (computed once per process, rendered per language)
    page.goto(f"{served_app}?page=report&lang=zh")
    page.locator(".kv-report .paper", has_text="论文").first.wait_for(timeout=60_000)
    assert "SLO 内的最高速率" in "\n".join(page.locator(".kv-report section").all_inner_texts())


def test_exercise_answer_recomputes_and_its_share_url_opens_the_lab(page, served_app):
    page.goto(f"{served_app}?page=exercises")
    for key in ("parallel-blocks", "swap-recompute"):  # answers show once asked for
        page.locator(f".kv-ex-reveal-{key} button").click()
    answer = plain_text(page, "kv-ex-answer-parallel-blocks")
    answer.filter(has_text="10 / 10").wait_for(timeout=60_000)  # measured / by block arithmetic
    card = page.locator(".kv-ex-swap-recompute")
    answer = plain_text(page, "kv-ex-answer-swap-recompute")
    answer.filter(has_text="26.6 ms / 89.4 ms").wait_for()  # the lecture's 4096 tokens: recompute at 0.7 + 0.5 ms
    assert "llama-3-70b, weights ignored (what-if)" in answer.inner_text()
    box = card.locator(".kv-param-tokens input").first
    box.fill("2048")
    box.press("Enter")
    share = plain_text(page, "kv-ex-share-swap-recompute")
    share.filter(has_text="tokens=2048").wait_for(timeout=30_000)
    plain_text(page, "kv-ex-answer-swap-recompute").filter(has_text="13.3 ms / 43.4 ms").wait_for(timeout=30_000)
    url = share.inner_text().strip()
    assert url.startswith(served_app + "?lab=recovery")
    page.goto(url)
    wait_ready(page)
    assert page.locator(".kv-param-tokens input").input_value() == "2048"
    assert page.locator(".kv-param-model select").input_value() == "llama-3-8b"
    assert page.locator(".kv-param-gpu select").input_value() == "H100-SXM"
    assert query(page)["lab"] == "recovery"


def test_open_in_the_lab_button(page, served_app):
    page.goto(f"{served_app}?page=exercises")
    page.locator(".kv-ex-open-template-fsm button").click()
    wait_query(page, lab="fsm", preset="ambiguous", samples="4")
    wait_ready(page)
    assert page.locator(".kv-param-preset select").input_value() == "ambiguous"


@pytest.mark.parametrize("bad", ["%3Cscript%3Ealert(4)%3C%2Fscript%3E", "%3Cimg%20src%3Dx%20onerror%3Dalert(5)%3E"])
def test_hostile_page_value_shows_a_plain_message_and_the_tour(page, served_app, guard, bad):
    page.goto(f"{served_app}?page={bad}")
    page.locator(".kv-tour-0-0").wait_for()
    message = plain_text(page, "kv-message")
    message.wait_for()
    assert "page:" in message.inner_text() and "tour, exercises, report" in message.inner_text()
    assert page.evaluate(INJECTED) == [] and guard.dialogs == []
