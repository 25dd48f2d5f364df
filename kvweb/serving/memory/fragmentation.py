"""Fragmentation on its own (SPEC 4).

Internal: what a reservation leaves unused when its request ends (Max, Pow2, Oracle), next to
the paged worst case of less than one block per request.
External: a contiguous token arena where requests arrive and leave, each needing one
contiguous range. A failed allocation "with enough free space" is one that failed although the
arena's free tokens added up to enough: the space was there, only cut into holes.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from kvweb.serving.memory.allocator import ALLOCATORS
from kvweb.lab import Progress, no_progress
from kvweb.serving.memory.reserved_memory import POLICIES, reservation
from kvweb.serving.load.workload import Request


def internal_waste(requests: list[Request], max_len: int, block_size: int) -> list[dict[str, Any]]:
    """Per scheme: tokens reserved, tokens never written at request end, and their share."""
    finals = [r.prompt + r.output - 1 for r in requests]
    rows = []
    for scheme in (*POLICIES, "paged"):
        if scheme == "paged":
            held = [-(-f // block_size) * block_size for f in finals]
        else:
            held = [reservation(scheme, f, max_len) for f in finals]
        reserved, waste = sum(held), sum(held) - sum(finals)
        rows.append(
            {
                "scheme": scheme,
                "reserved_tokens": reserved,
                "waste_tokens": waste,
                "waste_frac": waste / reserved if reserved else 0.0,
                "mean_waste": waste / len(finals) if finals else 0.0,
            }
        )
    return rows


def arena_experiment(
    mean_size: int,
    arena: int,
    requests: int,
    seed: int,
    allocator: str = "first-fit",
    load: float = 0.9,
    max_frames: int = 100,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Requests arrive one per second on average (Poisson), need a geometric number of tokens
    with mean `mean_size` (at most the arena), and stay an exponential time chosen so that the
    offered load is `load` x arena. A request that finds no hole is dropped and counted.

    Frames (every k-th arrival) hold the arena's ranges for animation.
    """
    rng = np.random.default_rng([seed, 2])
    sizes = np.minimum(rng.geometric(1 / mean_size, requests), arena).tolist()
    arrivals = np.cumsum(rng.exponential(1.0, requests)).tolist()
    stays = rng.exponential(load * arena / mean_size, requests).tolist()
    alloc = ALLOCATORS[allocator](arena)
    leaving: list[tuple[float, int]] = []  # (time, handle): the range's start, but in the ideal arena ranges move
    owner: dict[int, int] = {}  # handle -> request index
    failures = enough = 0
    every = max(1, -(-requests // max_frames))
    frames = []
    for i, (t, size, stay) in enumerate(zip(arrivals, sizes, stays)):
        while leaving and leaving[0][0] <= t:
            _, handle = heapq.heappop(leaving)
            alloc.free(handle)
            del owner[handle]
        start = alloc.allocate(size)
        if start is None:
            failures += 1
            enough += alloc.free_total >= size
        else:
            owner[start] = i
            heapq.heappush(leaving, (t + stay, start))
        if i % every == 0 or i == requests - 1:
            frames.append(
                {
                    "request": i,
                    "t": t,
                    "size": size,
                    "failed": start is None,
                    "ranges": [[s, n, owner[h]] for h, s, n in alloc.placed()],
                    "free": alloc.free_total,
                    "largest_hole": max((n for _, n in alloc.holes()), default=0),
                    "failures": failures,
                    "failures_with_enough_free": enough,
                }
            )
            progress((i + 1) / requests, f"{i + 1}/{requests} requests")
    return {
        "mean_size": mean_size,
        "arena": arena,
        "requests": requests,
        "allocator": allocator,
        "failures": failures,
        "failures_with_enough_free": enough,
        "failure_rate": failures / requests if requests else 0.0,
        "share_with_enough_free": enough / failures if failures else 0.0,
        "frames": frames,
    }
