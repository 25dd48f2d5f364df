"""The views' results as tables (app/view.py TextTable): each cell holds the library's own
figure, each column is as wide as its text (a Chinese character counted twice), figures
align right, and the header is in the session's language."""

import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import kvweb.labs  # noqa: E402, F401
from app import i18n  # noqa: E402
from app.site.screen import Screen  # noqa: E402
from app.view import (  # noqa: E402
    CELL_PAD_PX,
    CHAR_PX,
    LABEL_WIDE_PX,
    ROW_PX,
    TextTable,
    fit_widths,
    fixed_columns,
    is_figure,
    table_css,
    text_table,
    titled_widths,
    wide_widths,
)
from app.views.cache_schedule import CacheScheduleView, PrefixHashView  # noqa: E402
from app.views.engine_sweeps import RecoveryView, SweepView  # noqa: E402
from app.views.fragmentation import FragmentationView  # noqa: E402
from app.views.max_rate import MaxRateView  # noqa: E402
from app.views.roofline import RooflineView  # noqa: E402
from kvweb.jsonable import number  # noqa: E402
from kvweb.lab import LABS, ParamError  # noqa: E402


@pytest.fixture
def chinese():
    """The session's language is Chinese for the test (the header is read in it)."""
    i18n.use("zh")
    yield
    i18n.use("en")


def shown(view_class, lab_name: str, **params):
    """A view updated with a real run of its lab; (the lab's result, the view's table as rows)."""
    lab = LABS[lab_name](**params)
    result = lab.run()
    view = view_class()
    view.update(lab, result)
    table = view.table
    data = table.source.data
    rows = [[data[c.field][i] for c in table.table.columns] for i in range(len(data[table.table.columns[0].field]))]
    return result, [c.title for c in table.table.columns], rows


def test_a_column_is_as_wide_as_its_widest_text_chinese_counted_twice():
    assert fit_widths(["ab"], [["abcd", "a"]]) == [CELL_PAD_PX + round(CHAR_PX * 4)]
    assert fit_widths(["块大小"], [["16"]]) == [CELL_PAD_PX + round(CHAR_PX * 6)]
    assert fit_widths(["x"], [["y" * 500]], max_px=300) == [300]
    data, widths = text_table(["a", "b"], [[1, "x"], [2.5, "yy"]])
    assert data == {"c0": ["1", "2.5"], "c1": ["x", "yy"]} and len(widths) == 2


def test_figures_align_right_and_words_left():
    assert is_figure(["1", "12.5 %", "-3", ".5", "", "1.197e+04", "13.3 ms / 43.4 ms"])
    assert not is_figure(["16", "recompute"]) and not is_figure(["True"]) and not is_figure([])


def test_a_label_column_on_a_wide_page_fits_its_longest_label_up_to_its_bound():
    assert wide_widths(["", "a"], ["ab", "abcd"], [50, 60]) == [CELL_PAD_PX + round(CHAR_PX * 4), 60]
    assert wide_widths(["", "a"], ["吞吐量"], [50, 60]) == [CELL_PAD_PX + round(CHAR_PX * 6), 60]
    # 360 px bounds other columns; a label goes beyond it, up to LABEL_WIDE_PX
    assert wide_widths(["", "a"], ["x" * 55], [360, 60]) == [CELL_PAD_PX + round(CHAR_PX * 55), 60] == [399, 60]
    assert wide_widths(["", "a"], ["x" * 80], [360, 60]) == [LABEL_WIDE_PX, 60]


def test_a_column_of_figures_is_as_narrow_as_its_figures_its_title_wrapping_between_words():
    # "recomputed tokens" (17 columns, 133 px) over "3,509" (49 px): as wide as "recomputed" (84 px)
    assert titled_widths(["recomputed tokens"], {"c0": ["3,509"]}, [133], [True]) == [84]
    # one word is never broken: "preemptions" keeps its 91 px over figures of 28 px
    assert titled_widths(["preemptions"], {"c0": ["1", "24"]}, [91], [True]) == [91]
    # Chinese breaks between characters: "抢占次数" (8 columns, 70 px) over "24" (28 px) takes two
    # lines of two characters, 49 px (4 columns of 7 px, a tenth spare: 0.9 * 35 px >= 28 px)
    assert titled_widths(["抢占次数"], {"c0": ["24"]}, [70], [True]) == [49]
    assert titled_widths(["name"], {"c0": ["a"]}, [42], [False]) == [42]  # not figures: kept


def test_a_table_wider_than_a_phone_keeps_its_first_column_in_view():
    assert fixed_columns([100, 100, 100, 100]) == 1  # 400 px > 370 px
    assert fixed_columns([60, 300]) is None  # 360 px fits
    assert fixed_columns([500]) is None  # nothing beside it scrolls


