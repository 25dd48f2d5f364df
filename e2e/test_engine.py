"""The served app end to end on the engine lab: the memory maps animate, and choosing
another memory manager redraws the chart."""

import json
from urllib.parse import parse_qs

from conftest import plain_text, table_rows, wait_ready

from app.views.memory_maps import OWNER_COLORS

CELLS = "(name) => Bokeh.documents[0].get_model_by_name(name).data"
# a map's columns are number arrays: each cell's colour (an index in OWNER_COLORS), hatched (0 or 1)
NUMBERS = (
    "([name, keys]) => Object.fromEntries(keys.map(k => [k, Array.from("
    "Bokeh.documents[0].get_model_by_name(name).data[k])]))"
)
FREE = len(OWNER_COLORS) - 1


def cells(page, side: str) -> dict:
    return page.evaluate(NUMBERS, [f"engine-{side}-cells", ["color", "hatched", "written", "freed"]])


def query(page) -> dict:
    return {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}


def test_memory_maps_animate(page, served_app, guard):
    page.goto(f"{served_app}?lab=engine&requests=80&rate=5&step=10")
    wait_ready(page)
    assert query(page)["step"] == "10"
    step_text = plain_text(page, "kv-engine-step")
    at_10 = step_text.inner_text()
    assert at_10.startswith("t = ")
    before = cells(page, "left")
    assert len(before["color"]) == 748  # 11969 tokens / 16 = 748 blocks, one cell each
    page.locator(".kv-player button.next").click()
    page.wait_for_function("() => location.search.includes('step=11')")
    step_text.filter(has_not_text=at_10.splitlines()[0]).wait_for()
    page.locator(".kv-player button.play").click()
    page.wait_for_function("() => !location.search.includes('step=11') && /step=\\d+/.test(location.search)")
    # both runs share one clock, so a step may change only the other map: wait for this one
    page.wait_for_function(
        "(before) => JSON.stringify(Array.from(Bokeh.documents[0]"
        ".get_model_by_name('engine-left-cells').data.color)) !== before",
        arg=json.dumps(before["color"], separators=(",", ":")),
    )
    assert guard.errors == []


def test_the_engine_opens_on_a_preemption(page, served_app, guard):
    """The default run (scenario A, 1000 requests) opens where paged memory preempts: the map's
    sources hold the victims' cells, outlined as freed, and the event marks count them."""
    page.goto(f"{served_app}?lab=engine")
    wait_ready(page)
    step = int(query(page)["step"])
    assert step > 0
    marks = page.evaluate(CELLS, "engine-left-marks")
    assert "#d62728" in list(marks["color"])  # cells a preemption freed since the frame before
    assert sum(cells(page, "left")["freed"]) == list(marks["color"]).count("#d62728")
    assert "preempted" in plain_text(page, "kv-engine-step").inner_text().splitlines()[1]
    events = page.evaluate(CELLS, "engine-events-0")
    assert sum(n for n, k in zip(events["count"], events["kind"]) if k.startswith("preempted")) == int(
        figure_rows(page)["preemptions"][0].replace(",", "")
    )  # every preemption is marked
    assert guard.errors == []


def figure_rows(page) -> dict:
    """The figures table as rendered: row label -> the runs' cells."""
    return {row[0]: row[1:] for row in table_rows(page, "kv-engine-table")}


def test_the_chinese_figures_table_lines_up(page, served_app):
    """A table of cells: every value of a column starts at the same x, whatever the width of
    the Chinese labels beside it."""
    page.goto(f"{served_app}?lab=engine&requests=80&rate=5&lang=zh")
    wait_ready(page)
    lefts = page.evaluate("""() => {
        const out = {};
        const walk = (root) => root.querySelectorAll('*').forEach((el) => {
            if (el.shadowRoot) walk(el.shadowRoot);
            const m = /\\bl(\\d)\\b/.exec(el.className || '');
            if (el.classList && el.classList.contains('slick-cell') && m)
                (out[m[1]] = out[m[1]] || []).push(Math.round(el.getBoundingClientRect().left));
        });
        walk(document);
        return out;
    }""")
    rows = len(figure_rows(page))  # every row drawn (the table is as tall as its rows)
    assert sorted(lefts) == ["0", "1", "2"]
    assert all(len(xs) == rows and len(set(xs)) == 1 for xs in lefts.values())
    assert lefts["0"][0] < lefts["1"][0] < lefts["2"][0]


