"""`kvweb reproduce`: every lecture experiment through the labs, Markdown + self-contained HTML."""

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest

from kvweb.cli import main
from kvweb.jsonable import number
from kvweb.parsing import make
from kvweb.query import from_query
from kvweb.reproduce import EXPERIMENTS, _cell, num, reproduce, to_html, to_markdown
from kvweb.svg import Chart, Series, nice_top, render

LECTURE = {  # issue 7's list, SPEC sections 2-6
    "block-tables",
    "equivalence",
    "internal-fragmentation",
    "external-fragmentation",
    "paged-vs-reserved",
    "max-rate",
    "block-size",
    "parallel-sampling",
    "beam-search",
    "recovery",
    "swap-vs-recompute",
    "watermark",
    "radix-demo",
    "few-shot",
    "multi-turn",
    "prefill-savings",
    "fsm",
}


@pytest.fixture(scope="module")
def report():
    seen = []
    data = reproduce(quick=True, progress=lambda f, m: seen.append(f))
    data["progress"] = seen
    return data


def test_every_lecture_experiment_is_in_the_report(report):
    keys = [s["key"] for s in report["sections"]]
    assert LECTURE <= set(keys) and len(keys) == len(set(keys)) == len(EXPERIMENTS)
    for s in report["sections"]:
        assert s["figures"] and all(len(f) == 2 and f[1] for f in s["figures"]), s["key"]
        assert s["paper"] and s["runs"]


def test_progress_rises_to_one(report):
    seen = report["progress"]
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) > len(EXPERIMENTS)


def test_each_run_is_a_share_query_of_its_lab(report):
    for s in report["sections"]:
        for run in s["runs"]:
            lab, messages = from_query(run["query"])
            assert messages == [] and lab.lab_name == run["lab"]


def test_figures_come_from_the_labs_own_runs(report):
    section = next(s for s in report["sections"] if s["key"] == "parallel-sampling")
    for n, row in zip((2, 4, 8), section["rows"]):
        r = make("parallel-sampling", {"n": str(n)}).run()
        assert row[:3] == [n, r["blocks_shared"], r["blocks_unshared"]]
    gpu = next(s for s in report["sections"] if s["key"] == "paper-gpu")
    assert gpu["rows"][0][3] == 800 and gpu["rows"][0][5] == 11_969  # KiB per token; tokens (the lecture's model)
    assert gpu["rows"][1][0] == "opt-13b" and gpu["rows"][1][5] == 12_597  # the real OPT-13B ties its LM head


def test_html_is_self_contained_and_charts_are_valid_svg(report):
    html = to_html(report)
    assert "<script" not in html.lower() and " src=" not in html
    assert set(re.findall(r"https?://[^\"' ]+", html)) <= {"http://www.w3.org/2000/svg"}
    svgs = re.findall(r"<svg.*?</svg>", html, flags=re.S)
    assert len(svgs) == sum(len(s["charts"]) for s in report["sections"]) > 10
    for svg in svgs:
        ET.fromstring(svg)


def test_markdown_has_each_section_with_paper_and_commands(report):
    md = to_markdown(report)
    for s in report["sections"]:
        assert f"## {s['title']}" in md
    assert md.count("**Paper:**") == len(report["sections"]) and "`kvweb run max-rate --scenario A" in md


def test_text_is_escaped_in_charts():
    svg = render(Chart("bar", "<script>alert(1)</script>", "x", "y", ["<b>"], [Series("<i>", [1.0])]))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "<b>" not in svg
    ET.fromstring(svg)


@pytest.mark.parametrize("value, top", [(0.73, 1.0), (130, 200), (2.3, 2.5), (4.2, 5), (1000, 1000), (0, 1.0)])
def test_nice_axis_top(value, top):
    assert nice_top(value) == pytest.approx(top)


