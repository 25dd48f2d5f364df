"""What a serving run achieved (SPEC 3): throughput, latency distributions, SLO attainment,
batch size, memory occupied vs actually holding KV, and the cost of preemption.

Inter-token latency (`itl_s`) is seen from the decoding batch: for each step that decodes, the
time since the batch last decoded (since its first token for a request that joined since),
once per request decoding in it; a preempted request's wait is not in it (it is in its TPOT)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvweb.gpu.explain import Explanation
from kvweb.serving.loop.sequence import Run, Sequence


@dataclass(frozen=True)
class SLO:
    """A request meets the SLO when its first token comes within ttft_s of its arrival and
    the rest come at tpot_s per token or faster on average."""

    ttft_s: float = 2.0
    tpot_s: float = 0.1


def ttft(seq: Sequence, outside_s: float = 0.0) -> float:
    """First token - arrival, plus the time outside the engine's steps (`Run.outside_s`)."""
    return seq.first_token_t - seq.req.arrival + outside_s


def tpot(seq: Sequence) -> float:
    """Mean time per output token after the first (0 for a one-token answer)."""
    return (seq.finish_t - seq.first_token_t) / (seq.req.output - 1) if seq.req.output > 1 else 0.0


def value_range(a: np.ndarray) -> tuple[float, float]:
    """The histogram's range: the values' own, or, where they differ only by rounding (a closed loop's
    alike requests: a range too narrow to split in bins, which numpy refuses), one value's, which numpy
    widens to +-0.5 as it does for values all equal."""
    lo, hi = float(a.min()), float(a.max())
    return (hi, hi) if hi - lo <= 1e-9 * max(abs(lo), abs(hi)) else (lo, hi)


