"""Production traces as files (kvweb/serving/load/traces.py): each format against a hand-checked file,
the bounds, the messages naming line and field, and replay's invariants."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.lab import ParamError
from kvweb.serving.load import traces
from kvweb.serving.load.traces import HASH_BLOCK, read_trace, recall, remember, replay

DATA = Path(__file__).parent / "data" / "traces"


def load(name: str) -> traces.Trace:
    return read_trace((DATA / name).read_bytes(), name)


def test_mooncake_rows_sorted_and_hashes_are_shared_prompt_blocks() -> None:
    trace = load("mooncake.jsonl")
    # by hand: rows at 0, 1.5, 3.0 and 2.0 s (ms in the file), sorted; 46 and 47 recur, 46 again
    assert trace.format == "mooncake" and trace.rows == 4 and trace.skipped == 0
    assert trace.arrival.tolist() == [0.0, 1.5, 2.0, 3.0]
    assert trace.prompt.tolist() == [1000, 1200, 300, 600] and trace.output.tolist() == [10, 20, 7, 5]
    assert trace.summary()["shared_blocks"] == 3  # 46 and 47 in row 2, 46 in row 4
    first, second, lone, third = replay(trace)
    assert len(first.tokens) == 1010 and len(second.tokens) == 1220
    assert np.array_equal(first.tokens[:1000], second.tokens[:1000])  # [46, 47] is a prefix of [46, 47, 48]
    assert np.array_equal(third.tokens[:HASH_BLOCK], first.tokens[:HASH_BLOCK])  # 46 alone
    assert third.tokens[HASH_BLOCK] != first.tokens[HASH_BLOCK]  # then 99, not 47
    assert not set(lone.tokens[:300].tolist()) & set(first.tokens.tolist())  # hash 7 shares nothing
    assert not set(first.tokens[1000:].tolist()) & set(second.tokens[1200:].tolist())  # answers are their own


def test_azure_2023_and_2024_timestamps_and_the_skipped_row() -> None:
    code = load("azure_code_2023.csv")
    assert code.format == "azure" and code.skipped == 1  # GeneratedTokens 0
    assert code.arrival.tolist() == pytest.approx([0.0, 4.314579, 19.891964], abs=1e-9)
    assert code.prompt.tolist() == [374, 396, 2214] and code.blocks is None
    conv = load("azure_conv_2024.csv")  # with a zone, as +00:00
    assert conv.arrival.tolist() == pytest.approx([0.0, 0.449843, 1.0], abs=1e-9)
    assert [r.tokens for r in replay(conv)] == [None] * 3


def test_burstgpt_failed_responses_are_skipped() -> None:
    trace = load("burstgpt.csv")
    assert trace.format == "burstgpt" and trace.skipped == 1
    assert trace.arrival.tolist() == [0.0, 113.0] and trace.output.tolist() == [18, 276]


def test_kvweb_csv_and_json() -> None:
    trace = load("kvweb.csv")
    assert trace.format == "kvweb" and trace.arrival.tolist() == [0.0, 0.5] and trace.prompt.tolist() == [50, 100]
    assert read_trace('[[1, 5, 6], {"arrival": 3, "prompt_len": 7, "output_len": 8}]').prompt.tolist() == [5, 7]
    lines = read_trace(
        '{"arrival": 2, "prompt_len": 9, "output_len": 1}\n{"arrival": 1, "prompt_len": 4, "output_len": 2}'
    )
    assert lines.format == "kvweb" and lines.prompt.tolist() == [4, 9]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
            '{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1]}',
            "trace line 2, field hash_ids: 1 hashes for input_length 600; expected 2 (one per 512-token block)",
        ),
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [-1]}',
            "trace line 1, field hash_ids: '[-1]' is not allowed; expected a list of integers from 0 to 2**63 - 1",
        ),
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1], "x": 1}',
            "trace line 1: unknown field 'x'; allowed for Mooncake JSONL",
        ),
        ('{"timestamp": 0, "output_length": 1, "hash_ids": [1]}', "trace line 1: field input_length is missing"),
        (
            '\n\n{"timestamp": "soon", "input_length": 10, "output_length": 1, "hash_ids": [1]}',
            "trace line 3, field timestamp: 'soon' is not allowed; expected a number >= 0",
        ),
        (
            '{"timestamp": 0, "input_length": 1e999, "output_length": 1, "hash_ids": [1]}',
            "trace line 1, field input_length: 'inf' is not allowed; expected an integer from 1 to 1,000,000",
        ),
        ('{"timestamp": 0, "input_length": ' + "9" * 5000 + "}", "trace line 1: not valid JSON"),
        ('{"a": [[[[1]]]]}', "trace line 1: JSON nested too deep"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\nyesterday,1,1",
            "trace line 3, field TIMESTAMP: 'yesterday' is not allowed; expected a date and time like",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,-4",
            "trace line 2, field GeneratedTokens: '-4' is not allowed; expected an integer from 0 to 1,000,000",
        ),
        (
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490",
            "trace line 2: 5 fields; expected 6",
        ),
        (
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,0,0,0,API log",
            "trace file: no row with prompt and output tokens (1 rows read)",
        ),
        (
            "time,in,out\n1,2,3",
            "trace file: the first line, 'time,in,out', is no header kvweb reads; allowed: Mooncake",
        ),
        ("  \n ", "trace file: empty; expected Mooncake JSONL"),
        (b"\xff\xfe", "trace file: not UTF-8 text (byte 0)"),
    ],
)
def test_a_bad_file_is_one_message_naming_line_and_field(text: str | bytes, message: str) -> None:
    with pytest.raises(ParamError) as err:
        read_trace(text)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_bounds_on_bytes_and_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ParamError, match=r"^trace file: 20,000,001 bytes; at most 20,000,000 are read"):
        read_trace(b" " * 20_000_001)
    monkeypatch.setattr(traces, "MAX_ROWS", 3)
    rows = "".join(
        f'{{"timestamp": {i}, "input_length": 5, "output_length": 1, "hash_ids": [{i}]}}\n' for i in range(4)
    )
    with pytest.raises(ParamError, match=r"^trace file: more than 3 rows; at most 3 are read"):
        read_trace(rows)
    assert read_trace(rows.rsplit("{", 1)[0]).rows == 3


def test_parse_time_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traces, "MAX_PARSE_S", 0.0)
    monkeypatch.setattr(traces, "CHECK_EVERY", 2)
    with pytest.raises(ParamError, match=r"^trace file: still reading at line 3 after 0 s"):
        read_trace("Timestamp,Request tokens,Response tokens\n1,2,3\n4,5,6\n")


def test_a_file_kept_is_recalled_by_its_key_and_refused_when_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces, "STORE", tmp_path)
    trace = remember((DATA / "burstgpt.csv").read_bytes(), "C:\\logs\\burst gpt <b>.csv")
    assert trace.key == "burst_gpt__b_.csv:2:05892e935f19f228"
    traces._LOADED.clear()  # another process: it finds the bytes in the store
    assert recall(trace.key).output.tolist() == [18, 276]
    with pytest.raises(ParamError, match=r"^trace_file: x.csv \(12 rows, digest 0123456789abcdef\) is not loaded here"):
        recall("x.csv:12:0123456789abcdef")
    with pytest.raises(
        ParamError, match=r"^trace_file: '<script>' is no trace file kvweb can read here; expected the path"
    ):
        recall("<script>")


def test_every_preset_loads_with_its_format() -> None:
    names = traces.presets()
    assert {traces.preset(n).format for n in names} == {"mooncake", "azure", "burstgpt"}
    for name in names:
        trace = traces.preset(name)
        assert 200 <= trace.rows <= 1000, name
    mooncake = [traces.preset(n) for n in names if traces.preset(n).format == "mooncake"]
    assert all(t.summary()["shared_blocks"] > 0 for t in mooncake)


rows_strategy = st.lists(
    st.tuples(st.integers(0, 10**7), st.integers(1, 3000), st.integers(0, 50)), min_size=1, max_size=40
)


def mooncake_text(rows: list[tuple[int, int, int]]) -> str:
    return "\n".join(
        json.dumps(
            {
                "timestamp": t,
                "input_length": p,
                "output_length": o,
                "hash_ids": [(t + k) % 7 for k in range(-(-p // HASH_BLOCK))],
            }
        )
        for t, p, o in rows
    )


@settings(max_examples=60, deadline=None)
@given(rows_strategy, st.floats(0.1, 10.0), st.floats(0, 5000), st.floats(0, 5000))
def test_replay_keeps_order_bounds_and_scales_the_rate(
    rows: list[tuple[int, int, int]], scale: float, start: float, duration: float
) -> None:
    served = [r for r in rows if r[2] > 0]
    try:
        trace = read_trace(mooncake_text(rows))
    except ParamError as err:
        assert not served and str(err).startswith("trace file: no row with prompt and output tokens")
        return
    assert trace.rows == len(served) and trace.skipped == len(rows) - len(served)
    assert trace.arrival[0] == 0 and np.all(np.diff(trace.arrival) >= 0)
    try:
        requests = traces.requests(trace, scale, start, duration)
    except ParamError as err:
        assert "holds no request" in str(err)
        return
    end = start + duration if duration else np.inf
    inside = [(t, p, o) for t, p, o in zip(trace.arrival, trace.prompt, trace.output) if start <= t < end]
    assert [(r.prompt, r.output) for r in requests] == [(p, o) for _, p, o in inside]
    assert [r.id for r in requests] == list(range(len(requests)))
    assert all(r.arrival >= 0 for r in requests)
    assert all(a.arrival <= b.arrival for a, b in zip(requests, requests[1:]))
    assert [r.arrival * scale for r in requests] == pytest.approx([t - start for t, _, _ in inside])
    assert all(len(r.tokens) == r.prompt + r.output for r in requests)


def cli_json(*argv: str) -> dict:
    import io

    from kvweb.cli import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["run", *argv, "--json"], out, err) == 0, err.getvalue()
    return json.loads(out.getvalue())


@pytest.mark.parametrize(
    "name, rows, fmt",
    [
        ("mooncake.jsonl", 4, "mooncake"),
        ("azure_code_2023.csv", 3, "azure"),
        ("burstgpt.csv", 2, "burstgpt"),
        ("kvweb.csv", 2, "kvweb"),
    ],
)
def test_the_cli_serves_a_trace_file_of_each_format(name: str, rows: int, fmt: str) -> None:
    out = cli_json("engine", "--workload", "trace", "--trace_file", str(DATA / name), "--compare", "none")
    assert out["params"]["trace_file"].startswith(f"{name}:{rows}:")
    assert out["result"]["replayed"]["format"] == fmt and out["result"]["submitted"] == rows


def test_the_fleet_finds_mooncakes_shared_prefixes() -> None:
    out = cli_json(
        "fleet",
        "--workload",
        "trace",
        "--trace_file",
        str(DATA / "mooncake.jsonl"),
        "--routers",
        "round-robin,cache-aware",
    )
    hits = {r["router"]: r["prefix_hit_rate"] for r in out["result"]["routers"]}
    # by hand: of 3,100 prompt tokens, 1,000 (row 2 repeats row 1's prompt) and 512 (hash 46) are cached, on
    # one replica; round robin sends each request to another replica of the four
    assert hits == {"round-robin": 0.0, "cache-aware": pytest.approx(1512 / 3100)}
    assert out["result"]["shared_prefixes"] is True


def test_scale_and_window_in_a_lab_and_its_estimate_counts_the_rows() -> None:
    from kvweb.labs.engine import EngineLab

    whole = EngineLab(workload="trace", trace_preset="burstgpt-synthetic", compare="none")
    cut = EngineLab(
        workload="trace",
        trace_preset="burstgpt-synthetic",
        compare="none",
        trace_scale=2.0,
        trace_start=100.0,
        trace_duration=200.0,
    )
    trace = traces.preset("burstgpt-synthetic")
    inside = trace.arrival[(trace.arrival >= 100) & (trace.arrival < 300)]
    assert [r.arrival for r in cut.workload_at(1.0)] == pytest.approx(((inside - 100) / 2).tolist())
    requests = {e.parts[0][1].name: e.parts[0][0] for e in (whole.estimate(), cut.estimate())}
    assert list(requests) == ["requests through the papers' engine"]
    assert [whole.estimate().parts[0][0], cut.estimate().parts[0][0]] == [trace.rows, len(inside)]
    assert whole.ignored() == () and EngineLab().ignored() == ("trace_scale", "trace_start", "trace_duration")


def test_a_file_then_the_pasted_rows_then_the_preset_is_replayed() -> None:
    from kvweb.labs.engine import EngineLab

    key = remember((DATA / "kvweb.csv").read_bytes(), "kvweb.csv").key
    both = dict(workload="trace", trace_preset="burstgpt-synthetic", trace="0,7,7", compare="none")
    assert [r.prompt for r in EngineLab(**both, trace_file=key).workload_at(1.0)] == [50, 100]
    assert [r.prompt for r in EngineLab(**both).workload_at(1.0)] == [7]
    assert EngineLab(**{**both, "trace": ""}).trace_read().name == "burstgpt-synthetic.csv"
    EngineLab(trace_file=key, trace_preset="burstgpt-synthetic").check()  # chosen before workload=trace: unread
    with pytest.raises(ParamError, match=r"^trace: empty; expected CSV or JSON rows .* \(or choose a trace_file or a "):
        EngineLab(workload="trace").check()


def test_the_planner_replays_a_trace_at_its_own_rate() -> None:
    from kvweb.labs.fleet import FleetLab
    from kvweb.parsing import make

    plan = make(
        "plan",
        {
            "workload": "trace",
            "trace_preset": "mooncake-conversation-synthetic",
            "trace_duration": "60",
            "trace_scale": "2",
            "model": "llama-3-8b",
            "gpus": "H100-SXM",
            "tps": "1",
            "weight_precisions": "16-bit",
            "schedulers": "sglang",
            "replicas": "2",
            "routers": "cache-aware",
        },
    )
    requests = plan.workload_spec().arrivals()
    trace = traces.preset("mooncake-conversation-synthetic")
    assert len(requests) == int((trace.arrival < 60).sum()) and all(r.tokens is not None for r in requests)
    assert plan.workload_spec().rate == pytest.approx(len(requests) / requests[-1].arrival)
    assert plan.ignored() == ("rate", "requests", "seed", "max_loras", "lora_rank", "lora_targets")  # no adapters
    result = plan.run()
    (row,) = [c for c in result["candidates"] if c["replicas"] == 2]
    fleet = FleetLab.of_candidate(plan, next(c for c in plan.candidates() if c.replicas == 2))
    assert fleet.trace_preset == plan.trace_preset and fleet.workload_at(1.0) == requests
    assert row["prefix_hit_rate"] > 0.5  # the preset's sessions share their system prompts and earlier turns
    with pytest.raises(ParamError, match="^trace_preset: none is not allowed with workload trace"):
        make("plan", {"workload": "trace"})


def test_the_served_app_takes_the_largest_trace_file_in_one_websocket_message():
    """A file picked travels to `panel serve` as base64 (4 bytes per 3) in one websocket message;
    scripts/app.sh raises Bokeh's 20 MB default above that for the largest file read (MAX_BYTES)."""
    import re

    script = (Path(__file__).resolve().parents[1] / "scripts" / "app.sh").read_text()
    limit = int(re.search(r"--websocket-max-message-size (\d+)", script).group(1))
    base64 = -(-traces.MAX_BYTES // 3) * 4
    assert base64 == 26_666_668 and limit >= base64 + 1_000_000 > 20 * 2**20  # room for the message's JSON


def test_a_trace_runs_estimate_holds_its_token_ids_and_sglangs_pools_caching_them() -> None:
    from kvweb.budget import SLOT_SETUP, TRACE_SLOTS, TRACE_TOKENS
    from kvweb.labs.engine import EngineLab
    from kvweb.labs.fleet import FleetLab

    key = remember((DATA / "mooncake.jsonl").read_bytes(), "mooncake.jsonl").key
    ids = 1000 + 10 + 1200 + 20 + 600 + 5 + 300 + 7  # prompt and output of the four rows: 3,142 ids
    slots = 2 * 11_969  # scenario A's KV memory, in token slots, on each of 2 replicas
    fleet = FleetLab(workload="trace", trace_file=key, replicas=2, routers="round-robin,cache-aware").estimate()
    assert fleet.held == ((slots, SLOT_SETUP), (ids, TRACE_TOKENS), (slots, TRACE_SLOTS))
    assert fleet.bytes == pytest.approx(slots * 5.5 + ids * 10 + slots * 26)  # 748 KB: one fleet run's
    v1 = FleetLab(workload="trace", trace_file=key, replicas=2, mode="vllm-v1").estimate()
    assert (ids, TRACE_TOKENS) in v1.held and all(unit is not TRACE_SLOTS for _, unit in v1.held)
    engine = EngineLab(workload="trace", trace_file=key, compare="none").estimate()
    assert [n for n, unit in engine.held if unit is TRACE_TOKENS] == [ids]  # once, however many runs (and maps)
    assert all(u not in (TRACE_TOKENS, TRACE_SLOTS) for _, u in FleetLab(workload="multi-turn").estimate().held)


def fleet_figures(requests: list, router: str) -> dict:
    from kvweb.fleet.fleet import serve
    from kvweb.labs.fleet import FleetLab
    from kvweb.serving.loop.metrics import SLO

    lab = FleetLab(mode="sglang")
    return serve(requests, lambda: lab.scheduler("sglang"), 2, router).figures(SLO(2.0, 0.1))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4000), st.integers(1, 1500), st.integers(1, 40)), min_size=1, max_size=12))
