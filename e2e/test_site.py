"""The static site (build/site/: Python in the browser through Pyodide, no server code) end to
end: it loads from its own files only, passes the served app's roofline checks (widget
change, share URL) unchanged, and every lab draws in it (hostile URLs: test_hostile.py)."""

import test_roofline as served
from conftest import plain_text, wait_ready, wait_until
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

    def text() -> str:
        return "\n".join(report.locator("section").all_inner_texts())

    # the text itself, not the status line: a loaded machine paints the sections after it
    assert wait_until(lambda: len(report.locator("section").all()) == len(EXPERIMENTS) and text().strip() != "")
    shipped = text()
    assert report.locator("p", has_text="11 969 tokens of KV on an A100-40GB").count() == 1  # OPT-13B-like
    page.locator(".kv-report-recompute button").click()
    status.filter(has_text="computing the report").wait_for(timeout=30_000)
    status.filter(has_text="ready").wait_for(timeout=300_000)
    assert "when this site was built" not in status.inner_text()
    wait_until(lambda: text() == shipped)
    assert text() == shipped  # WebAssembly computes the figures CPython shipped


def test_works_from_a_sub_path(page):
    """Hosted at https://host/kvweb/ (GitHub Pages' project sites): every file is fetched below
    the sub-path (nothing from the server root, which has none of them) and a lab runs there."""
    with SiteServer(SITE, prefix="/kvweb/") as server:
        served.test_loads_and_a_widget_change_updates_figure_and_url(page, server.url)
        assert server.failed == [], f"files asked for outside the sub-path or missing: {server.failed}"
        assert "/kvweb/pyodide/pyodide.asm.wasm" in server.fetched
        assert all(path.startswith("/kvweb/") for path in server.fetched)


# Every message between the page and the worker, as [direction, kinds of events, names of the
# models they change] (a model without a name: its type).
MESSAGES = """() => {
  window.kvlog = [];
  const w = window.kvwebWorker, doc = Bokeh.documents[0];
  const named = (e) => { const m = e.model && doc.get_model_by_id(e.model.id); return m ? (m.name || m.type) : "?" };
  const describe = (dir, patch) => [dir, patch.events.map(e => e.kind), patch.events.map(named), patch.events.map(e => e.attr)];
  const onmessage = w.onmessage;
  w.onmessage = (e) => {
    if (e.data.type === "patch") window.kvlog.push(describe("to page", e.data.patch));
    else if (e.data.type === "idle") window.kvlog.push(["idle"]);
    return onmessage(e);
  };
  const post = w.postMessage.bind(w);
  w.postMessage = (m) => { if (m.type === "patch") window.kvlog.push(describe("to worker", m.patch)); return post(m) };
}"""


# Counts each figure's paints (BokehJS `_actual_paint`), read back as [[title, paints], ...].
PAINTS = """(read) => {
  const found = [], seen = new Set();
  const walk = (v) => {
    if (!v || seen.has(v)) return;
    seen.add(v);
    if (typeof v._actual_paint === "function" && v.model.title !== undefined) found.push(v);
    for (const c of (v.child_views || [])) walk(c);
  };
  for (const v of Bokeh.index.all_views()) walk(v);
  if (read) return found.map(v => [v.model.title?.text || "", v.kvPaints]);
  for (const v of found) {
    const paint = v._actual_paint.bind(v);
    v.kvPaints = 0;
    v._actual_paint = () => { v.kvPaints += 1; return paint() };
  }
}"""


def settled(page) -> list:
    """The messages logged until the worker is idle and the page has drawn and laid out since."""
    page.wait_for_function("() => window.kvlog.some(m => m[0] === 'idle') && !window.kvwebWorker.busy")
    page.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 500))))"
    )
    page.wait_for_function("() => !window.kvwebWorker.busy")
    return page.evaluate("() => window.kvlog")


def test_a_redraw_reaches_the_page_as_one_message_and_nothing_comes_back(page, static_site):
    """app/site/link.py sends a view's redraw as one message (one task and one paint per figure
    in the page: counted here), and static/handler.js keeps to the page what Python never reads: here the
    figures' sizes, which change as a new scenario widens their axes' labels. (Both scenarios priced by the
    roofline: cost_model=auto would price B's H100 by measured kernels, whose longer TTFTs widen an axis.)"""
    page.goto(f"{static_site}?lab=schedulers&requests=60&cost_model=roofline")
    wait_live(page)
    wait_ready(page)
    page.evaluate(MESSAGES)
    page.evaluate(PAINTS, False)
    page.locator(".kv-param-scenario select").select_option("B")
    log = settled(page)
    # each figure paints once: the maps' titles come before new data (no wait, no paint in between),
    # the time figures' y axes keep their width (no layout of the page, which repaints them all)
    paints = dict(page.evaluate(PAINTS, True))
    assert paints.pop("host tier: KV held, % of its size") == 0  # hidden: no host tier in this run
    assert paints.pop("encoder cache (embeddings held)") == 0  # hidden: no images in this run
    assert paints.pop("TPOT p50 (ms) against draft tokens per step") == 0  # hidden: no draft-length sweep
    assert len(paints) == 7 and paints.pop("") == 0  # the maps' key does not change
    assert sorted(paints.values()) == [1] * 6, paints
    sent = [m for m in log if m[0] == "to worker"]
    assert [m[3] for m in sent] == [["value"]] and "Select" in sent[0][2][0]  # the learner's change, nothing else
    redraws = [m for m in log if m[0] == "to page" and "ColumnDataChanged" in m[1]]
    assert len(redraws) == 1
    changed = set(redraws[0][2])
    assert {
        "schedulers-figures",
        *(f"schedulers-curves-{m}" for m in ("paper", "vllm-v1", "sglang")),
        *(f"schedulers-{m}-cells" for m in ("paper", "vllm-v1", "sglang")),
    } <= changed
    assert "Span" in changed and any(n.startswith("LiveText") for n in changed)  # the step's time line and text
    # a player step: its drawing is one message too (the URL box, watching the player, follows)
    page.evaluate("() => { window.kvlog = [] }")
    page.locator(".kv-player button.next").first.click()
    steps = [m for m in settled(page) if m[0] == "to page"]
    assert len(steps) == 2 and {f"schedulers-{m}-cells" for m in ("paper", "vllm-v1", "sglang")} <= set(steps[0][2])
    assert steps[1][3] == ["value"] and "TextInput" in steps[1][2][0]
