"""Lab `max-rate`: the highest arrival rate each memory manager serves within the SLO."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import param

from kvweb.budget import Estimate, work
from kvweb.serving.loop.engine_setup import MEMORIES, Setup, ignored_by
from kvweb.lab import ParamError, Progress
from kvweb.memo import Memo
from kvweb.labs.engine import PAPER, ServingLab
from kvweb.serving.loop.max_rate import max_rate
from kvweb.serving.loop.metrics import attainment, throughput
from kvweb.serving.load.workload import Request


@dataclass(frozen=True)
class Trial:
    """A run at one rate. Stopped early (`met` None) when it gave up after `misses` misses: it
    stops too for any lower give-up level. Otherwise it ran to the end with `misses` misses in
    all: it runs the same for any give-up level at least that high."""

    misses: int
    met: float | None
    throughput: float | None

    def answers(self, allowed: int) -> bool:
        """Whether a run giving up after `allowed` misses is this one."""
        return allowed <= self.misses if self.met is None else allowed >= self.misses


def trial(setup: Setup, base: list[Request], rate: float, allowed: int) -> Trial:
    """Serve `base` (arriving at 1 request/s) at `rate`, giving up after `allowed` misses."""
    run = setup.run([Request(r.id, r.arrival / rate, r.prompt, r.output) for r in base], give_up_after=allowed)
    if run.stopped_early:
        return Trial(allowed, None, None)
    misses = len(run.rejected) + sum(s.missed for s in run.sequences)
    return Trial(misses, attainment(run, setup.slo), throughput(run))


# What each manager's searches found, remembered (least recently used dropped first), shared by
# every session: per key (a manager and every input its runs read), the trial runs by rate. A run
# is a pure function of its key and rate but for when it gives up (after `allowed` misses), so a
# trial is kept with the give-up levels it answers for, and a change of the target or the
# tolerance reruns only the rates it has not tried; a widget change that leaves a manager's inputs
# alone (block size and preemption beside a reserved manager, the allocator beside paged memory)
# reruns only the others. Each entry is a few dozen numbers.
SEARCHES_KEPT = 16
SEARCH_DOUBLINGS = 5  # runs a search takes to bracket the max rate (up to 16 req/s), for the estimate
TRIALS_KEPT = 256  # per key: a few searches' worth
_SEARCHES: Memo[dict[float, Trial]] = Memo(SEARCHES_KEPT)


class MaxRateLab(ServingLab):
    lab_name = "max-rate"
    title = "Max serving rate within the SLO, per memory manager"
    summary = (
        "For Max, Pow2, Oracle and paged memory: the highest Poisson arrival rate at which at "
        "least `target` of the requests meet the SLO (binary search on the same requests, "
        "arriving faster or slower)."
    )

    requests = param.Integer(500, bounds=(10, 5000), doc="requests per trial run")
    target = param.Number(0.9, bounds=(0.5, 0.999), doc="SLO attainment the rate must keep")
    rel_tol = param.Number(0.02, bounds=(0.005, 0.5), doc="the search stops when its bracket is this narrow (relative)")

    def check(self) -> None:
        super().check()
        if self.workload in ("trace", "closed-loop"):
            raise ParamError(f"workload: {self.workload} is not allowed here; a max-rate search needs Poisson arrivals")

    def estimate(self) -> Estimate:
        """Each manager's search: doubling from 1 req/s up to 16 (or halving down), then
        bisecting to `rel_tol`; runs at rates that fail give up early, so this is on the high side."""
        runs = SEARCH_DOUBLINGS + math.ceil(math.log2(math.log(2) / math.log1p(self.rel_tol)))
        requests = self.workload_at(1.0)
        per_manager = [self.served_work(requests, self.block_size if kind == "paged" else 0) for kind in MEMORIES]
        knobs = self.work_knobs()
        return work(
            *((n * runs, unit) for run in per_manager for n, unit in run),
            lower=knobs["lower"],
            higher=(*knobs["higher"], "rel_tol"),
        )

    def serve(self, progress: Progress) -> dict[str, Any]:
        base: list[Request] = []  # arrivals at 1 request/s, made when a trial first needs them
        rows = []
        for i, kind in enumerate(MEMORIES):

            def tried(rate: float, n: int, i: int = i, kind: str = kind) -> None:
                progress((i + min(n, 12) / 13) / len(MEMORIES), f"{kind}: tried {rate:.3g} req/s")

            rate, curve = self.search(kind, base, tried)
            rows.append(
                {
                    "memory": kind,
                    "max_rate": rate,
                    "trials": [
                        {"rate": r, "met": ok, "slo_attainment": a, "throughput_tok_s": t} for r, ok, a, t in curve
                    ],
                }
            )
        best = {r["memory"]: r["max_rate"] for r in rows}
        ratio = {k: (best["paged"] / v if v else None) for k, v in best.items() if k != "paged"}
        return {"max_rate": best, "paged_over": ratio, "managers": rows, "target": self.target, "paper": PAPER}

    def search(
        self, kind: str, base: list[Request], tried: Callable[[float, int], None]
    ) -> tuple[float, list[tuple[float, bool, float | None, float | None]]]:
        """One manager's max rate and its trials (rate, met, attainment, throughput), each trial
        run only if no remembered one answers for it. `base` is filled when a run needs it."""
        allowed = math.floor((1 - self.target) * self.requests)  # a Poisson workload has `requests` requests
        # neither `rate` (every trial sets its own) nor the search's own settings are inputs of a run
        trials = _SEARCHES.get(self.key(("rate", "target", "rel_tol", *ignored_by(kind)), memory=kind), dict)
        setup = self.setup(kind)
        curve: list[tuple[float, bool, float | None, float | None]] = []

        def meets(rate: float) -> bool:
            found = trials.get(rate)
            if found is None or not found.answers(allowed):
                if not base:
                    base.extend(self.workload_at(1.0))
                found = trial(setup, base, rate, allowed)
                if len(trials) < TRIALS_KEPT or rate in trials:
                    trials[rate] = found
            ok = found.met is not None and found.met >= self.target
            curve.append((rate, ok, found.met, found.throughput))
            tried(rate, len(curve))
            return ok

        return max_rate(meets, start=1.0, rel_tol=self.rel_tol), curve
