"""Lab `fragmentation`: internal waste of reservations and external fragmentation of an arena."""

from __future__ import annotations

from typing import Any

import param

from kvweb.serving.memory.allocator import ALLOCATORS
from kvweb.serving.loop.engine_setup import SCENARIOS
from kvweb.serving.memory.fragmentation import arena_experiment, internal_waste
from kvweb.budget import Estimate, constant
from kvweb.lab import Lab, ParamError, Progress, no_progress
from kvweb.serving.load.workload import poisson_workload
from kvweb.serving.memory.paged_memory import BLOCK_SIZE

MEAN_SIZES = (512, 2048, 4096)
ARENA_DOC = (
    "how reserved ranges are placed: ideal (no external fragmentation: admitted while the reserved "
    "tokens fit, as in the lecture), first-fit (the lowest hole that fits), buddy (power-of-two blocks, "
    "as in the vLLM paper's baselines)"
)


def allocator_param(**options: object) -> param.Selector:
    """The arena choice, one definition for every lab with reserved memory (fragmentation, and the
    serving labs through `ServingLab`)."""
    return param.Selector(objects=list(ALLOCATORS), default="first-fit", doc=ARENA_DOC, **options)


MAX_LIVE = 1000  # requests in the arena at once that an animation frame may have to draw


class FragmentationLab(Lab):
    lab_name = "fragmentation"
    title = "Fragmentation: internal waste and a contiguous arena"
    summary = (
        "Internal: what Max, Pow2 and Oracle reservations leave unwritten when a ShareGPT-like "
        "request ends, beside paged blocks. External: requests arrive and leave a contiguous "
        "token arena, each needing one range; how many fail, and how many of those failed "
        "although enough free tokens existed, only cut into holes."
    )

    mean_size = param.Integer(2048, bounds=(1, 1_000_000), doc="mean tokens a request needs (geometric sizes)")
    arena = param.Integer(32768, bounds=(16, 4_000_000), doc="arena size in tokens")
    requests = param.Integer(
        2000, bounds=(1, 20_000), doc="arrivals in the arena experiment (and requests for internal waste)"
    )
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="seed of sizes, arrivals and stays")
    load = param.Number(0.9, bounds=(0.05, 3.0), doc="offered load: mean tokens requested at any time / arena")
    allocator = allocator_param()
    block_size = param.Integer(BLOCK_SIZE, bounds=(1, 256), doc="paged block size for the internal-waste comparison")

    def estimate(self) -> Estimate:
        """Short at any value its bounds allow: 0.4 s at its caps, 2.4 s on a loaded machine (docs/input.md)."""
        return constant(3.0)

    def check(self) -> None:
        live = self.load * self.arena / min(self.mean_size, *MEAN_SIZES)
        if live > MAX_LIVE:
            smallest = min(self.mean_size, *MEAN_SIZES)
            raise ParamError(
                f"arena: {self.arena} is not allowed with load {self.load:g}; about {live:.0f} requests of "
                f"{smallest} tokens would be live at once, at most {MAX_LIVE} are drawn "
                f"(use arena <= {int(MAX_LIVE * smallest / self.load)} or a larger mean_size)"
            )
        if self.mean_size > self.arena:
            raise ParamError(f"mean_size: {self.mean_size} is not allowed; at most the arena ({self.arena})")

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        sizes = [self.mean_size, *(m for m in MEAN_SIZES if m != self.mean_size)]
        runs = []
        for i, size in enumerate(sizes):

            def part(fraction: float, message: str, i: int = i) -> None:
                progress((i + fraction) / len(sizes), f"mean size {size}: {message}")

            runs.append(
                arena_experiment(
                    size,
                    self.arena,
                    self.requests,
                    self.seed,
                    self.allocator,
                    self.load,
                    max_frames=100 if i == 0 else 1,
                    progress=part,
                )
            )
        by_size = [{k: v for k, v in r.items() if k != "frames"} for r in sorted(runs, key=lambda r: r["mean_size"])]
        a = SCENARIOS["A"]
        requests = poisson_workload(a.lengths, self.requests, 1.0, a.max_len, self.seed)
        frames = runs[0]["frames"]
        return {
            **runs[0],
            "by_mean_size": by_size,
            "opening_step": opening_step(frames),
            "internal": {
                "workload": f"scenario A ({a.lengths}-like), max length {a.max_len}",
                "rows": internal_waste(requests, a.max_len, self.block_size),
            },
        }


def opening_step(frames: list[dict[str, Any]]) -> int:
    """The frame the lab opens on: the first failure although enough tokens were free (the
    arena cut into holes), else the first failure, else the fullest arena."""
    for hit in (lambda f: f["failed"] and f["free"] >= f["size"], lambda f: f["failed"]):
        found = [i for i, f in enumerate(frames) if hit(f)]
        if found:
            return found[0]
    return min(range(len(frames)), key=lambda i: frames[i]["free"], default=0)
