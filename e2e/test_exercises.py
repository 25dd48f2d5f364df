"""Exercises that teach: the reader answers first, kvweb checks the answer against the library's
within the stated tolerance, then shows the library's answer and why; a share URL opens one
exercise with or without its answer shown."""

from conftest import plain_text


def answer_box(page, key):
    return page.locator(f".kv-ex-given-{key} input").first


def check(page, key):
    page.locator(f".kv-ex-check-{key} button").click()


def test_an_exercise_is_answered_checked_and_revealed(page, served_app):
    page.goto(f"{served_app}?page=exercises&exercise=parallel-blocks")
    solution = page.locator(".kv-ex-solution-parallel-blocks")
    answer_box(page, "parallel-blocks").wait_for()
    assert not solution.is_visible()  # the question comes first
    assert not page.locator(".kv-ex-given-watermark").is_visible()  # the other exercises are folded
    plain_text(page, "kv-ex-answer-parallel-blocks").filter(has_text="10 / 10").wait_for(
        state="attached", timeout=60_000
    )
    assert not solution.is_visible()
    box = answer_box(page, "parallel-blocks")
    box.fill("abc")
    check(page, "parallel-blocks")
    verdict = plain_text(page, "kv-ex-verdict-parallel-blocks")
    verdict.filter(has_text="'abc' is not allowed; expected a number").wait_for()
    assert not solution.is_visible()
    box.fill("16")  # without sharing: (20 + 12) / 8 = 4 blocks per answer, x 4
    check(page, "parallel-blocks")
    verdict.filter(has_text="Not quite: the library computes 10 (exactly)").wait_for()
    solution.wait_for()
    assert "10 / 10" in plain_text(page, "kv-ex-answer-parallel-blocks").inner_text()
    page.wait_for_function("() => location.search === '?page=exercises&exercise=parallel-blocks&answer=shown'")
    box.fill("10")  # 20 // 8 = 2 shared blocks + 4 answers x ceil((32 - 16) / 8) = 2 blocks each
    check(page, "parallel-blocks")
    verdict.filter(has_text="Right: the library computes 10 (exactly)").wait_for()


def test_a_choice_and_show_answer(page, served_app):
    page.goto(f"{served_app}?page=exercises&exercise=swap-recompute")
    page.locator(".kv-ex-given-swap-recompute button", has_text="recompute").click()
    plain_text(page, "kv-ex-answer-swap-recompute").filter(has_text="ms").wait_for(state="attached", timeout=60_000)
    check(page, "swap-recompute")
    plain_text(page, "kv-ex-verdict-swap-recompute").filter(has_text="Not quite: the library computes swap").wait_for()
    page.locator(".kv-ex-solution-swap-recompute").wait_for()
    # "show answer" without answering, on an exercise opened from the page's own share line
    page.goto(f"{served_app}?page=exercises")
    page.locator(".kv-ex-reveal-hash-vs-radix button").click()
    page.locator(".kv-ex-solution-hash-vs-radix").wait_for()
    page.wait_for_function("() => location.search === '?page=exercises&exercise=hash-vs-radix&answer=shown'")


def test_a_share_url_opens_the_answer_shown(page, served_app):
    page.goto(f"{served_app}?page=exercises&exercise=template-fsm&answer=shown")
    page.locator(".kv-ex-solution-template-fsm").wait_for()
    link = plain_text(page, "kv-ex-link-template-fsm")
    link.filter(has_text=served_app).wait_for()
    link = link.inner_text()
    assert f"{served_app}?page=exercises&exercise=template-fsm\n" in link
    assert f"{served_app}?page=exercises&exercise=template-fsm&answer=shown" in link


def test_an_exercise_from_the_trackers_is_answered_and_revealed(page, served_app):
    page.goto(f"{served_app}?page=exercises&exercise=gqa-bytes")
    solution = page.locator(".kv-ex-solution-gqa-bytes")
    answer_box(page, "gqa-bytes").wait_for()
    plain_text(page, "kv-ex-answer-gqa-bytes").filter(has_text="131,072 B").wait_for(state="attached", timeout=60_000)
    assert not solution.is_visible()
    box = answer_box(page, "gqa-bytes")
    box.fill("524,288")  # the hidden-size estimate: 2 x 32 layers x 4096 x 2 B
    check(page, "gqa-bytes")
    verdict = plain_text(page, "kv-ex-verdict-gqa-bytes")
    verdict.filter(has_text="Not quite: the library computes 131,072 (exactly)").wait_for()
    solution.wait_for()
    box.fill("131072")  # 2 x 32 layers x 8 KV heads x 128 x 2 B
    check(page, "gqa-bytes")
    verdict.filter(has_text="Right: the library computes 131,072 (exactly)").wait_for()
    page.locator(".kv-ex-reveal-gqa-bytes button").click()
    assert "524,288 B" in plain_text(page, "kv-ex-answer-gqa-bytes").inner_text()  # without GQA
    page.wait_for_function("() => location.search === '?page=exercises&exercise=gqa-bytes&answer=shown'")