def test_another_memory_manager_changes_the_chart(page, served_app):
    page.goto(f"{served_app}?lab=engine&requests=80&rate=5&compare=none&step=20")
    wait_ready(page)
    assert figure_rows(page)["finished / rejected"][0] == "80 / 0"
    paged = cells(page, "left")
    assert paged["hatched"].count(1) < len(paged["hatched"]) // 20  # paged: blocks hold KV once taken
    page.locator(".kv-param-memory select").select_option("max")
    page.wait_for_function("() => location.search.includes('memory=max')")
    wait_ready(page)
    # the redraw has landed once the map holds more hatched cells (reserved, never written) than paged's
    page.wait_for_function(
        "n => Array.from(Bokeh.documents[0].get_model_by_name('engine-left-cells').data.hatched)"
        ".filter(h => h === 1).length > n",
        arg=paged["hatched"].count(1),
    )
    reserved = cells(page, "left")
    assert reserved != paged
    held = [h for c, h in zip(reserved["color"], reserved["hatched"]) if c != FREE]
    assert held.count(1) > len(held) // 2  # Max reserves 2048 tokens for a few hundred written


def test_fragmentation_arena_animates(page, served_app):
    page.goto(f"{served_app}?lab=fragmentation&requests=400&step=5")
    wait_ready(page)
    step_text = plain_text(page, "kv-fragmentation-step")
    assert step_text.inner_text().startswith("request 21/400")  # a frame every 4th of 400 arrivals
    ranges = page.evaluate(CELLS, "fragmentation-ranges")
    assert len(ranges["left"]) > 0
    drawn = f"name => JSON.stringify(({CELLS})(name))"
    before = page.evaluate(drawn, "fragmentation-ranges")
    page.locator(".kv-player button.next").click()
    step_text.filter(has_text="request 25/400").wait_for()
    # The step's text and its data reach the page in separate paints: wait for the data too.
    page.wait_for_function(f"([name, before]) => ({drawn})(name) !== before", arg=["fragmentation-ranges", before])
    assert page.evaluate(CELLS, "fragmentation-ranges") != ranges


def test_fragmentation_draws_the_ideal_arena_packed(page, served_app):
    """allocator=ideal: the ranges drawn lie end to end from address 0 (no hole), first-fit's do not."""

    def spans(query: str) -> list[tuple[int, int]]:
        page.goto(f"{served_app}?lab=fragmentation&requests=400&step=60&{query}")
        wait_ready(page)
        drawn = page.evaluate(CELLS, "fragmentation-ranges")["span"]  # "start-end (length)", once per row piece
        return sorted({tuple(int(x) for x in s.split(" ")[0].split("-")) for s in drawn})

    packed = spans("allocator=ideal")
    assert packed and packed[0][0] == 0 and all(a[1] == b[0] for a, b in zip(packed, packed[1:]))
    holes = spans("allocator=first-fit")
    assert any(a[1] != b[0] for a, b in zip(holes, holes[1:]))


def test_sweep_and_recovery_views_draw(page, served_app):
    page.goto(f"{served_app}?lab=recovery&tokens=1000")
    wait_ready(page)
    row = page.locator(".kv-recovery-table .slick-row", has_text="6.50")  # 2 x (1000 x 128 KiB / 50 GB/s + 63 x 10 us)
    assert row.locator(".slick-cell").all_inner_texts()[:3] == ["16", "6.50", "3.25"]  # block, swap out + in, in
    assert len(page.evaluate(CELLS, "recovery-by-gpu")["gpu"]) == 4
    page.goto(f"{served_app}?lab=sweep&sweep=watermark&requests=40&rate=5")
    wait_ready(page)
    assert len(table_rows(page, "kv-sweep-table")) == 7  # 7 watermarks (its first column fixed: two grids)
