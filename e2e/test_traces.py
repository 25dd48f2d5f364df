"""Trace files end to end in the served app: a Mooncake, an Azure and a BurstGPT file picked in the fleet
lab's file picker are read in the page's Python, replayed, and their figures read from the rendered
result table; the share URL carries the file's key and restores it from the browser's storage; a
preset's share URL reproduces the library's figures on a fresh browser; a file the page does not hold
is named plainly, never as markup. In the static site, a file picked survives a reload."""

import tempfile
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from conftest import INJECTED, open_folds, plain_text, table_rows, wait_ready, wait_until
from site_fixtures import site_server, static_site, wait_live  # noqa: F401  (fixtures)

from app.view import percent
import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.parsing import make

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
BARS = "() => Bokeh.documents[0].get_model_by_name('fleet-bars').data"
FLEET = "?lab=fleet&workload=trace&trace_preset=burstgpt-synthetic&trace_duration=60&routers=round-robin,cache-aware"


def query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}


def pick(page, name: str) -> None:
    """Pick a file in the trace_file picker (under "details"), as a person would, and wait for its run."""
    picker = page.locator(".kv-param-trace_file input[type=file]")
    if not picker.count():
        open_folds(page)
    picker.set_input_files(str(DATA / name))
    page.wait_for_function("n => decodeURIComponent(location.search).includes('trace_file=' + n)", arg=name)
    wait_ready(page)


@pytest.mark.parametrize(
    "name, rows, served, said, hits",
    [
        # by hand: Mooncake's rows share 1,000 + 512 of 3,100 prompt tokens, on one replica (tests/test_traces.py)
        ("mooncake.jsonl", 4, 4, "mooncake.jsonl: 4 rows (mooncake), 0 skipped", [0.0, 1512 / 3100]),
        ("azure_code_2023.csv", 3, 3, "azure_code_2023.csv: 3 rows (azure), 1 skipped", [0.0, 0.0]),
        ("burstgpt.csv", 2, 1, "burstgpt.csv: 2 rows (burstgpt), 1 skipped", [0.0, 0.0]),  # at 0 and 113 s: 60 s kept
    ],
)
def test_a_file_picked_is_replayed_and_its_key_goes_in_the_url(page, served_app, guard, name, rows, served, said, hits):
    page.goto(served_app + FLEET)
    wait_ready(page)
    pick(page, name)
    assert plain_text(page, "kv-trace-file-said").inner_text().startswith(said)
    key = query(page)["trace_file"]
    assert key.startswith(f"{name}:{rows}:") and len(key.rsplit(":", 1)[1]) == 16

    # The new table and summary may be drawn a moment after the URL is written, on a loaded machine, and
    # the preset's run they replace has the same hit rates for some files: wait for all of them at once.
    def seen() -> tuple[list[str], list[str], str]:
        cells = table_rows(page, "kv-fleet-table")
        return [r[0] for r in cells], [r[5] for r in cells], plain_text(page, "kv-fleet-summary").inner_text()

    def drawn(routers: list[str], hit_rates: list[str], summary: str) -> bool:
        return (
            routers == ["round-robin", "cache-aware"]
            and hit_rates == [percent(h) for h in hits]
            and f", {served} requests;" in summary  # trace_duration=60 keeps `served` of the rows
        )

    wait_until(lambda: drawn(*seen()))
    routers, hit_rates, summary = seen()
    assert routers == ["round-robin", "cache-aware"] and hit_rates == [percent(h) for h in hits]  # column 5
    assert f", {served} requests;" in summary
    assert page.evaluate(INJECTED) == [] and guard.errors == []


