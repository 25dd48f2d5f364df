"""Benchmark: what the memory maps of models whose layers are not all alike cost a schedulers run,
beside the lab's estimate of them (figures go to docs/today.md).

Run: .venv/bin/python -m bench.hybrid_maps [--largest] [MODEL ...]

For each model, vLLM V1 and SGLang traced as the lab runs them, on scenario B with int4 weights at
the lab's defaults, on long-context traffic (40 and 200 requests), and with --largest at the most
work the budget accepts from the lab's caps (bench/caps.py `within_budget`): per mode, the maps'
estimated milliseconds a frame (`schedulers.group_map_work`) beside the CPU milliseconds a frame
took (memory_map and group_maps, the best of 3 each frame), and the frames `served_work` counts beside
those drawn; then the whole run's estimate beside its CPU time in a child process (bench/caps.py
`measure`).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import kvweb.labs  # noqa: F401  (registers every lab)
from bench.caps import measure, within_budget
from kvweb.budget import MAP_CELLS
from kvweb.labs.schedulers import SchedulersLab, group_map_work
from kvweb.prefix.modes import MODES
from kvweb.parsing import make
from kvweb.serving.loop.engine_trace import TraceRecorder

MODELS = ("gpt-oss-20b", "gemma-3-27b", "qwen3-next-80b-a3b", "gpt-oss-120b")
SETTINGS = {
    "defaults": {},
    "long-context 40": {"workload": "long-context", "requests": "40"},
    "long-context 200": {"workload": "long-context", "requests": "200", "rate": "20"},
}
CAPS = {"requests": "5000", "rate": "1000", "workload": "long-context", "max_seqs": "1024", "output_len": "8191"}


class TimedMaps(TraceRecorder):
    """A recorder that times each frame's maps (CPU seconds, the best of 3: a shared machine)."""

    map_s = 0.0
    drawn = 0

    def sample(self, t: float, step: int, *rest: Any) -> None:
        if t >= self.frames.next_t:
            memory = rest[4]  # (waiting, preempted, batch, used, memory, ...)
            memory.memory_map(step, self.max_cells)  # (takes decoded tokens' slots once, as the frame does)
            best = float("inf")
            for _ in range(3):
                start = time.process_time()
                memory.memory_map(step, self.max_cells)
                memory.group_maps(step, self.max_cells)
                best = min(best, time.process_time() - start)
            self.map_s += best
            self.drawn += 1
        super().sample(t, step, *rest)


def maps_row(query: dict[str, str]) -> list[str]:
    """Per mode run: a frame's maps in ms, estimated / measured, and the frames, estimated / drawn."""
    lab = make(SchedulersLab, {k: v for k, v in query.items() if k != "lab"})
    requests = lab.requests_at(lab.rate)
    tokens = lab.distinct_tokens(requests)
    cells = []
    for mode in MODES:
        if lab.refusal(mode) or mode == "paper":
            continue
        frame = sum(
            n * unit.seconds
            for n, unit in group_map_work(lab.setup().cost_model(), lab.block_size, MODES[mode].layers_apart, tokens)
        )
        frames = next(
            n for n, unit in lab.served_work(requests, lab.block_size, 1, True, lab.max_seqs) if unit is MAP_CELLS
        )
        horizon = max((r.arrival for r in requests), default=0.0) or 1.0
        recorder = TimedMaps(horizon / 200, extra_curves=("cached", "hit_rate"))
        lab.scheduler(mode).run(requests, trace=recorder)
        cells.append(
            f"{1e3 * frame:.2f} / {1e3 * recorder.map_s / max(recorder.drawn, 1):.2f} ms; {frames} / {recorder.drawn}"
        )
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--largest", action="store_true", help="also at the most work the budget accepts")
    parser.add_argument("--timeout", type=float, default=60.0, help="CPU seconds per whole run")
    args = parser.parse_args()
    print(
        "| model | run | vllm-v1: a frame's maps, estimate / CPU; frames, estimate / drawn | sglang: the same | "
        "whole run: estimate / CPU s |"
    )
    print("|---|---|---|---|---|")
    for model in args.models:
        base = {"lab": "schedulers", "scenario": "B", "model": model, "weight_precision": "int4"}
        runs = {name: {**base, **extra} for name, extra in SETTINGS.items()}
        if args.largest:
            largest = within_budget({**base, **CAPS})
            runs[
                "largest: " + ", ".join(f"{k}={largest[k]}" for k in ("requests", "rate", "output_len", "max_seqs"))
            ] = largest
        for name, query in runs.items():
            whole = measure(query, args.timeout, cpu=True)
            total = "?" if whole["cpu_s"] is None else f"{whole['estimate']:.2f} / {whole['cpu_s']:.2f}"
            print(f"| {model} | {name} | {' | '.join(maps_row(query))} | {total} |", flush=True)


if __name__ == "__main__":
    main()