def test_cli_reproduce_writes_the_report(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    assert main(["reproduce", "--quick", "--out", str(tmp_path)], out, err) == 0
    written = out.getvalue().split()
    assert str(tmp_path / "report.md") in written and str(tmp_path / "report.html") in written
    assert "Block tables" in err.getvalue() and "done in" in err.getvalue()
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["quick"] is True
    md = (tmp_path / "report.md").read_text()
    for link in re.findall(r"\]\((charts/[^)]+)\)", md):
        ET.parse(tmp_path / link)


def test_cli_reproduce_bad_argument_exits_2():
    out, err = io.StringIO(), io.StringIO()
    assert main(["reproduce", "--fast"], out, err) == 2
    assert out.getvalue() == "" and "--fast" in err.getvalue() and len(err.getvalue().splitlines()) == 1


def test_every_quoted_figure_names_its_source():
    from kvweb.reproduce import LECTURE, SGLANG, VLLM, VLLM_BLOG, VLLM_CODE

    for e in EXPERIMENTS:
        if not e.source:
            assert "no figure" in e.paper or "no sweep" in e.paper, e.key
            continue
        work = next(w for w in (VLLM_BLOG, VLLM_CODE, VLLM, SGLANG, LECTURE) if e.source.startswith(w))
        if work in (VLLM, SGLANG):  # a paper: which section or figure
            assert "section" in e.source, e.key
    quotes = {e.key: (e.source, e.paper) for e in EXPERIMENTS}
    # "under 4 %" is the vLLM blog post's figure, not the SOSP paper's
    assert quotes["block-tables"][0] == VLLM_BLOG and "under 4 %" in quotes["block-tables"][1]
    assert all("4 %" not in paper for key, (_, paper) in quotes.items() if key != "block-tables")
    # vLLM's 1.7-2.7x and 2.7-8x are sustainable request rates at equal latency, not throughput
    for source, paper in quotes.values():
        if "1.7-2.7x" in paper:
            assert source.startswith(VLLM) and "request rate" in paper and "throughput of Orca" not in paper
    # SGLang's "up to 6.4x" and its "50-99 %" hit rates are separate claims
    for _, paper in quotes.values():
        assert "workloads with 50-99" not in paper and "6.4x higher throughput on" not in paper
    # a figure read off a chart and not checked is marked so
    for _, paper in quotes.values():
        if "96.3 %" in paper:
            assert "not checked" in paper


def test_the_report_formats_figures_as_the_cli_does():
    assert num(1554.7) == "1,555" == number(1554.7, 3)  # not 1.55e+03
    assert _cell(11_969) == "11,969" and _cell(26_194_984_960.0) == "26,194,984,960" and _cell(0.0431) == "0.0431"


def test_the_lecture_figures_beside_ours_at_full_size():
    """Issue 26: each lecture figure, ours on the lecture's settings and on our defaults (full sizes, 2-3 s)."""
    from kvweb.reproduce import run_experiment

    section = run_experiment(next(e for e in EXPERIMENTS if e.key == "lecture"))
    rows = {row[0]: row[1:4] for row in section["rows"]}
    assert [label for label, _ in section["figures"]] == list(rows)
    # 748 blocks: (0.9 x 40e9 - 2 x 13 097 492 480) // 819 200 = 11 969 tokens, // 16 = 748 (exact)
    assert rows["KV blocks of 16 tokens, OPT-13B-like on A100-40GB"] == ["748", "748", "748"]
    # 89.4 ms: (2 x 32 x 218 103 808 x 4096 + 2 x 4096 x 128 256 + 4 x 32 x 32 x 128 x 4096 x 4097 / 2) FLOPs
    # / (989e12 x 0.7) + 0.5 ms = 89.44 ms; our recovery lab's default of 2048 tokens: 43.4 ms (exact, to 0.1 ms)
    flops = 2 * 32 * 218_103_808 * 4096 + 2 * 4096 * 128_256 + 4 * 32 * 32 * 128 * 4096 * 4097 / 2
    assert f"{1000 * (flops / (989e12 * 0.7) + 0.5e-3):.1f} ms" == "89.4 ms"
    assert rows["recompute (one prefill) of 4096 tokens, Llama-3-8B on H100-SXM"] == ["89.4 ms", "89.4 ms", "43.4 ms"]
    # max rate, paged / oracle: recorded 1.59x with the ideal arena, 1.94x with first-fit (the issue's "compacted
    # 1.59x" and "1.94x"; printed to 0.01). Paged memory has no arena: only the Oracle rate moves.
    assert rows["scenario A: paged / oracle max rate"] == ["1.40x", "1.59x", "1.94x"]
    # longest few-shot request: 100 + 400 + 30 + 20 = 550 with fixed questions (exact); with lognormal questions
    # (sigma 1, seed 0) the longest question is 255 tokens: 775 (recorded; the lecture's 739)
    assert rows["few-shot, capacity 2000: longest request (tokens)"] == ["739", "775", "550"]
    # FCFS at capacity 2000 (recorded, to 0.1 %): varying question lengths do not bring it to the lecture's 42 %
    assert rows["few-shot, capacity 2000: FCFS hit rate"] == ["42.0 %", "49.5 %", "49.4 %"]
    # Exercise 5: the optimum with fixed questions is (7 x 100 + 120 x 500) / (128 x 530) = 89.5 % (exact);
    # FCFS and LSPF recorded (to 0.1 %)
    assert f"{100 * (7 * 100 + 120 * 500) / (128 * 530):.1f} %" == "89.5 %"
    assert rows["Exercise 5, capacity 800: hit rate FCFS / LSPF / offline DFS (the optimum)"] == [
        "24.0 % / 81.9 % / 89.5 %",
        "25.9 % / 83.2 % / 89.7 %",
        "25.8 % / 83.0 % / 89.5 %",
    ]
    # prefill seconds (recorded, to 0.01 s) on our default Llama-3-8B / H100-SXM: time saved below the hit rate
    # (the lecture's model and GPU for them are not in SPEC.md: no run on its settings)
    assert rows["prefill seconds without cache / FCFS / LSPF"] == ["5.58 / 3.95 / 2.71", "-", "1.45 / 1.05 / 0.87"]


def test_the_lecture_experiments_reserve_without_holes():
    """paged-vs-reserved and max-rate run the lecture's arena (ideal); their share queries say so."""
    for key in ("paged-vs-reserved", "max-rate"):
        exp = next(e for e in EXPERIMENTS if e.key == key)
        assert all(run.params["allocator"] == "ideal" for run in exp.runs), key


def test_a_bar_in_a_figure_stays_inside_its_markdown_cell():
    report = {
        "title": "t",
        "quick": True,
        "seconds": 0.0,
        "units": "u",
        "sections": [
            {
                "key": "k",
                "title": "s",
                "spec": "1",
                "figures": [["a", "1 | 2 | 3"]],
                "paper": "p",
                "source": "",
                "differs": "",
                "columns": ["x"],
                "rows": [["4 | 5"]],
                "charts": [],
                "runs": [],
            }
        ],
    }
    md = to_markdown(report)
    assert "| a | 1 \\| 2 \\| 3 |" in md and "| 4 \\| 5 |" in md
