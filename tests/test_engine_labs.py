"""The serving labs through the lab contract and the CLI: result keys, traces, bad input."""

from __future__ import annotations

import io
import json

import pytest

from kvweb.cli import main
from kvweb.lab import LABS, ParamError
from kvweb.parsing import make
from kvweb.query import from_query

ENGINE_KEYS = (
    "throughput_tok_s",
    "slo_attainment",
    "mean_batch",
    "occupied_frac",
    "used_frac",
    "preemptions",
    "recomputed_tokens",
    "swapped_bytes",
    "sim_time_s",
    "finished",
    "rejected",
)


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_serving_labs_are_registered():
    assert {"engine", "max-rate", "recovery", "fragmentation", "sweep"} <= set(LABS)


def test_engine_json_has_the_listed_keys_for_both_managers():
    code, out, err = cli(
        "run", "engine", "--requests", "60", "--rate", "5", "--memory", "paged", "--compare", "max", "--json"
    )
    assert code == 0 and err == ""
    r = json.loads(out)["result"]
    for run in (r, r["compare"]):
        assert all(k in run for k in ENGINE_KEYS)
        assert run["finished"] + run["rejected"] == 60
    assert r["memory"] == "paged" and r["compare"]["memory"] == "max"
    assert r["throughput_tok_s"] > r["compare"]["throughput_tok_s"]


def test_the_served_rate_over_the_whole_run_stands_beside_the_arrival_rate():
    lab = make("engine", {"requests": "50"})
    r = lab.run()
    last = max(q.arrival for q in lab.workload_at(lab.rate))
    assert r["slo_attainment"] == 1 and r["finished"] == 50
    assert r["arrival_rate_per_s"] == pytest.approx(50 / last)  # 1.80 at the nominal 2 requests/s
    assert r["requests_per_s_whole_run"] == pytest.approx(50 / r["sim_time_s"])
    assert r["requests_per_s_whole_run"] < 0.5 * r["arrival_rate_per_s"]  # 50 requests: the drain is long


def test_engine_trace_shows_reserved_but_unused_space_for_max():
    r = make("engine", {"requests": "40", "rate": "5", "memory": "max", "compare": "paged"}).run()
    trace = r["trace"]
    curves = trace["curves"]
    assert len({len(v) for v in curves.values()}) == 1 and curves["t"] == sorted(curves["t"])
    frames = trace["frames"]
    assert 2 <= len(frames) <= 80 and trace["cell_tokens"] >= 1
    cells = [(o, w) for f in frames for o, w in zip(f["owner"], f["written"])]
    assert all(0 <= w <= 100 for _, w in cells) and all(w == 0 for o, w in cells if o < 0)
    unused = sum(1 for o, w in cells if o >= 0 and w == 0)
    held = sum(1 for o, _ in cells if o >= 0)
    assert unused > 0.5 * held  # Max reserves 2048 tokens for ~500 written
    line = r["timeline"]
    assert line["t"] == sorted(line["t"]) and len(line["frames"]) == 2
    for frames, shown in zip((frames, r["compare"]["trace"]["frames"]), line["frames"]):
        assert all(frames[i]["t"] <= t for i, t in zip(shown, line["t"]) if i > 0)
        assert shown == sorted(shown) and shown[-1] == len(frames) - 1
    paged = [(o, w) for f in r["compare"]["trace"]["frames"] for o, w in zip(f["owner"], f["written"])]
    assert sum(1 for o, w in paged if o >= 0 and w == 0) == 0  # a paged block holds KV once taken


def test_engine_trace_parameter():
    trace = "arrival,prompt_len,output_len\n0,100,50\n0.1,3000,10\n0.2,20,20"
    r = make("engine", {"workload": "trace", "trace": trace, "compare": "none"}).run()
    assert r["finished"] == 2 and r["rejected"] == 1 and r["compare"] is None
    assert "maximum length 2048" in r["rejections"][0]["reason"]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"workload": "trace", "trace": "0,1,1\n1,x,2"}, "trace row 2, field prompt_len"),
        ({"workload": "trace"}, "trace: empty"),
        ({"trace": "0,1,1"}, "trace: given, but workload is 'scenario'"),
        (
            {"workload": "fixed", "prompt_len": "2000", "output_len": "100"},
            "prompt_len + output_len: 2100 is not allowed",
        ),
        ({"memory": "lru"}, "memory: 'lru' is not allowed; expected one of max, pow2, oracle, paged"),
        ({"watermark": "0.9"}, "watermark: '0.9' is not allowed"),
    ],
)
def test_engine_bad_input_is_one_clear_line(params, message):
    with pytest.raises(ParamError) as err:
        make("engine", params)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_engine_cli_bad_trace_exits_2():
    code, out, err = cli("run", "engine", "--workload", "trace", "--trace", "0,1,1\n-2,1,1")
    assert code == 2 and out == "" and "trace row 2, field arrival" in err and err.count("\n") == 1