def test_the_router_trees_views_of_the_requests_tokens_serve_as_copies_would(rows: list) -> None:
    """The cache-aware router's tree keeps views of each request's tokens (not copies: a whole
    Mooncake trace's router held 1.7 GB of Python ints); the same fleet on copies gives the same figures,
    and a finished request keeps no slot array alive."""
    from kvweb.serving.load.workload import Request

    requests = traces.requests(read_trace(mooncake_text(rows)))
    copied = [Request(r.id, r.arrival, r.prompt, r.output, np.array(r.tokens.tolist())) for r in requests]
    assert fleet_figures(requests, "cache-aware") == fleet_figures(copied, "cache-aware")


def test_the_router_tree_shares_the_requests_tokens_and_finished_requests_let_go_of_their_slots() -> None:
    from kvweb.fleet.fleet import serve
    from kvweb.fleet.routers import CacheAware
    from kvweb.labs.fleet import FleetLab

    requests = traces.requests(load("mooncake.jsonl"))
    lab = FleetLab(mode="sglang")
    fleet = serve(requests, lambda: lab.scheduler("sglang"), 2, "cache-aware")
    sequences = [s for run in fleet.runs for s in run.sequences]
    assert len(sequences) == 4 and all(len(s.prefix) == 0 and s.prefix.base is None and not s.own for s in sequences)
    router = CacheAware(2)
    for r in requests:
        router.tree.insert(r.tokens[: r.prompt], 0, r.arrival)
    stack, keys = list(router.tree.root.children.values()), []
    while stack:
        node = stack.pop()
        keys.append(node.key)
        stack.extend(node.children.values())
    # 46 47 | 48, 99, and 7: every edge a view of some request's own tokens
    assert len(keys) == 5 and all(any(np.shares_memory(k, r.tokens) for r in requests) for k in keys)