def test_text_wraps_only_in_the_columns_laid_out_on_several_lines():
    assert ".slick-cell" not in table_css(1, []) and "height: 16px" in table_css(1, [])
    cells = table_css(2, [0, 4]).split(".slick-header")[0]
    assert cells.count("white-space: normal; overflow-wrap: anywhere") == 2 and ".l0 " in cells and ".l4 " in cells
    assert ".l1 " not in cells and "height: 32px" in table_css(2, [])


LABEL = "requests/s: arrived / served (whole run)"  # 40 columns: 14 + 7 * 40 = 294 px


def test_a_table_of_row_labels_takes_one_line_a_row_on_a_wide_page_and_wraps_them_on_a_phone():
    """The page's width comes from its screen box (app/site/screen.py): "wide" at first, then what
    the page says; the table lays itself out again. Figures: 11 columns, 14 + 77 = 91 px each."""
    screen = Screen()
    table = TextTable("t", "kv-t")
    table.screen = screen
    screen.tables.add(table)
    table.show(["", "a", "b", "c"], [[LABEL, "0.73 / 0.70", "0.73 / 0.71", "0.73 / 0.71"]] * 3)
    assert [c.width for c in table.table.columns] == [294, 91, 91, 91]
    assert table.table.row_height == ROW_PX == 26 and table.table.frozen_columns == 1
    assert table.table.height == 26 + 3 * 26 + 8 + 18  # header, rows, border, sideways scroll bar
    screen.box.value = "narrow"
    # the label column: what 370 px leave beside the widest figures (279), within 140-240 px; the
    # label then wraps after "served" (29 columns a line: a tenth of 226 px kept spare)
    assert [c.width for c in table.table.columns] == [240, 91, 91, 91]
    assert table.table.row_height == 2 * 17 + 8 and table.table.frozen_columns == 1
    assert "white-space: normal" in table.style.css
    screen.box.value = "wide"  # a phone turned, a window widened
    assert [c.width for c in table.table.columns] == [294, 91, 91, 91] and table.table.row_height == 26


def test_a_first_column_of_figures_naming_the_row_stays_in_view_on_a_phone():
    table = TextTable("t", "kv-t")
    header = ["rate", "throughput (tokens/s)", "SLO attainment", "mean batch", "KV / occupied", "preemptions"]
    table.show(header, [["2", "249", "100.0 %", "5.9", "99.9 %", "0"], ["4", "498", "99.0 %", "9.1", "100.0 %", "3"]])
    widths = [c.width for c in table.table.columns]
    assert sum(widths) > 370 and table.table.frozen_columns == 1 and table.table.row_height == 26, widths
    table.show(["rate", "throughput"], [["2", "249"]])  # fits a phone: one grid
    assert table.table.frozen_columns is None


def test_a_long_text_beside_the_first_column_wraps_instead_of_being_cut():
    """The fsm lab's outputs: a column of text is at most 360 px wide (346 px of text: 44 columns a
    line with a tenth spare), so 200 characters of words take 5 lines; only that column wraps."""
    table = TextTable("t", "kv-t")
    table.show(["seed", "output", "forwards"], [["0", "abcd " * 40, "12"], ["1", "short", "9"]])
    assert [c.width for c in table.table.columns][1] == 360
    assert table.table.row_height == 5 * 17 + 8
    assert ".slick-cell.l1 " in table.style.css and ".slick-cell.l0 " not in table.style.css


def test_the_sweep_table_holds_the_sweeps_figures():
    result, header, rows = shown(SweepView, "sweep", sweep="watermark", requests=40, rate=5)
    assert header[:3] == ["watermark", "throughput (tokens/s)", "SLO attainment"]
    assert len(rows) == len(result["rows"]) == 7
    for row, r in zip(rows, result["rows"]):
        assert row[0] == f"{r['watermark']:.4g}" and row[1] == f"{r['throughput_tok_s']:,.0f}"
        assert row[2] == f"{100 * r['slo_attainment']:.1f} %" and row[5] == f"{r['preemptions']:,}"
    assert float(rows[0][1].replace(",", "")) > 100  # tokens/s, not a fraction


def test_the_recovery_table_holds_swap_and_recompute_in_ms():
    result, header, rows = shown(RecoveryView, "recovery", tokens=1000)
    sixteen = next(row for row in rows if row[0] == "16")
    r = next(r for r in result["per_block_size"] if r["block_size"] == 16)
    assert sixteen[1:4] == [f"{1e3 * r['swap_s']:.2f}", f"{1e3 * r['swap_in_s']:.2f}", f"{1e3 * r['recompute_s']:.2f}"]
    assert sixteen[1:3] == ["6.50", "3.25"]  # 2 x (1000 x 128 KiB / 50 GB/s + 63 x 10 us), and one way
    assert header[0] == "block size" and sixteen[4] == r["faster"]