def test_a_preset_share_url_reproduces_the_librarys_figures(page, served_app, guard):
    params = {
        "workload": "trace",
        "trace_preset": "mooncake-conversation-synthetic",
        "trace_duration": "120",
        "trace_scale": "2",
        "routers": "round-robin,cache-aware",
        "replicas": "2",
    }
    page.goto(served_app + "?lab=fleet&" + "&".join(f"{k}={v}" for k, v in params.items()))
    wait_ready(page)
    expected = make("fleet", params).run()
    bars = page.evaluate(BARS)
    assert bars["hit_rate"] == pytest.approx([r["prefix_hit_rate"] for r in expected["routers"]])
    assert (
        bars["hit_rate"][1] > bars["hit_rate"][0] > 0
    )  # the preset's shared prefixes, found by the cache-aware router
    assert guard.errors == []


def test_a_file_this_page_does_not_hold_is_named_plainly(page, served_app, guard):
    page.goto(served_app + FLEET + "&trace_file=%3Cimg%20src%3Dx%3E.csv%3A12%3A0123456789abcdef")
    wait_ready(page)
    messages = plain_text(page, "kv-message").all_inner_texts()
    assert any("trace_file: " in m and "is no trace file kvweb can read here" in m for m in messages), messages
    page.goto(served_app + FLEET + "&trace_file=lost.csv%3A12%3A0123456789abcdef")
    wait_ready(page)
    messages = plain_text(page, "kv-message").all_inner_texts()
    assert any(
        m.startswith("trace_file: lost.csv (12 rows, digest 0123456789abcdef) is not loaded here; pick the file again")
        for m in messages
    ), messages
    assert query(page).get("trace_file", "") == "" and page.evaluate(INJECTED) == [] and guard.errors == []


def test_a_file_url_reopens_from_this_browsers_storage_and_says_what_is_missing_elsewhere(
    page, browser, served_app, guard
):
    page.goto(served_app + FLEET)
    wait_ready(page)
    pick(page, "mooncake.jsonl")
    shared = page.evaluate("location.search")
    key = query(page)["trace_file"]
    # The server forgets the file: its copy on disk goes, and four files picked after it push it out of memory
    (Path(tempfile.gettempdir()) / "kvweb-traces" / f"{key.rsplit(':', 1)[1]}.trace").unlink()
    for other in ("azure_code_2023.csv", "azure_conv_2024.csv", "burstgpt.csv", "kvweb.csv"):
        pick(page, other)
    elsewhere = browser.new_context().new_page()  # another browser: nothing kept, and it says so
    try:
        elsewhere.goto(served_app + shared)
        wait_ready(elsewhere)
        messages = plain_text(elsewhere, "kv-message").all_inner_texts()
        assert any(
            m.startswith(f"trace_file: mooncake.jsonl (4 rows, digest {key.rsplit(':', 1)[1]}) is not loaded here")
            for m in messages
        ), messages
    finally:
        elsewhere.context.close()
    page.goto(served_app + shared)  # this browser kept the file: the URL replays it again
    hits = [percent(0.0), percent(1512 / 3100)]
    assert wait_until(lambda: [r[5] for r in table_rows(page, "kv-fleet-table")] == hits)
    open_folds(page)
    assert plain_text(page, "kv-trace-file-said").inner_text().startswith("mooncake.jsonl: 4 rows (mooncake)")
    assert query(page)["trace_file"] == key
    assert guard.errors == []


def test_in_the_static_site_a_file_picked_survives_a_reload_through_the_browsers_storage(page, static_site, guard):
    """The static site reads the file in its web worker; a reload starts a fresh worker that holds nothing, and
    the share URL brings the file back from this browser's IndexedDB."""
    page.goto(static_site + FLEET)
    wait_live(page)
    wait_ready(page)
    pick(page, "mooncake.jsonl")
    hits = [percent(0.0), percent(1512 / 3100)]
    assert wait_until(lambda: [r[5] for r in table_rows(page, "kv-fleet-table")] == hits)
    shared, key = page.evaluate("location.search"), query(page)["trace_file"]
    page.goto(static_site + shared)
    wait_live(page)
    assert wait_until(lambda: [r[5] for r in table_rows(page, "kv-fleet-table")] == hits)
    assert query(page)["trace_file"] == key and guard.errors == []
