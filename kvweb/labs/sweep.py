"""Lab `sweep`: paged serving across block sizes, watermarks, or swap vs recompute at several rates."""

from __future__ import annotations

from typing import Any

import param

from kvweb.budget import Estimate, work
from kvweb.lab import ParamError, Progress
from kvweb.memo import Memo
from kvweb.labs.engine import ServingLab
from kvweb.serving.loop.engine_setup import ignored_by
from kvweb.serving.loop.metrics import summarize
from kvweb.serving.load.workload import Request

BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
WATERMARKS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2)
RATE_FACTORS = (0.5, 1.0, 1.5, 2.0)
PREEMPTION_BLOCK_SIZES = (8, 16, 64)
KEYS = (
    "throughput_tok_s",
    "slo_attainment",
    "mean_batch",
    "occupied_frac",
    "used_frac",
    "utilisation",
    "preemptions",
    "recomputed_tokens",
    "swapped_bytes",
    "sim_time_s",
    "finished",
    "rejected",
)

# The figures of each point remembered (least recently used dropped first), shared by every
# session: a point's run is a pure function of the parameters with the point's own values in
# place, so changing the parameter a sweep varies, or going back to a sweep, reruns nothing.
# Each entry is a dozen numbers; this keeps all three sweeps of one setting.
POINTS_KEPT = 64
_POINTS: Memo[dict[str, Any]] = Memo(POINTS_KEPT)


class SweepLab(ServingLab):
    lab_name = "sweep"
    title = "Paged serving sweeps: block size, watermark, swap vs recompute"
    summary = (
        "Runs paged memory on the same requests across block sizes (1-256), admission watermarks "
        "(0-20 %), or swap vs recompute at 0.5x-2x the rate and several block sizes."
    )

    sweep = param.Selector(
        objects=["block_size", "watermark", "preemption"],
        default="block_size",
        doc="what varies; everything else stays as set",
    )
    requests = param.Integer(500, bounds=(1, 5000), doc="requests per run (a trace brings its own)")
    # At 2 requests/s scenario A is underloaded and every block size serves the same tokens/s;
    # at 4 the memory is the limit, so block size and watermark change throughput and preemptions.
    rate = param.Number(4.0, bounds=(0.01, 1000.0), doc="Poisson arrival rate, requests per second")

    def check(self) -> None:
        super().check()
        if self.sweep == "preemption" and self.workload in ("trace", "closed-loop"):
            raise ParamError(
                f"workload: {self.workload} is not allowed with sweep=preemption, which varies the arrival rate"
            )

    def points(self) -> list[dict[str, Any]]:
        if self.sweep == "block_size":
            return [{"block_size": b} for b in BLOCK_SIZES]
        if self.sweep == "watermark":
            return [{"watermark": w} for w in WATERMARKS]
        return [
            {"rate": self.rate * f, "block_size": b, "preemption": p}
            for f in RATE_FACTORS
            for b in PREEMPTION_BLOCK_SIZES
            for p in ("recompute", "swap")
        ]

    def estimate(self) -> Estimate:
        """One untraced run a point (the preemption sweep's rates change arrivals, not the work)."""
        requests = self.workload_at(self.rate)
        runs = [self.served_work(requests, point.get("block_size", self.block_size)) for point in self.points()]
        return work(*(part for run in runs for part in run), **self.work_knobs())

    def serve(self, progress: Progress) -> dict[str, Any]:
        points = self.points()
        workloads: dict[float, list[Request]] = {}  # by rate: the preemption sweep's points share them
        rows = []
        for i, point in enumerate(points):
            key = self.key(("sweep", *ignored_by("paged")), **point)

            def figures(point: dict[str, Any] = point) -> dict[str, Any]:
                rate = point.get("rate", self.rate)
                if rate not in workloads:
                    workloads[rate] = self.workload_at(rate)
                setup = self.setup("paged").with_(**{k: v for k, v in point.items() if k != "rate"})
                m = summarize(setup.run(workloads[rate]), setup.slo)
                return {k: m[k] for k in KEYS}

            rows.append({**point, **_POINTS.get(key, figures)})
            progress((i + 1) / len(points), f"{i + 1}/{len(points)} runs")
        return {"sweep": self.sweep, "rows": rows}