def test_the_max_rate_table_has_a_row_per_memory_manager(chinese):
    result, header, rows = shown(MaxRateView, "max-rate", requests=60)
    assert header == ["内存管理器", "最高速率（请求/秒）", "paged 的速率 / 该管理器的速率"]
    by_manager = {row[0]: row for row in rows}
    assert set(by_manager) == {"max", "pow2", "oracle", "paged"}
    assert by_manager["oracle"][1] == f"{result['max_rate']['oracle']:.3f}"
    assert by_manager["max"][2] == f"{result['paged_over']['max']:.2f}x" and by_manager["paged"][2] == ""


def test_the_roofline_table_holds_the_kv_capacity():
    result, header, rows = shown(RooflineView, "roofline")
    figures = dict(rows)
    assert figures["KV capacity (tokens)"] == "11,969" == f"{result['kv_capacity_tokens']:,}"  # never 1.197e+04
    assert figures["KV capacity (blocks)"] == str(result["kv_capacity_blocks"])


def test_the_roofline_table_in_chinese(chinese):
    _, header, rows = shown(RooflineView, "roofline")
    assert header == ["指标", "值"]
    assert all(any("\u4e00" <= c <= "\u9fff" for c in label) for label, _ in rows)


def test_the_cache_and_hash_tables_hold_the_hit_rates():
    result, header, rows = shown(CacheScheduleView, "cache-schedule", capacity=2000, policy="lspf")
    assert header == ["order", "hit rate", "longest wait", "mean wait"]
    assert rows[0] == ["FCFS", "49.4 %", "31", f"{result['runs']['fcfs']['mean_wait']:.1f}"]
    assert rows[-1][:2] == ["optimum: offline DFS order", f"{100 * result['optimal_hit_rate']:.1f} %"]
    result, header, rows = shown(PrefixHashView, "prefix-hash")
    assert header == ["block size", "radix tree", "radix tree, pages of a block", "chained block hashes"]
    sweep = result["block_sweep"]
    assert [row[0] for row in rows] == [f"{b:,}" for b in sweep["block_size"]]
    assert rows[-1][3] == f"{100 * sweep['hit_rate']['hash'][-1]:.1f} %"


def test_the_fragmentation_table_holds_failures_per_mean_size():
    result, header, rows = shown(FragmentationView, "fragmentation", requests=200)
    assert header == ["mean size", "failures", "with enough free", "share"]
    assert rows == [
        [
            str(r["mean_size"]),
            str(r["failures"]),
            str(r["failures_with_enough_free"]),
            f"{100 * r['share_with_enough_free']:.1f} %",
        ]
        for r in result["by_mean_size"]
    ]


def test_the_plan_tables_hold_the_front_and_every_candidate_with_why_it_was_pruned(chinese):
    from app.views.plan import PlanView

    lab = LABS["plan"](
        model="llama-3.1-70b",
        gpus="H100-SXM",
        tps="1,2,4",
        weight_precisions="16-bit",
        schedulers="sglang",
        replicas="1",
        requests=40,
        rate=4.0,
    )
    result = lab.run()
    view = PlanView()
    view.update(lab, result)
    columns = [c.title for c in view.pareto.table.columns]
    assert columns == ["配置", "GPU", "每小时美元", "TTFT p90 (s)", "TPOT p90 (ms)", "SLO 达成率", "结论"]
    pareto = view.pareto.source.data
    assert (
        pareto["c0"]
        == [r["key"] for r in result["pareto"]]
        == [
            "H100-SXM/tp2/w-16-bit/kv-16-bit/sglang/x1/round-robin",
            "H100-SXM/tp4/w-16-bit/kv-16-bit/sglang/x1/round-robin",
        ]
    )
    assert pareto["c2"] == ["6", "12"]  # 2 and 4 H100s at $3.00 an hour
    assert pareto["c3"] == [number(r["ttft_p90_s"], 3) for r in result["pareto"]]
    every = view.everything.source.data  # cheapest first: one H100 cannot hold 141 GB of weights
    assert every["c0"][0] == "H100-SXM/tp1/w-16-bit/kv-16-bit/sglang/x1/round-robin"
    assert [every["c3"][0], every["c6"][0]] == ["", "放不下"]


