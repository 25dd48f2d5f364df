"""What a person reads in every lab's tables is the run for the URL on screen: after a widget
change, a lab switch and Back, the rendered cells (not the data behind them) equal the cells the
lab's view makes from the library's run for that same URL (the run `kvweb run LAB --json` prints:
tests/lab_json.py). BokehJS 3.9's DataTable once kept the first run's cells (app/view.py
`TextTable`)."""

import re
from urllib.parse import parse_qsl, urlencode

import pytest

from conftest import open_folds, set_param, table_header, table_rows, wait_ready, wait_until
from site_fixtures import static_site, site_server, wait_live  # noqa: F401  (fixtures)

import app.views  # noqa: F401  (registers every view)
from app.view import VIEWS, TextTable
from kvweb.lab import LABS
from kvweb.query import from_query

# lab, the URL's query, the parameter a person changes and its new value
CASES = [
    ("engine", "requests=80&rate=5", "requests", "60"),
    ("schedulers", "requests=60&workload=sharegpt", "requests", "40"),
    ("fsm", "samples=2", "seed", "1"),
    ("radix-demo", "", "seed", "1"),
    ("sweep", "sweep=watermark&requests=40&rate=5", "requests", "30"),
    ("recovery", "", "tokens", "1024"),
    ("fragmentation", "requests=500", "requests", "400"),
    ("paged-equivalence", "", "seed", "1"),
    ("roofline", "", "batch", "16"),
    ("plan", "requests=50&replicas=1", "requests", "40"),
    ("max-rate", "requests=100", "requests", "60"),
    ("cache-schedule", "", "capacity", "1000"),
    ("cache-sweep", "", "seed", "1"),
    ("prefix-hash", "", "capacity", "1000"),
    ("prefill-savings", "", "capacity", "1000"),
    ("fleet", "requests=60", "requests", "40"),
    ("layer-memory", "", "context", "8192"),
]
STALE_ONCE = ("engine", "schedulers", "fsm", "radix-demo")  # the tables that kept the first run's cells


def expected_tables(query: dict[str, str]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Each table's header and rows as the lab's view makes them from the library's run for
    `query` (the page's URL), by the table's CSS class: the rows in view before the table
    scrolls inside itself (the grid draws only those); a table the run leaves empty is hidden."""
    lab, messages = from_query(query)
    assert messages == []
    view = VIEWS[lab.lab_name]()
    view.update(lab, lab.run())
    tables = [t for t in vars(view).values() if isinstance(t, TextTable) and t.source.data]
    assert tables, f"{lab.lab_name} has no table"
    return {
        t.table.css_classes[0]: (
            [c.title for c in t.table.columns],
            [[as_read(c) for c in row] for row in zip(*t.source.data.values())][: t.max_rows],
        )
        for t in tables
    }


def as_read(cell: str) -> str:
    """A cell's text as the page shows it (HTML folds runs of spaces into one)."""
    return re.sub(r"\s+", " ", cell).strip()


def shown_tables(page, expected: dict) -> dict[str, tuple[list[str], list[list[str]]]]:
    return {css: (table_header(page, css), table_rows(page, css)[: len(rows)]) for css, (_, rows) in expected.items()}


def wait_shown(page, expected: dict, timeout_s: float = 60) -> None:
    """Wait until the page's tables read as `expected` (the text, not the status line), then
    compare them: a table left with another run's cells fails here."""
    wait_until(lambda: shown_tables(page, expected) == expected, timeout_s)
    assert shown_tables(page, expected) == expected


def change(page, name: str, new: str) -> None:
    if page.locator(f".kv-param-{name} input").count() == 0:
        open_folds(page)
    set_param(page, name, new)
    page.wait_for_function("([k, v]) => new URLSearchParams(location.search).get(k) === v", arg=[name, new])


def check_lab(page, base: str, lab: str, query: str, name: str, new: str, loaded=lambda page: None) -> None:
    """Open the lab's URL (`loaded` waits for a static site's Python), then `check_change`."""
    start = {"lab": lab, **dict(parse_qsl(query))}
    page.goto(f"{base}?{urlencode(start)}")
    loaded(page)
    check_change(page, start, name, new)


def check_change(page, start: dict[str, str], name: str, new: str) -> None:
    """Read the tables of the lab opened at `start`, change one widget, read them again."""
    before, after = expected_tables(start), expected_tables({**start, name: new})
    assert before != after, "the change must change a table"
    wait_ready(page)
    wait_shown(page, before)
    change(page, name, new)
    wait_ready(page)
    wait_shown(page, after)


@pytest.mark.parametrize("lab, query, name, new", CASES, ids=[c[0] for c in CASES])
def test_a_widget_change_redraws_the_cells(page, served_app, guard, lab, query, name, new):
    check_lab(page, served_app, lab, query, name, new)
    assert guard.errors == []


def test_a_lab_switch_and_back_show_each_labs_own_cells(page, served_app, guard):
    check_lab(page, served_app, "fsm", "samples=2", "seed", "1")
    page.locator(".kv-lab-select select").select_option(label=LABS["radix-demo"].title)
    page.wait_for_function("() => new URLSearchParams(location.search).get('lab') === 'radix-demo'")
    wait_ready(page)
    wait_shown(page, expected_tables({"lab": "radix-demo"}))
    page.go_back()
    page.wait_for_function("() => new URLSearchParams(location.search).get('lab') === 'fsm'")
    wait_ready(page)
    wait_shown(page, expected_tables({"lab": "fsm", "samples": "2", "seed": "1"}))
    assert guard.errors == []


@pytest.mark.parametrize("lab, query, name, new", [c for c in CASES if c[0] in STALE_ONCE], ids=list(STALE_ONCE))
def test_a_widget_change_redraws_the_cells_in_the_static_site(page, static_site, lab, query, name, new):
    check_lab(page, static_site, lab, query, name, new, loaded=wait_live)


def test_every_other_labs_cells_redraw_in_the_static_site(page, static_site, guard):
    """The labs whose tables never kept a run's cells, in one page of the static site (Python
    started once): each lab's URL opened in place as Back or Forward opens one, its cells read, one
    widget changed, its cells read again."""
    page.goto(f"{static_site}?lab=block-tables")
    wait_live(page)
    for lab, query, name, new in [c for c in CASES if c[0] not in STALE_ONCE]:
        start = {"lab": lab, **dict(parse_qsl(query))}
        page.evaluate(
            "search => { history.pushState(null, '', location.pathname + search); dispatchEvent(new PopStateEvent('popstate')) }",
            f"?{urlencode(start)}",
        )
        check_change(page, start, name, new)
    assert guard.errors == []
