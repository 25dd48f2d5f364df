"""The engine's trace carries every event the engine view draws, checked against the run:
each preemption once (with the KV it drops and the cells it frees), each return once, the
host swap space as the engine holds it, and time bins that count every event."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.gpu import GPUS, MODELS, CostModel
import kvweb.labs  # noqa: F401  (registers the labs)
from kvweb.parsing import make
from kvweb.serving.schedulers.paper_scheduler import PaperConfig, PaperScheduler
from kvweb.serving.loop.engine_trace import EVENT_KINDS, TraceRecorder
from kvweb.serving.memory.paged_memory import PagedMemory
from kvweb.serving.load.workload import Request

COST = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])
KV = COST.model.kv_bytes_per_token
OUT = ("preempt", "swap_out")


def events(trace: dict) -> list[tuple]:
    ev = trace["events"]
    return list(zip(ev["t"], ev["kind"], ev["id"], ev["tokens"]))


@pytest.mark.parametrize("mode, back", [("recompute", "recompute"), ("swap", "swap_in")])
def test_one_preemption_by_hand(mode, back):
    # 3 blocks of 4 tokens, two requests of prompt 4, output 6 (as in test_engine): request 1
    # holds block 1 with 4 tokens of KV after step 1, is preempted at step 2 and comes back at
    # step 7 with 5 tokens in blocks 0 and 1 (request 0 has left).
    recorder = TraceRecorder(1e-4, max_cells=8)
    engine = PaperScheduler(COST, PagedMemory(3, 4), PaperConfig(max_len=2048, block_size=4, preemption=mode))
    run = engine.run([Request(0, 0.0, 4, 6), Request(1, 0.0, 4, 6)], trace=recorder)
    out = "preempt" if mode == "recompute" else "swap_out"
    assert [e[1:] for e in events(run.trace)] == [(out, 1, 4), (back, 1, 4)]
    frames = run.trace["frames"]
    assert [f["freed"] for f in frames if f["freed"]] == [[1]]
    assert [f["returned"] for f in frames if f["returned"]] == [[0, 1]]
    on_host = [f["host"] for f in frames if f["host"]]
    assert on_host == ([] if mode == "recompute" else [[[1, 4]]] * len(on_host)) and (mode == "recompute" or on_host)
    assert [f["happened"] for f in frames if f["happened"]] == [{out: 1}, {back: 1}]


class Watcher:
    """From outside the trace: who each step preempts and brings back, and what the host holds
    whenever the recorder takes a frame."""

    def __init__(self, recorder: TraceRecorder) -> None:
        self.recorder = recorder
        self.running: set[int] = set()
        self.out: list[tuple[float, str, int, int]] = []
        self.back: list[tuple[float, str, int, int]] = []
        self.pending: dict[int, str] = {}
        self.finished = 0
        self.frame = None

    def __call__(self, engine: PaperScheduler, step: int) -> None:
        now = set(engine.running)
        waiting = {s.id: s for s in engine.evicted}
        for i in sorted(self.running - now, reverse=True):  # latest arrival first, as the engine evicts
            if i in waiting:
                s = waiting[i]
                kind = "swap_out" if s.on_host else "preempt"
                self.out.append((step, kind, i, s.req.prompt + s.gen0 - 1))
                self.pending[i] = "swap_in" if s.on_host else "recompute"
        finished = engine.finished[self.finished :]  # a return can finish in the step it comes back
        seqs = {**{s.id: s for s in finished}, **engine.running}
        for i in sorted((now | {s.id for s in finished}) - self.running):
            if i in self.pending:
                s = seqs[i]
                self.back.append((step, self.pending.pop(i), i, s.req.prompt + s.gen0 - 2))
        self.running, self.finished = now, len(engine.finished)
        rows = self.recorder.frames.rows
        if rows and rows[-1] is not self.frame and rows[-1]["t"] == engine.now:
            self.frame = rows[-1]
            host = {s.id: s.req.prompt + s.gen0 - 1 for s in engine.evicted if s.on_host}
            assert dict(map(tuple, self.frame["host"])) == host


requests_st = st.lists(
    st.tuples(st.sampled_from([0.0, 0.0, 0.01, 0.05]), st.integers(1, 20), st.integers(1, 20)), min_size=2, max_size=12
)


@settings(max_examples=60, deadline=None)
@given(
    requests_st,
    st.sampled_from([1, 2, 4]),
    st.integers(16, 48),
    st.sampled_from(["recompute", "swap"]),
    st.sampled_from([0, 8, 64]),
)
def test_every_preemption_and_return_is_in_the_trace_once(rows, bs, tokens, mode, host):
    t, requests = 0.0, []
    for i, (gap, prompt, output) in enumerate(rows):
        t += gap
        requests.append(Request(i, t, prompt, output))
    recorder = TraceRecorder(1e-3, max_cells=tokens // bs)
    watcher = Watcher(recorder)
    config = PaperConfig(max_len=36, preemption=mode, block_size=bs, host_tokens=host)
    run = PaperScheduler(COST, PagedMemory(tokens // bs, bs), config).run(requests, observer=watcher, trace=recorder)
    trace = run.trace
    ev = events(trace)
    kinds = Counter(kind for _, kind, _, _ in ev)
    assert kinds["preempt"] + kinds["swap_out"] == run.preemptions == len(watcher.out)
    assert kinds["recompute"] + kinds["swap_in"] == run.preemptions  # every victim finished, so came back
    # the same events, victim by victim, in the same order (the watcher sees them a step late)
    assert [e[1:] for e in ev if e[1] in OUT] == [w[1:] for w in watcher.out]
    assert [e[1:] for e in ev if e[1] not in OUT] == [w[1:] for w in watcher.back]
    assert sum(n for _, kind, _, n in ev if kind == "preempt") == run.recomputed_tokens
    assert sum(n for _, kind, _, n in ev if kind in ("swap_out", "swap_in")) * KV == run.swapped_bytes
    bins = trace["event_bins"]
    assert {k: sum(n for kind, n in zip(bins["kind"], bins["count"]) if kind == k) for k in EVENT_KINDS} == {
        k: kinds[k] for k in EVENT_KINDS
    }
    assert all(a < b for a, b in zip(bins["t0"], bins["t1"]))
    assert all(
        any(k == kind and a <= t <= b for a, b, k in zip(bins["t0"], bins["t1"], bins["kind"])) for t, kind, *_ in ev
    )
    # A frame (taken as a step ends) outlines at least the largest and at most all the blocks
    # the victims since the frame before held (events happen as a step starts).
    times = [f["t"] for f in trace["frames"]]
    for before, frame in zip([-1.0, *times], trace["frames"]):
        victims = [-(-n // bs) for t, kind, _, n in ev if kind in OUT and before <= t < frame["t"]]
        assert max(victims, default=0) <= len(frame["freed"]) <= sum(victims)
        assert sum(frame["happened"].values()) == sum(before <= t < frame["t"] for t, *_ in ev)


def test_the_engine_lab_traces_every_preemption_and_opens_on_one():
    r = make("engine", {}).run()  # scenario A, 1000 requests, paged vs oracle
    kinds = Counter(r["trace"]["events"]["kind"])
    assert kinds["preempt"] == r["preemptions"] == kinds["recompute"] > 100
    assert sum(r["trace"]["event_bins"]["count"]) == len(r["trace"]["events"]["t"])
    assert r["compare"]["preemptions"] == 0 and r["compare"]["trace"]["events"]["t"] == []
    frames, shown = r["trace"]["frames"], r["timeline"]["frames"][0]
    opening = r["opening_step"]
    assert frames[shown[opening]]["freed"] and frames[shown[opening]]["returned"]
    assert frames[shown[opening]]["happened"]["preempt"] > 0
    assert not any(frames[shown[i]]["freed"] and frames[shown[i]]["returned"] for i in range(opening))


@pytest.mark.skipif(sys.platform == "emscripten", reason="the app (Panel) is tested in CPython only")
def test_the_tours_preemption_step_opens_on_a_swap():
    from app.pages.tour import STEPS

    (_, query), _ = next(s.links for s in STEPS if s.title == "Preemption")
    r = make("engine", {k: v for k, v in query.items() if k not in ("lab", "step")}).run()
    step = int(query["step"])
    frames = [r["trace"]["frames"][i] for i in r["timeline"]["frames"][0]]
    assert frames[step]["freed"] and frames[step]["host"] and frames[step]["happened"]["swap_out"] > 0
    assert not any(f["freed"] and f["host"] for f in frames[:step])
    assert step == r["opening_step"]