def test_engine_url_with_a_bad_trace_falls_back_to_defaults():
    lab, messages = from_query({"lab": "engine", "workload": "trace", "trace": "nonsense"})
    assert lab.workload == "scenario" and any("trace row 1" in m for m in messages)


def test_max_rate_orders_the_managers():
    r = make("max-rate", {"requests": "150", "rel_tol": "0.05"}).run()
    rates = r["max_rate"]
    assert set(rates) == {"max", "pow2", "oracle", "paged"}
    assert rates["paged"] > rates["oracle"] > rates["max"] > 0
    assert r["paged_over"]["max"] == pytest.approx(rates["paged"] / rates["max"])
    for row in r["managers"]:  # the answer passed and a rate within 5 % above it failed
        met = [t["rate"] for t in row["trials"] if t["met"]]
        failed = [t["rate"] for t in row["trials"] if not t["met"]]
        assert max(met) == row["max_rate"] and min(f for f in failed if f > row["max_rate"]) <= row["max_rate"] * 1.05


def test_max_rate_refuses_a_trace():
    with pytest.raises(ParamError, match="needs Poisson arrivals"):
        make("max-rate", {"workload": "trace", "trace": "0,1,1"})


def test_sweeps_report_progress_and_rows():
    seen = []
    r = make("sweep", {"sweep": "watermark", "requests": "80", "rate": "10"}).run(lambda f, m: seen.append(f))
    assert [row["watermark"] for row in r["rows"]] == [0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2]
    assert seen[-1] == 1.0 and seen == sorted(seen)
    r = make("sweep", {"sweep": "preemption", "requests": "60", "rate": "4"}).run()
    assert {(row["preemption"], row["block_size"]) for row in r["rows"]} >= {("swap", 16), ("recompute", 64)}
    assert len({row["rate"] for row in r["rows"]}) == 4
    r = make("sweep", {"sweep": "block_size", "requests": "60", "rate": "10"}).run()
    occupied = [row["occupied_frac"] - row["used_frac"] for row in r["rows"]]
    assert occupied[-1] > occupied[0]  # 256-token blocks waste more than 1-token blocks


def test_recovery_by_hand():
    r = make("recovery", {"model": "llama-3-8b", "gpu": "H100-SXM", "tokens": "1000"}).run()
    row16 = next(row for row in r["per_block_size"] if row["block_size"] == 16)
    one_way = 1000 * 131_072 / 50e9 + 63 * 10e-6  # bytes / link + ceil(1000/16) blocks x 10 us
    assert row16["swap_in_s"] == pytest.approx(one_way) and row16["swap_s"] == pytest.approx(2 * one_way)
    swaps = [row["swap_s"] for row in r["per_block_size"]]
    assert swaps == sorted(swaps, reverse=True)  # fewer, larger blocks: less per-block overhead
    assert {row["recompute_s"] for row in r["per_block_size"]} == {r["recompute_s"]}
    assert {entry["gpu"] for entry in r["by_gpu"]} == {"A100-40GB", "A100-80GB", "H100-SXM", "H200"}


def test_fragmentation_lab_keys_and_table():
    r = make("fragmentation", {"requests": "600"}).run()
    assert r["mean_size"] == 2048 and {"failures", "failures_with_enough_free"} <= set(r)
    assert [row["mean_size"] for row in r["by_mean_size"]] == [512, 2048, 4096]
    assert {row["scheme"] for row in r["internal"]["rows"]} == {"max", "pow2", "oracle", "paged"}
    assert len(r["frames"]) > 10
