"""The schedulers lab's memory maps (app/views/schedulers.py): each cell's state is a number the
page colours, a frame sends only what changes (never the cells' boxes again), and the step text
counts exactly the cells each map shows."""

import sys
from collections import Counter

import numpy as np
import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

from bokeh.document import Document  # noqa: E402
from bokeh.document.events import ColumnDataChangedEvent  # noqa: E402

import kvweb.labs  # noqa: E402, F401
from app.views.schedulers import MODES, STATES, WHOLE_POOL, SchedulersView, StateMap, state_codes  # noqa: E402
from figures_table import figures  # noqa: E402
from kvweb.lab import LABS  # noqa: E402
from kvweb.serving.loop.continuous_batching import CACHED, FREE, OTHER, SHARED  # noqa: E402


def test_each_owner_has_its_state():
    owners = np.array([7, SHARED, CACHED, FREE, 0, OTHER])
    names = [STATES[c][0] for c in state_codes(owners)]
    assert names == [
        "running",
        "running, from the prefix cache",
        "cached, reusable",
        "free",
        "running",
        "another group's",
    ]


def test_a_frame_sends_only_what_changes():
    cells = StateMap("vllm-v1")
    doc = Document()
    doc.add_root(cells.figure)
    events = []
    doc.on_change(lambda event: events.append(event))
    cells.reset("title", 10)  # 10 cells: 8 a row, two rows
    events.clear()
    cells.draw({"owner": [3] * 10, "written": [50] * 10})
    assert len(events) == 1 and events[0].cols is None  # all of the data, boxes too
    data = cells.cells.source.data
    # cell 9 is the second of row 2: left 1, right 1.88, top -1, bottom -1.88; half written
    assert (data["left"][9], data["right"][9], data["top"][9]) == (1.0, 1.88, -1.0)
    assert data["bottom"][9] == pytest.approx(-1.88) and data["fill_top"][9] == pytest.approx(-1.44)
    events.clear()
    cells.draw({"owner": [FREE] * 9 + [CACHED], "written": [0] * 9 + [100]})
    assert len(events) == 1 and isinstance(events[0], ColumnDataChangedEvent)
    assert set(events[0].cols) == {"fill_top", "state", "owner", "written"}  # the boxes stay in the page
    assert list(cells.cells.source.data["state"]) == [3] * 9 + [2]
    assert data["fill_top"][9] == pytest.approx(-1.0)
    cells.reset("title", 100)  # another grid: the boxes go again
    events.clear()
    cells.draw({"owner": [0] * 100, "written": [100] * 100})
    assert len(events) == 1 and events[0].cols is None and len(cells.cells.source.data["left"]) == 100


def test_the_step_text_counts_the_cells_each_map_shows():
    lab = LABS["schedulers"](requests=30, workload="few-shot")
    view = SchedulersView()
    view.update(lab, lab.run())
    step = len(view.timeline["t"]) // 2
    view.show_step(step)
    lines = view.step_text.text.split("\n")[1:]
    for mode, frames, at, line in zip(MODES, view.frames, view.timeline["frames"], lines):
        owners = frames[at[step]]["owner"]
        by_hand = Counter(
            "running"
            if o >= 0
            else {SHARED: "running, from the prefix cache", CACHED: "cached, reusable"}.get(o, "free")
            for o in owners
        )
        assert line == f"{mode}: " + ", ".join(f"{name} {by_hand[name]}" for name, _ in STATES[:WHOLE_POOL])
        assert list(view.maps[mode].cells.source.data["owner"]) == owners
    assert not view.group_maps["vllm-v1"].figure.visible and not view.key_items[WHOLE_POOL].visible  # one kind: none


def test_a_hybrid_model_gets_a_map_per_kv_cache_group_and_a_model_of_one_kind_none():
    lab = LABS["schedulers"](
        scenario="B", model="gpt-oss-20b", weight_precision="int4", workload="few-shot", requests=30
    )
    view = SchedulersView()
    result = lab.run()
    view.update(lab, result)
    step = len(view.timeline["t"]) // 2
    view.show_step(step)
    frame = result["modes"][0]["trace"]["frames"][view.timeline["frames"][0][step]]
    maps = view.group_maps["vllm-v1"]
    assert maps.figure.visible and view.group_maps["sglang"].figure.visible and view.key_items[WHOLE_POOL].visible
    data = maps.cells.source.data
    cells = len(frame["groups"][0]["owner"])
    assert list(data["owner"]) == frame["groups"][0]["owner"] + frame["groups"][1]["owner"]
    assert list(data["written"]) == frame["groups"][0]["written"] + frame["groups"][1]["written"]
    assert list(data["group"]) == [0] * cells + [1] * cells
    # a band a group, 64 cells a row, each under a row for its title: 1,021 cells (152,100 blocks, 149 a cell)
    # are 16 rows, so the second band's first cell is at the left of row 18
    assert cells == 1021 and (data["left"][0], data["top"][0]) == (0, -1) and data["left"][63] == 63
    assert (data["left"][cells], data["top"][cells]) == (0, -18) and maps.titles.data["y"] == [-0.45, -17.45]
    assert maps.titles.data["text"] == ["0: sliding window (128 tokens), 12 layers", "1: full attention, 12 layers"]
    assert maps.group_names.args["names"][0].startswith("0: sliding window (128 tokens), 12 layers; one cell = ")
    assert view.group_note.text.startswith("vllm-v1: one pool of blocks, drawn once per KV cache group")
    assert "sliding-window group frees" in view.group_note.text and "linear" not in view.group_note.text
    # SGLang's two pools, a band each: the full pool's token slots, then the window pool's
    pools = view.group_maps["sglang"]
    sglang = result["modes"][1]["trace"]
    assert pools.figure.title.text == "sglang: each pool's map"
    assert pools.titles.data["text"] == ["0: full attention, 12 layers", "1: sliding window (128 tokens), 12 layers"]
    assert (
        pools.group_names.args["names"][1]
        == f"1: sliding window (128 tokens), 12 layers; one cell = {sglang['groups'][1]['cell_tokens']:,} tokens"
    )
    assert (
        "sglang: a pool of its own for each kind of layer, drawn one each; the full pool holds" in view.group_note.text
    )
    plain = LABS["schedulers"](requests=30, workload="few-shot")
    view.update(plain, plain.run())
    view.show_step(0)
    assert not maps.figure.visible and not pools.figure.visible and not view.key_items[WHOLE_POOL].visible
    assert view.group_note.text == ""


