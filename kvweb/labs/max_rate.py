"""Lab `max-rate`: the highest arrival rate each memory manager serves within the SLO."""
from __future__ import annotations

import math
from typing import Any

import param

from kvweb.serving.engine_setup import MEMORIES, ignored_by
from kvweb.lab import Memo, ParamError, Progress
from kvweb.labs.engine import PAPER, ServingLab
from kvweb.serving.max_rate import max_rate
from kvweb.serving.metrics import attainment, throughput
from kvweb.serving.workload import Request

# Searches remembered (least recently used dropped first), shared by every session: one
# manager's search is a pure function of its key, so a widget change that leaves a manager's
# inputs alone (block size and preemption beside a reserved manager, the allocator beside paged
# memory) reruns only the others. Each entry is a few dozen numbers.
SEARCHES_KEPT = 16
_SEARCHES: Memo[tuple[float, tuple[tuple[float, bool, float | None, float | None], ...]]] = Memo(SEARCHES_KEPT)


class MaxRateLab(ServingLab):
    lab_name = "max-rate"
    title = "Max serving rate within the SLO, per memory manager"
    summary = ("For Max, Pow2, Oracle and paged memory: the highest Poisson arrival rate at which at "
               "least `target` of the requests meet the SLO (binary search on the same requests, "
               "arriving faster or slower).")

    requests = param.Integer(500, bounds=(10, 5000), doc="requests per trial run")
    target = param.Number(0.9, bounds=(0.5, 0.999), doc="SLO attainment the rate must keep")
    rel_tol = param.Number(0.02, bounds=(0.005, 0.5), doc="the search stops when its bracket is this narrow (relative)")

    def check(self) -> None:
        super().check()
        if self.workload == "trace":
            raise ParamError("workload: trace is not allowed here; a max-rate search needs Poisson arrivals")

    def serve(self, progress: Progress) -> dict[str, Any]:
        base: list[Request] = []
        rows = []
        for i, kind in enumerate(MEMORIES):
            def search(i: int = i, kind: str = kind) -> tuple[float, tuple]:
                if not base:  # arrivals at 1 request/s; a trial divides them by its rate
                    base.extend(self.workload_at(1.0))
                allowed_misses = math.floor((1 - self.target) * len(base))
                setup = self.setup(kind)
                curve: list[tuple[float, bool, float | None, float | None]] = []

                def meets(rate: float) -> bool:
                    requests = [Request(r.id, r.arrival / rate, r.prompt, r.output) for r in base]
                    run = setup.run(requests, give_up_after=allowed_misses)
                    met = None if run.stopped_early else attainment(run, setup.slo)
                    ok = met is not None and met >= self.target
                    curve.append((rate, ok, met, None if run.stopped_early else throughput(run)))
                    progress((i + min(len(curve), 12) / 13) / len(MEMORIES), f"{kind}: tried {rate:.3g} req/s")
                    return ok

                return max_rate(meets, start=1.0, rel_tol=self.rel_tol), tuple(curve)

            # `rate` is not an input: every trial sets its own
            left_out = ("rate", *ignored_by(kind))
            key = repr((kind, sorted((n, v) for n, v in self.values().items() if n not in left_out)))
            rate, curve = _SEARCHES.get(key, search)
            rows.append({"memory": kind, "max_rate": rate, "trials": [
                {"rate": r, "met": ok, "slo_attainment": a, "throughput_tok_s": t} for r, ok, a, t in curve]})
        best = {r["memory"]: r["max_rate"] for r in rows}
        ratio = {k: (best["paged"] / v if v else None) for k, v in best.items() if k != "paged"}
        return {"max_rate": best, "paged_over": ratio, "managers": rows, "target": self.target, "paper": PAPER}
