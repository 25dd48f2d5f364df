"""A serving run sampled for animation: curves over time, memory maps, and events.

Nobody knows in advance how long a simulated run lasts, so samples are taken at a fixed
interval and, whenever the budget fills up, every other one is dropped and the interval
doubles: samples stay evenly spread and the trace stays small enough for a browser.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class EvenSamples:
    """At most `limit` rows, taken every `interval` seconds, thinned by halves when full.

    Rows that tell what happened since the row before (not just a state) give `merge`: then
    thinning keeps the later row of each pair and folds the earlier one into it, so nothing
    that happened is lost.
    """

    def __init__(self, interval: float, limit: int, merge: Callable[[Any, Any], None] | None = None) -> None:
        self.interval = interval
        self.limit = limit
        self.merge = merge
        self.next_t = 0.0
        self.rows: list[Any] = []

    def add(self, t: float, row: Any) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.limit:
            if self.merge is None:
                self.rows = self.rows[::2]
            else:
                for earlier, later in zip(self.rows[::2], self.rows[1::2]):
                    self.merge(earlier, later)
                self.rows = self.rows[1::2] + self.rows[len(self.rows) & ~1 :]
            self.interval *= 2
        self.next_t = t + self.interval


def merge_frames(earlier: dict[str, Any], later: dict[str, Any]) -> None:
    """Fold what happened before `earlier` was taken into `later` (its state stands)."""
    for key in ("freed", "returned"):
        later[key] = sorted(set(earlier[key]) | set(later[key]))
    happened = later["happened"]
    for kind, n in earlier["happened"].items():
        happened[kind] = happened.get(kind, 0) + n


@dataclass(frozen=True)
class GroupMap:
    """One KV cache group's memory map in a frame, for a model whose layers are not all alike
    (`ContinuousBatching.group_maps`): vLLM's groups share one pool of blocks, so each group's map
    is that whole pool with its own blocks coloured and the other groups' OTHER; a scheduler that
    keeps each kind of layer in a pool of its own (SGLang's full, sliding-window and Mamba pools)
    gives one map per pool, `shared` False. Owners and percentages are `memory_map`'s."""

    kind: str  # full, sliding, latent or linear (kvweb/gpu/layers.py)
    layers: int  # layers whose KV (or state) it keeps
    window: int  # a sliding window's tokens (0: none)
    shared: bool  # one pool for every group (a cell may be OTHER), or a pool of its own
    unit: str  # what the pool is made of: "block", "token slot" or "state slot"
    cell_tokens: int  # tokens a cell holds (a state pool: states per cell)
    owner: list[int]  # each cell's owner: a request id, SHARED, CACHED, FREE or OTHER
    written: list[int]  # percentage of each cell holding this group's KV

    def about(self) -> dict[str, Any]:
        """What stays the same from frame to frame (the trace keeps it once)."""
        return {
            "kind": self.kind,
            "layers": self.layers,
            "window": self.window,
            "shared": self.shared,
            "unit": self.unit,
            "cell_tokens": self.cell_tokens,
        }


def cell_group(n_units: int, max_cells: int) -> int:
    """Units (blocks or tokens) per cell when n_units are drawn in at most max_cells cells."""
    return max(1, -(-n_units // max_cells))


def blocks_to_cells(
    block_size: int, owner: np.ndarray, written: np.ndarray, max_cells: int
) -> tuple[int, list[int], list[int]]:
    """Group blocks into at most max_cells cells of whole blocks.

    `owner` holds each block's request id (-1 when free), `written` its tokens of KV.
    Returns the tokens per cell, each cell's owner (the largest request id in it, -1 when
    free) and the percentage of the cell holding written KV.
    """
    per_cell = cell_group(len(owner), max_cells)
    cell_tokens = per_cell * block_size
    if per_cell > 1:  # (one block per cell: the blocks are the cells)
        pad = -len(owner) % per_cell
        if pad:
            owner = np.concatenate([owner, np.full(pad, -1, dtype=owner.dtype)])
            written = np.concatenate([written, np.zeros(pad, dtype=written.dtype)])
        owner = owner.reshape(-1, per_cell).max(axis=1)
        written = written.reshape(-1, per_cell).sum(axis=1)
    percent = np.rint(100 * written / cell_tokens).astype(int)
    return cell_tokens, owner.tolist(), percent.tolist()


def ranges_to_cells(
    capacity: int, ranges: list[tuple[int, int, int, int]], max_cells: int
) -> tuple[int, list[int], list[int]]:
    """Cut a contiguous arena into at most max_cells equal cells.

    `ranges` are disjoint (start, held tokens, written tokens, owner id). Returns the tokens
    per cell, each cell's owner (the last range starting before the cell ends, if it reaches
    into the cell; else -1) and the percentage of the cell holding written KV. Works on the
    ranges' end points, not on every token, so a 400-thousand-token arena costs no more than
    a small one.
    """
    per_cell = cell_group(capacity, max_cells)
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


MAX_CELLS = 1024  # a memory map's cells at most (a model whose layers are not all alike: each group's or pool's too)
EVENT_KINDS = ("preempt", "swap_out", "swap_in", "recompute")
EVENT_BINS = 200  # time bins of the event counts the time series draw


class Mapped(Protocol):
    """What the recorder reads of a run's memory (the loop, `ContinuousBatching`): what requests
    hold, and its maps."""

    @property
    def occupied(self) -> int: ...
    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]: ...
    def group_maps(self, step: int, max_cells: int) -> list[GroupMap]: ...


class TraceRecorder:
    """Collects the curves (queue, batch, memory), memory-map frames and events of one run.

    Every event is kept (as columns, so thousands stay small); the time series get them as
    counts per time bin, and each frame says which cells preemption freed and where
    preempted work came back since the frame before, and which requests sit swapped out on
    the host.
    """

    CURVES = ("t", "waiting", "preempted", "batch", "occupied", "used")

    def __init__(
        self,
        interval: float,
        max_points: int = 400,
        max_frames: int = 80,
        max_cells: int = MAX_CELLS,
        extra_curves: tuple[str, ...] = (),
    ) -> None:
        self.names = self.CURVES + extra_curves  # extra curves: values the caller passes to `sample`
        self.curves = EvenSamples(interval, max_points)
        self.frames = EvenSamples(interval * 4, max_frames, merge_frames)
        self.max_cells = max_cells
        self.events: dict[str, list] = {"t": [], "kind": [], "id": [], "tokens": []}
        self.cell_tokens = 0
        self.freed: set[int] = set()  # cells freed by preemption since the last frame
        self.returned: set[int] = set()  # cells preempted work came back to since the last frame
        self.host: dict[int, int] = {}  # swapped-out request id -> KV tokens on the host
        self.since = 0  # events before the last frame
        self.groups: list[dict[str, Any]] = []  # each group's `GroupMap.about` (layers of several kinds)

    @property
    def next_t(self) -> float:
        return min(self.curves.next_t, self.frames.next_t)

    def sample(
        self, t: float, step: int, waiting: int, preempted: int, batch: int, used: int, memory: Mapped, *extra: float
    ) -> None:
        occupied = memory.occupied
        if t >= self.curves.next_t:
            self.curves.add(t, (t, waiting, preempted, batch, occupied, used, *extra))
        if t >= self.frames.next_t:
            self.cell_tokens, owner, written = memory.memory_map(step, self.max_cells)
            kinds = self.events["kind"][self.since :]
            frame = {
                "t": t,
                "owner": owner,
                "written": written,
                "freed": sorted(self.freed),
                "returned": sorted(self.returned),
                "host": [[i, n] for i, n in self.host.items()],
                "happened": {k: kinds.count(k) for k in EVENT_KINDS if k in kinds},
            }
            groups = memory.group_maps(step, self.max_cells)
            if groups:
                self.groups = [g.about() for g in groups]
                frame["groups"] = [{"owner": g.owner, "written": g.written} for g in groups]
            self.frames.add(t, frame)
            self.freed, self.returned, self.since = set(), set(), len(self.events["t"])

    def event(self, t: float, kind: str, seq_id: int, tokens: int = 0, cells: tuple[int, ...] | list[int] = ()) -> None:
        """`tokens`: the KV the event moves or drops; `cells`: the memory-map cells the request
        holds as it is preempted (freed) or comes back (returned)."""
        for name, value in zip(("t", "kind", "id", "tokens"), (t, kind, seq_id, tokens)):
            self.events[name].append(value)
        (self.freed if kind in ("preempt", "swap_out") else self.returned).update(cells)
        if kind == "swap_out":
            self.host[seq_id] = tokens
        elif kind == "swap_in":
            self.host.pop(seq_id, None)

    def event_bins(self, end: float, bins: int = EVENT_BINS) -> dict[str, list]:
        """The events as counts per (time bin, kind), only where some happened: a marker per
        row draws every event however many there are."""
        rows: dict[str, list] = {"t0": [], "t1": [], "kind": [], "count": []}
        if not self.events["t"]:
            return rows
        times, kinds = np.array(self.events["t"]), np.array(self.events["kind"])
        edges = np.linspace(0.0, max(end, times.max(initial=0.0)) or 1.0, bins + 1)
        for kind in EVENT_KINDS:
            if kind not in self.events["kind"]:
                continue  # no rows
            counts, _ = np.histogram(times[kinds == kind], edges)
            for i in np.flatnonzero(counts):
                for name, value in zip(rows, (float(edges[i]), float(edges[i + 1]), kind, int(counts[i]))):
                    rows[name].append(value)
        return rows

    def result(self) -> dict[str, Any]:
        columns = list(zip(*self.curves.rows)) if self.curves.rows else [()] * len(self.names)
        curves = {name: list(col) for name, col in zip(self.names, columns)}
        return {
            "curves": curves,
            "cell_tokens": self.cell_tokens,
            "frames": self.frames.rows,
            "events": self.events,
            "event_bins": self.event_bins(curves["t"][-1] if curves["t"] else 0.0),
            **({"groups": self.groups} if self.groups else {}),
        }
