"""The served app end to end on the engine lab: the memory maps animate, and choosing
another memory manager redraws the chart."""
from urllib.parse import parse_qs

from conftest import plain_text, wait_ready

CELLS = "(name) => Bokeh.documents[0].get_model_by_name(name).data"


def cells(page, side: str) -> dict:
    data = page.evaluate(CELLS, f"engine-{side}-cells")
    return {k: list(data[k]) for k in ("color", "hatch", "written")}


def query(page) -> dict:
    return {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}


def test_memory_maps_animate(page, served_app, guard):
    page.goto(f"{served_app}?lab=engine&requests=80&rate=5&step=10")
    wait_ready(page)
    assert query(page)["step"] == "10"
    step_text = plain_text(page, "kv-engine-step")
    assert "frame 11/" in step_text.inner_text()
    before = cells(page, "left")
    assert len(before["color"]) == 748  # 11969 tokens / 16 = 748 blocks, one cell each
    page.locator(".kv-player button.next").click()
    step_text.filter(has_text="frame 12/").wait_for()
    page.wait_for_function("() => location.search.includes('step=11')")
    page.locator(".kv-player button.play").click()
    page.wait_for_function("() => !location.search.includes('step=11') && /step=\\d+/.test(location.search)")
    page.locator(".kv-player button.pause").click()
    assert cells(page, "left") != before
    assert guard.errors == []


def test_another_memory_manager_changes_the_chart(page, served_app):
    page.goto(f"{served_app}?lab=engine&requests=80&rate=5&compare=none&step=20")
    wait_ready(page)
    summary = plain_text(page, "kv-engine-summary")
    assert "paged" in summary.inner_text()
    paged = cells(page, "left")
    assert paged["hatch"].count("/") < len(paged["hatch"]) // 20  # paged: blocks hold KV once taken
    page.locator(".kv-param-memory select").select_option("max")
    page.wait_for_function("() => location.search.includes('memory=max')")
    wait_ready(page)
    summary.filter(has_text="max").wait_for()
    reserved = cells(page, "left")
    assert reserved != paged
    held = [h for c, h in zip(reserved["color"], reserved["hatch"]) if c != "#ffffff"]
    assert held.count("/") > len(held) // 2  # Max reserves 2048 tokens for a few hundred written


def test_fragmentation_arena_animates(page, served_app):
    page.goto(f"{served_app}?lab=fragmentation&requests=400&step=5")
    wait_ready(page)
    step_text = plain_text(page, "kv-fragmentation-step")
    assert step_text.inner_text().startswith("request 21/400")  # a frame every 4th of 400 arrivals
    ranges = page.evaluate(CELLS, "fragmentation-ranges")
    assert len(ranges["left"]) > 0
    page.locator(".kv-player button.next").click()
    step_text.filter(has_text="request 25/400").wait_for()
    assert page.evaluate(CELLS, "fragmentation-ranges") != ranges


def test_sweep_and_recovery_views_draw(page, served_app):
    page.goto(f"{served_app}?lab=recovery&tokens=1000")
    wait_ready(page)
    assert "     16        6.50        3.25" in plain_text(page, "kv-recovery-table").inner_text()  # 2 x (1000 x 128 KiB / 50 GB/s + 63 x 10 us)
    assert len(page.evaluate(CELLS, "recovery-by-gpu")["gpu"]) == 4
    page.goto(f"{served_app}?lab=sweep&sweep=watermark&requests=40&rate=5")
    wait_ready(page)
    assert len(plain_text(page, "kv-sweep-table").inner_text().splitlines()) == 2 + 7  # scenario, header, 7 watermarks
