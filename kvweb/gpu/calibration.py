"""Calibrate the measured model with your own run: the summary of a `vllm bench serve` or
`sglang.bench_serving` run at a fixed `--max-concurrency`, pasted as JSON, fits the engine's
per-step overhead and its time outside the steps to that run (`fit`), and the labs price steps
with the fitted overhead (`MeasuredCostModel(kernel_overhead_s=...)`).

A run is read as `closed_loop` reads a measured deployment (kvweb/gpu/measured.py): C requests in
flight, the mean prompt and output lengths (total tokens over completed requests), its mean TTFT
and TPOT. The queued share stays the engine's recorded one; the overhead is fitted on TPOT's
relative errors (TPOT is affine in it), then the outside time on TTFT's: one run fixes both, more
runs are a least-squares fit. What the fit leaves (each run's residuals) comes back with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from kvweb.gpu.measured import QUEUED_SHARE, MeasuredCost, closed_loop, fit_relative
from kvweb.lab import ParamError
from kvweb.parsing import json_depth

MAX_RUNS = 16
MAX_DEPTH = 4  # a list of objects, or JSON lines; no field is nested
FIELDS = ("max_concurrency", "completed", "total_input_tokens", "total_output_tokens", "mean_ttft_ms", "mean_tpot_ms")
WHAT = (
    "a vllm bench serve or sglang.bench_serving result (its summary: "
    + ", ".join(FIELDS)
    + "; leave out the per-request lists)"
)


@dataclass(frozen=True)
class BenchRun:
    """One benchmark run's summary: concurrency, mean lengths, mean TTFT and TPOT (seconds)."""

    engine: str
    concurrency: int
    isl: int
    osl: int
    ttft_s: float
    tpot_s: float


def _number(run: int, row: dict[str, Any], name: str, integer: bool) -> float:
    value = row.get(name)
    if value is None and name == "max_concurrency":
        raise ParamError(
            f"calibration: run {run}: max_concurrency is {'null' if name in row else 'missing'}; "
            "calibrate with runs at a fixed --max-concurrency (a closed loop)"
        )
    if value is None:
        raise ParamError(f"calibration: run {run}: {name} is missing; expected {WHAT}")
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value < 1e12
        or (integer and value != int(value))
    ):
        raise ParamError(
            f"calibration: run {run}: {name} is {json.dumps(value)[:40]}; expected a "
            f"{'whole ' if integer else ''}number above 0"
        )
    return value


@lru_cache(maxsize=16)
def parse_runs(text: str) -> tuple[BenchRun, ...]:
    """The runs in a pasted result: a JSON object, a list of them, or JSON lines (one run a line);
    one message naming the run and the field for anything else."""
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise ParamError(f"calibration: JSON nested {depth} deep; expected {WHAT}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as err:
            raise ParamError(
                f"calibration: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); expected {WHAT}"
            ) from None
    rows = data if isinstance(data, list) else [data]
    if not rows or len(rows) > MAX_RUNS or not all(isinstance(r, dict) for r in rows):
        raise ParamError(f"calibration: expected 1 to {MAX_RUNS} objects, each {WHAT}")
    runs = []
    for i, row in enumerate(rows, 1):
        c, done, tokens_in, tokens_out, ttft, tpot = (_number(i, row, f, f in FIELDS[:4]) for f in FIELDS)
        engine = "sglang" if "sglang" in str(row.get("backend", "")).lower() else "vllm"
        osl = round(tokens_out / done)
        if osl < 2:
            raise ParamError(f"calibration: run {i}: {osl} output tokens a request; TPOT needs at least 2")
        runs.append(BenchRun(engine, int(c), max(1, round(tokens_in / done)), osl, ttft / 1e3, tpot / 1e3))
    if len({r.engine for r in runs}) > 1:
        raise ParamError("calibration: runs of vLLM and SGLang together; paste one engine's runs")
    return tuple(runs)


@dataclass(frozen=True)
class Calibration:
    """What a fit to the user's runs gives: the engine's step overhead and outside time (s), the
    queued share it kept, and per run (concurrency, isl, osl, TTFT, fitted TTFT, TPOT, fitted TPOT)
    in seconds."""

    engine: str
    step_overhead_s: float
    outside_s: float
    queued_share: float
    residuals: tuple[tuple[int, int, int, float, float, float, float], ...]

    def figures(self) -> dict[str, Any]:
        """As JSON: milliseconds, one object per run."""
        names = ("concurrency", "isl", "osl", "ttft_ms", "ttft_fit_ms", "tpot_ms", "tpot_fit_ms")
        return {
            "engine": self.engine,
            "step_overhead_ms": 1e3 * self.step_overhead_s,
            "outside_ms": 1e3 * self.outside_s,
            "queued_share": self.queued_share,
            "runs": [{k: v if i < 3 else 1e3 * v for i, (k, v) in enumerate(zip(names, r))} for r in self.residuals],
        }

    def worst(self) -> tuple[float, float]:
        """The largest relative residual of TTFT and of TPOT."""
        return (max(abs(r[4] / r[3] - 1) for r in self.residuals), max(abs(r[6] / r[5] - 1) for r in self.residuals))


def fit(runs: tuple[BenchRun, ...], kernels: MeasuredCost) -> Calibration:
    """The step overhead (s, at least 0) and outside time (s) that best explain the runs through
    `closed_loop` on these kernels (their own overhead left out), and each run's residuals."""
    bare = replace(kernels, step_overhead_s=0.0)
    c, n = (np.array([getattr(r, f) for r in runs], dtype=float) for f in ("concurrency", "osl"))
    p = np.array([bare.prefill_cost(r.isl) for r in runs])
    d = np.array([bare.decode_step_cost(r.concurrency, int(r.concurrency * (r.isl + r.osl / 2))) for r in runs])
    queued = QUEUED_SHARE[kernels.engine]
    wait, span = 1 + queued * (c - 1) / 2, np.maximum(n - 1, 1)
    tpot, ttft = (np.array([getattr(r, f) for r in runs]) for f in ("tpot_s", "ttft_s"))
    overhead = max(0.0, fit_relative((c * p + n * d - wait * p) / span, (c + n - wait) / span, tpot))
    outside = max(0.0, fit_relative(wait * (p + overhead), np.ones_like(p), ttft))
    fitted = replace(kernels, step_overhead_s=overhead)
    residuals = []
    for r in runs:
        first, per_token = closed_loop(fitted, r.concurrency, r.isl, r.osl, queued, outside)
        residuals.append((r.concurrency, r.isl, r.osl, r.ttft_s, first, r.tpot_s, per_token))
    return Calibration(kernels.engine, overhead, outside, queued, tuple(residuals))
