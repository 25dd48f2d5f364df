"""A serving run sampled for animation: curves over time, memory maps, and events.

Nobody knows in advance how long a simulated run lasts, so samples are taken at a fixed
interval and, whenever the budget fills up, every other one is dropped and the interval
doubles: samples stay evenly spread and the trace stays small enough for a browser.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from kvweb.serving.engine import MemoryManager


class EvenSamples:
    """At most `limit` rows, taken every `interval` seconds, thinned by halves when full."""

    def __init__(self, interval: float, limit: int) -> None:
        self.interval = interval
        self.limit = limit
        self.next_t = 0.0
        self.rows: list[Any] = []

    def add(self, t: float, row: Any) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.limit:
            self.rows = self.rows[::2]
            self.interval *= 2
        self.next_t = t + self.interval


def blocks_to_cells(block_size: int, owner: np.ndarray, written: np.ndarray, max_cells: int) -> tuple[int, list[int], list[int]]:
    """Group blocks into at most max_cells cells of whole blocks.

    `owner` holds each block's request id (-1 when free), `written` its tokens of KV.
    Returns the tokens per cell, each cell's owner (the largest request id in it, -1 when
    free) and the percentage of the cell holding written KV.
    """
    per_cell = -(-len(owner) // max_cells)
    cells = -(-len(owner) // per_cell)
    pad = cells * per_cell - len(owner)
    owner = np.concatenate([owner, np.full(pad, -1, dtype=owner.dtype)]).reshape(cells, per_cell)
    written = np.concatenate([written, np.zeros(pad, dtype=written.dtype)]).reshape(cells, per_cell)
    cell_tokens = per_cell * block_size
    percent = np.rint(100 * written.sum(axis=1) / cell_tokens).astype(int)
    return cell_tokens, owner.max(axis=1).tolist(), percent.tolist()


def ranges_to_cells(capacity: int, ranges: list[tuple[int, int, int, int]], max_cells: int) -> tuple[int, list[int], list[int]]:
    """Cut a contiguous arena into at most max_cells equal cells.

    `ranges` are disjoint (start, held tokens, written tokens, owner id). Returns the tokens
    per cell, each cell's owner (the last range starting before the cell ends, if it reaches
    into the cell; else -1) and the percentage of the cell holding written KV. Works on the
    ranges' end points, not on every token, so a 400-thousand-token arena costs no more than
    a small one.
    """
    per_cell = -(-capacity // max_cells)
    cells = -(-capacity // per_cell)
    bounds = np.minimum(np.arange(cells + 1) * per_cell, capacity)
    if not ranges:
        return per_cell, [-1] * cells, [0] * cells
    starts, held, written, ids = (np.array(col) for col in zip(*sorted(ranges)))

    def tokens_before(lengths: np.ndarray) -> np.ndarray:
        """Covered tokens below each cell bound: piecewise linear in the address."""
        before = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        xp = np.column_stack([starts, starts + lengths]).ravel()
        fp = np.column_stack([before, before + lengths]).ravel()
        return np.interp(bounds, xp, fp)

    percent = np.rint(100 * np.diff(tokens_before(written)) / per_cell).astype(int)
    last = np.searchsorted(starts, bounds[1:], side="left") - 1
    reaches = (last >= 0) & (starts[last] + held[last] > bounds[:-1])
    owner = np.where(reaches, ids[last], -1)
    return per_cell, owner.tolist(), percent.tolist()


class TraceRecorder:
    """Collects the curves (queue, batch, memory), memory-map frames and events of one run."""

    CURVES = ("t", "waiting", "preempted", "batch", "occupied", "used")

    def __init__(self, interval: float, max_points: int = 400, max_frames: int = 80,
                 max_cells: int = 1024, max_events: int = 300) -> None:
        self.curves = EvenSamples(interval, max_points)
        self.frames = EvenSamples(interval * 4, max_frames)
        self.max_cells = max_cells
        self.max_events = max_events
        self.events: list[dict[str, Any]] = []
        self.events_seen = 0
        self.cell_tokens = 0

    @property
    def next_t(self) -> float:
        return min(self.curves.next_t, self.frames.next_t)

    def sample(self, t: float, step: int, waiting: int, preempted: int, batch: int, used: int, memory: MemoryManager) -> None:
        occupied = memory.occupied
        if t >= self.curves.next_t:
            self.curves.add(t, (t, waiting, preempted, batch, occupied, used))
        if t >= self.frames.next_t:
            self.cell_tokens, owner, written = memory.memory_map(step, self.max_cells)
            self.frames.add(t, {"t": t, "owner": owner, "written": written})

    def event(self, t: float, kind: str, seq_id: int) -> None:
        self.events_seen += 1
        if len(self.events) < self.max_events:
            self.events.append({"t": t, "kind": kind, "id": seq_id})

    def result(self) -> dict[str, Any]:
        columns = list(zip(*self.curves.rows)) if self.curves.rows else [()] * len(self.CURVES)
        return {
            "curves": {name: list(col) for name, col in zip(self.CURVES, columns)},
            "cell_tokens": self.cell_tokens,
            "frames": self.frames.rows,
            "events": self.events,
            "events_dropped": self.events_seen - len(self.events),
        }
