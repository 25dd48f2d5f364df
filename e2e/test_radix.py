"""The served app end to end on the radix labs: the tree animates request by request, a
shared URL restores the step, FCFS and LSPF hit rates differ, hostile prompts stay text."""

from urllib.parse import parse_qs, quote, urlparse

from conftest import INJECTED, plain_text, table_header, table_rows, wait_ready


def model_data(page, name: str) -> dict:
    """A named ColumnDataSource's columns, read from the Bokeh document in the page."""
    return page.evaluate(f"""() => {{
        const data = Bokeh.documents[0].get_model_by_name('{name}').data;
        const out = {{}};
        for (const [k, v] of (data instanceof Map ? data.entries() : Object.entries(data))) out[k] = Array.from(v);
        return out;
    }}""")


def query(page):
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_the_tree_opens_on_a_split_and_shows_the_eviction(page, served_app):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{served_app}?lab=radix-demo")
    wait_ready(page)
    # no step in the URL: the lab opens on request 1 matching, where the system prompt's edge splits
    page.wait_for_function("() => location.search.includes('step=2')")
    step = plain_text(page, "kv-radix-step")
    assert step.inner_text().startswith("request 1 (a new question) - running")
    assert sorted(model_data(page, "radix-nodes")["size"]) == [0, 34, 47]  # root, system + "Wh", the rest
    edges = model_data(page, "radix-edges")
    assert model_data(page, "radix-splits")["id"] == [edges["id"][edges["hit"].index(47)]]  # the split node
    assert [h for h in edges["hit"] if h] == [47]  # read from the cache, locked
    assert model_data(page, "radix-suffix")["text"] == ["y cache the KV?"]  # being computed
    assert "identical to from-scratch runs: yes" in plain_text(page, "kv-radix-summary").inner_text()
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    page.locator(".kv-player button.play").click()
    step.filter(has_text="request 4 (a new question) - running").wait_for(timeout=30_000)
    ghosts = model_data(page, "radix-ghosts")  # request 1's leaf, evicted for request 4's slots
    assert ghosts["size"] == [30] and ghosts["text"][0].startswith("y␣cache␣the␣KV?")
    assert page.evaluate(FADED) < 0.6  # drawn faded
    step.filter(has_text="request 4 (a new question) - done").wait_for(timeout=30_000)
    page.wait_for_function("() => location.search.includes('step=9')")
    assert model_data(page, "radix-ghosts")["size"] == []  # a ghost stays for its step only
    nodes = model_data(page, "radix-nodes")
    # the splits made at matches stay (7 edges, 164 tokens, and the root)
    assert sorted(nodes["size"]) == [0, 2, 8, 20, 26, 30, 33, 45]
    assert sum(model_data(page, "radix-edges")["path"]) == 60 + 16 - 1  # the whole request
    evicted = table_header(page, "kv-radix-log").index("evicted")
    assert [row[evicted] for row in table_rows(page, "kv-radix-log")] == ["0", "0", "0", "0", "30"]


# The alpha the ghosts (evicted nodes) are drawn with.
FADED = """() => {
    const doc = Bokeh.documents[0], ghosts = doc.get_model_by_name('radix-ghosts');
    const r = [...doc.all_models].find(m => m.data_source === ghosts && m.glyph);
    return r.glyph.line_alpha.value;
}"""
# Each edge label as drawn (the browser cuts it to fit), and the pixels between two layers.
LABELS = """() => {
    const doc = Bokeh.documents[0], edges = doc.get_model_by_name('radix-edges');
    const labels = [...doc.all_models].find(m => m.source === edges && m.text !== undefined);
    const fig = [...doc.all_models].find(m => m.renderers && m.renderers.some(r => r.data_source === edges));
    const full = Array.from(edges.get_column('label'));
    return [full, Array.from(labels.text.transform.v_compute(full)),
            fig.inner_width / (fig.x_range.end - fig.x_range.start)];
}"""


def test_edge_labels_fit_between_the_nodes_on_a_phone_and_widen_on_a_desktop(page, served_app):
    widths = {}
    for width in (390, 1400):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{served_app}?lab=radix-demo&step=8")
        wait_ready(page)
        page.wait_for_timeout(500)  # the figure has its width
        full, drawn, px = page.evaluate(LABELS)
        assert len(drawn) == len(full) and all(
            d == f or d.endswith("…") and f.startswith(d[:-1]) for d, f in zip(drawn, full)
        )
        assert all(7.3 * len(d) <= 0.9 * px for d in drawn)  # no label reaches the next node
        widths[width] = max(map(len, drawn))
    assert widths[390] < widths[1400]  # a wider figure shows more of each edge


def test_a_shared_url_restores_the_step(page, served_app):
    page.goto(f"{served_app}?lab=radix-demo&pool=400&step=5")
    wait_ready(page)
    text = plain_text(page, "kv-radix-step").inner_text()
    assert text.startswith("request 2 (a later turn of request 0) - done")
    assert query(page)["pool"] == "400" and query(page)["step"] == "5"
    assert model_data(page, "radix-pool")["right"][-1] == 400


def test_fcfs_and_lspf_hit_rates_differ(page, served_app):
    page.goto(f"{served_app}?lab=cache-schedule&capacity=2000&policy=lspf")
    wait_ready(page)
    bars = model_data(page, "cache-hit-bars")
    rates = dict(zip(bars["name"], bars["value"]))
    assert abs(rates["FCFS"] - 0.494) < 0.01 and abs(rates["LSPF"] - 0.859) < 0.01  # few-shot, random order
    assert len(model_data(page, "cache-hit-lspf")["y"]) == 128 and model_data(page, "cache-hit-dfs-rank")["y"] == []
    assert "128 requests, 67,840 prompt tokens" in plain_text(page, "kv-cache-summary").inner_text()
    cells = model_data(page, "cache-table")  # the table's columns: order, hit rate, longest wait, mean wait
    assert [cells["c0"][0], cells["c1"][0], cells["c2"][0]] == ["FCFS", "49.4 %", "31"]
    assert [cells["c0"][1], cells["c1"][1]] == ["LSPF", "85.9 %"]
    shown = page.locator(".kv-cache-table .slick-cell").all_inner_texts()
    assert "FCFS" in shown and "85.9 %" in shown  # drawn as cells


def test_hostile_questions_stay_text(page, served_app, guard):
    hostile = "<img src=x onerror=alert(1)>|<script>alert(2)</script>"
    page.goto(f"{served_app}?lab=radix-demo&questions={quote(hostile)}&step=1")
    wait_ready(page)
    assert "<img src=x onerror=alert(1)>" in plain_text(page, "kv-radix-texts").inner_text()
    cells = page.locator(".kv-radix-log .slick-cell").all_inner_texts()
    assert "<script>alert(2)</script>" in " ".join(cells)  # a table cell, as text
    assert page.evaluate(INJECTED) == []
    assert guard.dialogs == []