def test_sglangs_state_pool_counts_states_a_cell():
    lab = LABS["schedulers"](scenario="B", model="qwen3-next-80b-a3b", weight_precision="int4", requests=30)
    view = SchedulersView()
    view.update(lab, lab.run())
    pools = view.group_maps["sglang"]
    assert pools.titles.data["text"] == ["0: full attention, 12 layers", "1: linear state, 36 layers"]
    assert pools.group_names.args["names"][1] == "1: linear state, 36 layers; one cell = 1 states"
    assert "the state pool holds one state per running request" in view.group_note.text


def test_the_time_figures_span_exactly_the_curves():
    """Their ranges are set from Python (an automatic range shared by three figures repaints
    them twice per redraw), as where Reset goes back to, and hold every point of every mode."""
    lab = LABS["schedulers"](requests=30, workload="few-shot")
    view = SchedulersView()
    result = lab.run()
    view.update(lab, result)
    curves = [m["trace"]["curves"] for m in result["modes"]]
    capacity = result["scenario"]["kv_capacity_tokens"]
    time = view.hits.x_range
    assert view.batch.x_range is time and view.memory.x_range is time
    assert (time.start, time.end) == (0, max(c["t"][-1] for c in curves))
    assert view.batch.y_range.end == pytest.approx(1.05 * max(max(c["batch"]) for c in curves))
    held = max(max(c["occupied"] + c.get("cached", [])) for c in curves)  # (the paper engine caches nothing)
    assert view.memory.y_range.end == pytest.approx(1.05 * 100 * held / capacity)
    assert view.hits.y_range.end == pytest.approx(1.05 * 100 * max(max(c.get("hit_rate", [0])) for c in curves))
    for axis in (time, view.hits.y_range, view.batch.y_range, view.memory.y_range):
        assert (axis.reset_start, axis.reset_end) == (axis.start, axis.end)


def test_the_engines_time_figures_span_both_runs():
    from app.views.memory_maps import EngineView

    lab = LABS["engine"](requests=40, rate=4.0)  # paged, compared with the oracle
    result = lab.run()
    view = EngineView()
    view.update(lab, result)
    runs = [result, result["compare"]]
    curves = [r["trace"]["curves"] for r in runs]
    capacity = result["scenario"]["kv_capacity_tokens"]
    last_event = max((t for r in runs for t in r["trace"]["event_bins"]["t1"]), default=0.0)
    assert view.batch.x_range is view.memory.x_range is view.marks.x_range
    assert view.memory.x_range.end == max(max(c["t"][-1] for c in curves), last_event)
    assert view.memory.y_range.end == pytest.approx(
        1.05 * 100 * max(max(c["occupied"] + c["used"]) for c in curves) / capacity
    )
    queue = [w + p for c in curves for w, p in zip(c["waiting"], c["preempted"])]
    assert view.batch.y_range.end == pytest.approx(1.05 * max(queue + [b for c in curves for b in c["batch"]]))


def test_an_engine_cell_and_the_host_strip_colour_a_request_alike():
    from bokeh.palettes import Category20_20

    from app.views.memory_maps import OWNER_COLORS, owner_color, owner_index

    owners = np.array([0, 19, 20, 43, -1])
    assert owner_index(owners).tolist() == [0, 19, 0, 3, 20]  # id mod 20; free is the last colour
    assert [owner_color(o) for o in owners] == [
        Category20_20[0],
        Category20_20[19],
        Category20_20[0],
        Category20_20[3],
        OWNER_COLORS[-1],
    ]


def test_the_table_and_header_show_concurrency_and_the_end_of_the_run():
    lab = LABS["schedulers"](requests=30, workload="few-shot")
    view = SchedulersView()
    result = lab.run()
    view.update(lab, result)
    table = figures(view)
    for m in result["modes"]:
        assert table["most requests at once"][m["mode"]] == f"{m['max_batch']:,}"
        assert max(m["trace"]["curves"]["batch"]) <= m["max_batch"]  # the curve samples some steps
        end = f"{100 * m['end_usage_frac']:.1f} % / {100 * m['end_cached_frac']:.1f} %"
        assert table["at the end: held by requests / cached, reusable"][m["mode"]] == end
    assert f"maximum concurrency for 2,048 tokens per request: {result['max_concurrency']:.2f}x" in view.header.text