def distribution(values: list[float], bins: int = 20) -> dict[str, Any]:
    """Mean, percentiles and a histogram (seconds)."""
    if not values:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None, "edges": [], "counts": []}
    a = np.asarray(values)
    counts, edges = np.histogram(a, bins=bins, range=value_range(a))
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {
        "count": len(values),
        "mean": float(a.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(a.max()),
        "edges": edges.tolist(),
        "counts": counts.tolist(),
    }


def weighted_distribution(pairs: list[tuple[float, int]] | np.ndarray, bins: int = 20) -> dict[str, Any]:
    """`distribution` of values that each occur `weight` times, given as (value, weight) pairs
    (a list, or an [n, 2] array)."""
    both = np.asarray(pairs, dtype=float).reshape(-1, 2)
    both = both[both[:, 1] > 0]
    if not len(both):
        return distribution([], bins)
    order = np.argsort(both[:, 0], kind="stable")
    values, weights = both[order, 0], both[order, 1]
    below = np.cumsum(weights)
    p50, p90, p99 = (float(values[np.searchsorted(below, q * below[-1])]) for q in (0.5, 0.9, 0.99))
    counts, edges = np.histogram(values, bins=bins, weights=weights, range=value_range(values))
    return {
        "count": int(below[-1]),
        "mean": float(np.dot(values, weights) / below[-1]),
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": float(values[-1]),
        "edges": edges.tolist(),
        "counts": counts.astype(int).tolist(),
    }


def attainment(run: Run, slo: SLO, ttfts: list[float] | None = None, tpots: list[float] | None = None) -> float:
    """The fraction of submitted requests that met the SLO (rejected ones count as misses)."""
    seqs = run.sequences
    ttfts = [ttft(s, run.outside_s) for s in seqs] if ttfts is None else ttfts
    tpots = [tpot(s) for s in seqs] if tpots is None else tpots
    met = sum(1 for a, b in zip(ttfts, tpots) if a <= slo.ttft_s and b <= slo.tpot_s)
    submitted = len(seqs) + len(run.rejected)
    return met / submitted if submitted else 0.0


def throughput(run: Run) -> float:
    """Output tokens per simulated second."""
    return run.generated / run.sim_time if run.sim_time > 0 else 0.0


def summarize(run: Run, slo: SLO) -> dict[str, Any]:
    """The run's figures as plain JSON types. SLO attainment counts rejected requests as misses;
    memory fractions are time-weighted over the run and relative to the GPU's KV capacity. The
    arrival rate is the finished requests over the time the last of them arrived."""
    seqs = run.sequences
    ttfts = [ttft(s, run.outside_s) for s in seqs]
    tpots = [tpot(s) for s in seqs]
    span = run.sim_time * run.capacity
    last_arrival = max((s.req.arrival for s in seqs), default=0.0)
    return {
        "throughput_tok_s": throughput(run),
        # served over the whole run, the drain after the last arrival included: below the arrival
        # rate even when every request meets the SLO; the rate they arrived at stands beside it
        "requests_per_s_whole_run": len(seqs) / run.sim_time if run.sim_time > 0 else 0.0,
        "arrival_rate_per_s": len(seqs) / last_arrival if last_arrival > 0 else 0.0,
        "slo_attainment": attainment(run, slo, ttfts, tpots),
        "ttft_s": distribution(ttfts),
        "tpot_s": distribution(tpots),
        "itl_s": weighted_distribution(run.itl),
        "mean_batch": run.batch_sum / run.steps if run.steps else 0.0,
        "occupied_frac": run.occupied_s / span if span else 0.0,
        "used_frac": run.used_s / span if span else 0.0,
        "utilisation": run.used_s / run.occupied_s if run.occupied_s else 0.0,
        "preemptions": run.preemptions,
        "recomputed_tokens": run.recomputed_tokens,
        "swapped_bytes": run.swapped_bytes,
        "sim_time_s": run.sim_time,
        "steps": run.steps,
        "generated_tokens": run.generated,
        "finished": len(seqs),
        "rejected": len(run.rejected),
        "rejections": [{"id": r.id, "reason": why} for r, why in run.rejected[:20]],
        "stopped_early": run.stopped_early,
        **({"ttft_outside_s": run.outside_s} if run.outside_s else {}),
    }


def explain(figures: dict[str, Any], step_cost: str) -> dict[str, Explanation]:
    """A served run's headline figures (`summarize`, `prefix_figures`) with their formulas and the
    values put in; `step_cost` says how its steps were priced."""
    source = ("source: the simulated run, each step priced by {0}", (step_cost,))
    f = figures
    outside = f.get("ttft_outside_s")  # a measured run's time outside the steps, in its TTFT
    out = {
        "throughput_tok_s": Explanation(
            "throughput",
            "output tokens ÷ simulated time",
            (("output tokens", f["generated_tokens"], "tokens"), ("simulated time", f["sim_time_s"], "s")),
            f["throughput_tok_s"],
            "tokens/s",
            source,
        ),
        "step_s": Explanation(
            "mean step",
            "simulated time ÷ steps",
            (("simulated time", f["sim_time_s"], "s"), ("steps", f["steps"], "")),
            f["sim_time_s"] / f["steps"] if f["steps"] else 0.0,
            "s",
            source,
        ),
        "ttft_p50": Explanation(
            "TTFT p50",
            "the median over requests of (first token − arrival)" + (" + time outside the steps" if outside else ""),
            (("requests", f["finished"], ""), *((("time outside the steps", outside, "s"),) if outside else ())),
            f["ttft_s"]["p50"] or 0.0,
            "s",
            source,
        ),
        "tpot_p50": Explanation(
            "TPOT p50",
            "the median over requests of (last token − first token) ÷ (output tokens − 1)",
            (("requests", f["finished"], ""),),
            f["tpot_s"]["p50"] or 0.0,
            "s",
            source,
        ),
    }
    if "prefix_hit_rate" in f:
        out["prefix_hit_rate"] = Explanation(
            "prefix hit rate",
            "prompt tokens from the cache ÷ prompt tokens",
            (
                ("prompt tokens from the cache", f["hit_tokens"], "tokens"),
                ("prompt tokens", f["prompt_tokens"], "tokens"),
            ),
            f["prefix_hit_rate"],
            "",
            source,
        )
    return out
