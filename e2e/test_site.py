"""The static site (build/site/: Python in the browser through Pyodide, no server code) end to
end: it loads from its own files only, passes the served app's roofline checks (widget
change, share URL) unchanged, and every lab draws in it (hostile URLs: test_hostile.py)."""
import test_roofline as served
from conftest import plain_text, wait_ready
from site_fixtures import SITE, SiteServer, static_site, site_server, wait_live  # noqa: F401  (fixtures)

import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.lab import LABS
from kvweb.reproduce import EXPERIMENTS


def test_loads_from_its_own_files_with_a_progress_screen(page, static_site, site_server):
    page.goto(static_site)
    progress = page.locator("#kv-loading progress")
    assert progress.count() == 1  # the loading state, shown while Pyodide starts
    # the start page: the tour's text and links are readable before Python is ready
    early = page.locator("#kv-early-tour")
    assert early.locator("h3").first.inner_text() == "1. Memory is the bottleneck"
    assert early.locator("a").first.get_attribute("href").startswith("?lab=roofline")
    wait_live(page)
    assert page.locator("#kv-loading").count() == 0 and early.count() == 0
    fetched = site_server.fetched
    for path in ("/pyodide/pyodide.asm.wasm", "/pyodide/python_stdlib.zip", "/pyodide/pyodide-lock.json"):
        assert path in fetched, f"{path} was not fetched from the site"
    wheels = {p.rsplit("/", 1)[1].split("-")[0] for p in fetched if p.endswith(".whl")}
    assert {"numpy", "panel", "bokeh", "param", "kvweb", "kvweb_app"} <= wheels
    assert "micropip" not in wheels and "pandas" not in wheels


def test_widget_change_updates_figure_and_url(page, static_site):
    served.test_loads_and_a_widget_change_updates_figure_and_url(page, static_site)


def test_share_url_restores_parameters(page, static_site):
    served.test_share_url_restores_parameters(page, static_site)


def test_every_lab_draws_in_the_site(page, static_site):
    """The site ships every package the views import: each lab runs and draws, error-free."""
    errors = []
    page.on("console", lambda m: errors.append(m.text[:300]) if m.type == "error" else None)
    page.goto(f"{static_site}?lab=roofline")
    wait_live(page)
    for name in sorted(LABS):
        page.locator(".kv-lab-select select").select_option(label=LABS[name].title)
        page.wait_for_function("name => new URLSearchParams(location.search).get('lab') === name", arg=name)
        wait_ready(page)
        assert errors == [], f"lab {name}: {errors}"


def test_a_lab_with_a_table_opens_directly_from_its_url(page, static_site):
    """The first document already holds the figures table (engine, schedulers): it draws with
    its rows, without a page error (Bokeh's DataTable once failed in that first render)."""
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)[:300]))
    for lab, first_row in (("engine", "throughput (tokens/s)"), ("schedulers", "throughput (tokens/s)")):
        page.goto(f"{static_site}?lab={lab}&requests=60")
        wait_live(page)
        wait_ready(page)
        page.locator(".slick-cell", has_text=first_row).first.wait_for()
        assert errors == [], f"lab {lab}: {errors}"


def test_the_report_is_shipped_computed_and_recomputes_in_the_browser(page, static_site):
    """The report has no parameters: the site carries it as computed by the build (CPython), so
    it shows at once; the button recomputes it in the page's Python with the same figures."""
    page.goto(f"{static_site}?page=report")
    wait_live(page)
    status = plain_text(page, "kv-report-status")
    status.filter(has_text="when this site was built").wait_for(timeout=30_000)
    report = page.locator(".kv-report")
    shipped = "\n".join(report.locator("section").all_inner_texts())
    assert len(report.locator("section").all()) == len(EXPERIMENTS)
    assert report.locator("p", has_text="11 969 tokens of KV on an A100-40GB").count() == 1  # OPT-13B-like
    page.locator(".kv-report-recompute button").click()
    status.filter(has_text="computing the report").wait_for(timeout=30_000)
    status.filter(has_text="ready").wait_for(timeout=300_000)
    assert "when this site was built" not in status.inner_text()
    recomputed = "\n".join(report.locator("section").all_inner_texts())
    assert recomputed == shipped  # WebAssembly computes the figures CPython shipped


def test_works_from_a_sub_path(page):
    """Hosted at https://host/kvweb/ (GitHub Pages' project sites): every file is fetched below
    the sub-path (nothing from the server root, which has none of them) and a lab runs there."""
    with SiteServer(SITE, prefix="/kvweb/") as server:
        served.test_loads_and_a_widget_change_updates_figure_and_url(page, server.url)
        assert server.failed == [], f"files asked for outside the sub-path or missing: {server.failed}"
        assert "/kvweb/pyodide/pyodide.asm.wasm" in server.fetched
        assert all(path.startswith("/kvweb/") for path in server.fetched)
