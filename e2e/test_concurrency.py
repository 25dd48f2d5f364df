"""Many sessions at once on the served app (issue 39): eight people change radix-demo's text
parameters together, round after round, and every change reaches its session's status, figures
and URL. Under such load Panel left a run's last patches ("ready", the URL) queued unsent until
the session's next change, its page saying "running" meanwhile; before the guard against that
(app/site/upstream.py `write_every_queued_patch`) this test failed in nearly every run: the server
had drawn "ready" a quarter of a second after the change, and the page still said "running" 20 s
later. A lost patch stays lost until the session's next change, so the waits below are bounded
generously: a slow page under load passes, a lost run still fails."""

from conftest import plain_text, set_param, wait_ready, wait_until

SESSIONS = 8
# A round's texts: every session types its own value into one text box, all at once.
ROUNDS = (
    ("system", "Be brief, {0}. "),
    ("questions", "What is {0}?|Why {0}?"),
    ("follow_up", " And {0}?"),
    ("system", "Answer as {0} would. "),
    ("questions", "Where is {0}?|Who has {0}?"),
    ("follow_up", " Then {0}?"),
)
NAMES = ("a tree", "a page", "a cache", "a block", "a pool", "a token", "a model", "a leaf")
DELIVERED_S = 30  # a change's result in its URL by then (each run takes about 0.1 s; a round about 5 s at load 12)


def test_eight_sessions_change_radix_texts_at_once(browser, served_app):
    contexts = [browser.new_context(viewport={"width": 1200, "height": 900}) for _ in range(SESSIONS)]
    try:
        pages = [c.new_page() for c in contexts]
        for page in pages:
            page.goto(f"{served_app}?lab=radix-demo&max_new=4", wait_until="commit")  # all load at once
        for page in pages:
            wait_ready(page)
        for name, form in ROUNDS:
            values = [form.format(who) for who in NAMES]
            for page, value in zip(pages, values):
                set_param(page, name, value)
            for i, (page, value) in enumerate(zip(pages, values)):
                shown = wait_until(lambda: query_of(page, name) == value and status(page) == "ready", DELIVERED_S)
                assert shown, (  # the box tells a change that never left the page from a result that never came back
                    f"session {i}: {status(page)!r} after {DELIVERED_S} s, {name}={query_of(page, name)!r} in the URL,"
                    f" {box(page, name).input_value()!r} in the box"
                )
                assert query_of(page, "max_new") == "4"
        for page, who in zip(pages, NAMES):  # each session drew its own last texts, the follow-up turn too
            drawn = wait_until(
                lambda: (
                    f"Answer as {who} would. Where is {who}?" in log_cells(page) and f" Then {who}?" in log_cells(page)
                ),
                DELIVERED_S,
            )
            assert drawn, log_cells(page)
    finally:
        for c in contexts:
            c.close()


def status(page) -> str:
    return plain_text(page, "kv-status").inner_text()


def box(page, name: str):
    return page.locator(f".kv-param-{name} input").first


def log_cells(page) -> str:
    """The request log's rendered cells, as one text."""
    return " ".join(page.locator(".kv-radix-log .slick-cell").all_inner_texts())


def query_of(page, key: str) -> str | None:
    return page.evaluate("key => new URLSearchParams(location.search).get(key)", key)