def test_the_plan_links_the_cheapest_and_each_front_row_to_the_fleet_lab():
    """One button for the cheapest and one per row of the front; pressing one opens the query
    `Route` writes for the fleet lab on that candidate (its values, the plan's workload)."""
    from app.route import Route
    from app.views.plan import PlanView
    from kvweb.fleet.candidate import Candidate
    from kvweb.labs.fleet import FleetLab

    lab = LABS["plan"](
        model="llama-3.1-70b",
        gpus="H100-SXM",
        tps="1,2,4",
        weight_precisions="16-bit",
        schedulers="sglang",
        replicas="1",
        requests=40,
        rate=4.0,
    )
    result = lab.run()
    view, opened = PlanView(), []
    view.navigate = opened.append
    view.update(lab, result)
    cheapest, front = view.open_cheapest.objects, view.open_front.objects
    assert [b.name for b in cheapest] == [f"open the cheapest in the fleet lab: {result['cheapest']['key']}"]
    assert [b.name for b in front] == [f"open in the fleet lab: {r['key']}" for r in result["pareto"]]
    front[1].value = True  # a press
    query = opened.pop()
    assert query == Route(lab=FleetLab.of_candidate(lab, Candidate.of(result["pareto"][1]))).query()
    assert {k: query[k] for k in ("lab", "gpu", "tp", "mode", "replicas", "routers", "model", "requests", "rate")} == {
        "lab": "fleet",
        "gpu": "H100-SXM",
        "tp": "4",
        "mode": "sglang",
        "replicas": "1",
        "routers": "round-robin",
        "model": "llama-3.1-70b",
        "requests": "40",
        "rate": "4.0",
    }
    assert front[1].value is False  # springs back


def test_a_plan_row_beyond_the_fleet_lab_says_so_instead_of_a_link(chinese):
    """The fleet lab runs a candidate's fleet and the single engine beside it: about twice a plan's
    work for it, so a plan within the budget may hold a row the fleet lab refuses (here 3,000
    requests of 8,000 output tokens, one at a time in a 70B replica's little KV memory). Such a row
    gets one line saying why, not a link whose URL the fleet lab would open with values reset."""
    from app.views.plan import PlanView
    from kvweb.fleet.candidate import Candidate
    from kvweb.labs.fleet import FleetLab

    grid = dict(
        model="llama-3.1-70b",
        gpus="A100-80GB",
        tps="2",
        weight_precisions="16-bit",
        schedulers="sglang",
        cost_model="roofline",
        replicas="1",
        workload="fixed",
        prompt_len=100,
        output_len=8000,
        max_len=8192,
        rate=0.05,
    )
    small = LABS["plan"](**grid, requests=4)
    result = small.run()
    large = LABS["plan"](**grid, requests=3000)
    large.admit()  # the plan accepts it
    (row,) = result["pareto"]
    with pytest.raises(ParamError, match="over the budget"):
        FleetLab.of_candidate(large, Candidate.of(row)).admit()
    view = PlanView()
    view.update(small, result)
    assert [b.css_classes for b in view.open_front.objects] == [["kv-plan-open-0"]]  # within its limits: a link
    view.update(large, result)  # the large plan's rows (figures from the small one: only the links differ)
    (line,) = [o.object.text for o in view.open_front.objects]
    assert line.startswith(f"{row['key']}: 超出 fleet lab 的限制，不提供链接: requests, prompt_len, output_len")
    assert line.endswith("超出了 20 秒的预算；调低 requests/prompt_len/output_len/replicas/routers 或调高 block_size")


def test_the_fleet_view_sets_every_split_beside_co_located_and_names_up_to_8_lines():
    from app.views.fleet import FleetView

    lab = LABS["fleet"](workload="few-shot", requests=30, replicas=3, prefill_replicas=1, routers="exact-prefix")
    result = lab.run()
    view = FleetView()
    view.update(lab, result)
    data = view.disaggregated.source.data
    splits = result["disaggregation"]["splits"]
    assert data["c0"] == ["co-located", "disaggregated 1 + 2 ←", "disaggregated 2 + 1"]
    assert data["c7"] == ["", *("yes" if s["pays"] else "no" for s in splits)]
    assert (
        data["c6"][1]
        == f"{number(1e3 * splits[0]['transfer_s']['p50'], 3)} / {number(1e3 * splits[0]['transfer_s']['p99'], 3)}"
    )
    assert [i.label.value for i in view.legend.items] == ["0", "1", "2"] and view.legend.visible
    many = LABS["fleet"](workload="sharegpt", requests=30, replicas=9, routers="round-robin")
    view.update(many, many.run())
    assert len(view.legend.items) == 9 and not view.legend.visible  # hover names a line
