"""Lab `max-rate`: the highest arrival rate each memory manager serves within the SLO."""
from __future__ import annotations

import math
from typing import Any

import param

from kvweb.serving.engine_setup import MEMORIES
from kvweb.lab import ParamError, Progress
from kvweb.labs.engine import PAPER, ServingLab
from kvweb.serving.max_rate import max_rate
from kvweb.serving.metrics import summarize
from kvweb.serving.workload import Request


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
        base = self.workload_at(1.0)  # arrivals at 1 request/s; a trial divides them by its rate
        allowed_misses = math.floor((1 - self.target) * len(base))
        rows = []
        for i, kind in enumerate(MEMORIES):
            setup = self.setup(kind)
            curve: list[dict[str, Any]] = []

            def meets(rate: float) -> bool:
                requests = [Request(r.id, r.arrival / rate, r.prompt, r.output) for r in base]
                m = summarize(setup.run(requests, give_up_after=allowed_misses), setup.slo)
                ok = not m["stopped_early"] and m["slo_attainment"] >= self.target
                curve.append({"rate": rate, "met": ok, "slo_attainment": None if m["stopped_early"] else m["slo_attainment"],
                              "throughput_tok_s": None if m["stopped_early"] else m["throughput_tok_s"]})
                progress((i + min(len(curve), 12) / 13) / len(MEMORIES), f"{kind}: tried {rate:.3g} req/s")
                return ok

            rate = max_rate(meets, start=1.0, rel_tol=self.rel_tol)
            rows.append({"memory": kind, "max_rate": rate, "trials": curve})
        best = {r["memory"]: r["max_rate"] for r in rows}
        ratio = {k: (best["paged"] / v if v else None) for k, v in best.items() if k != "paged"}
        return {"max_rate": best, "paged_over": ratio, "managers": rows, "target": self.target, "paper": PAPER}
