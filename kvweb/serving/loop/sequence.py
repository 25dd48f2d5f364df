"""The continuous-batching loop's data: a request inside it (`Sequence`; `LoopSeq` with the KV it
has computed; `Seq` with today's schedulers' prefix-cache state), what a run produced (`Run`,
`ScheduledRun`) and a run's sums between calls of the loop (`Tally`). Apart from the loop
(continuous_batching.py), so that the memories, the trace and the metrics read them without
importing it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvweb.lab import Progress
from kvweb.serving.load.workload import Request

TOKEN_BASE = 1 << 40  # synthetic token ids of requests without content: above any vocabulary
NO_SLOTS = np.zeros(0, dtype=np.int64)  # an empty prefix, shared (read only): only SGLang gives requests one
NO_SLOTS.flags.writeable = False


class Sequence:
    """A request inside the loop (`Seq` adds the prefill and cache state of today's schedulers).

    A prefill step writes the KV of every token it processes and yields one output token;
    a decode step writes one token's KV and yields the next. So after any step a sequence
    with g generated tokens holds prompt + g - 1 tokens of KV, and at most
    prompt + output - 1 (`final_kv`). While running, length and output grow by one per step
    from (step0, kv0, gen0).
    """

    __slots__ = (
        "req",
        "id",
        "final_kv",
        "step0",
        "kv0",
        "gen0",
        "blocks",
        "phase",
        "start",
        "on_host",
        "first_token_t",
        "finish_t",
        "spans",
        "missed",
    )

    def __init__(self, req: Request) -> None:
        self.req = req
        self.id = req.id
        self.final_kv = req.prompt + req.output - 1
        self.step0 = 0
        self.kv0 = 0
        self.gen0 = 0  # tokens generated so far (while waiting or preempted)
        self.blocks: list[int] = []
        self.phase = 0
        self.start = 0
        self.on_host = False
        self.first_token_t = 0.0
        self.finish_t = 0.0
        self.spans: list[list[float]] = []  # [admitted, left) times on the GPU
        self.missed = False

    def kv(self, step: int) -> int:
        """KV tokens held after `step` (while running)."""
        return self.kv0 + step - self.step0

    def generated(self, step: int) -> int:
        """Output tokens generated after `step` (while running)."""
        return self.gen0 + step - self.step0

    def leave(self, t: float, tpot_s: float) -> bool:
        """It finished at time t; whether that made it miss the SLO's `tpot_s` (its mean time per
        output token)."""
        self.finish_t = t
        self.spans[-1][1] = t
        if self.missed or self.req.output < 2:
            return False
        self.missed = (t - self.first_token_t) / (self.req.output - 1) > tpot_s
        return self.missed


@dataclass
class Run:
    """Everything a run produced; metrics.summarize turns it into figures."""

    sequences: list[Sequence]  # finished, by id
    rejected: list[tuple[Request, str]]
    sim_time: float
    steps: int
    batch_sum: int
    occupied_s: float  # token-seconds
    used_s: float
    capacity: int
    preemptions: int
    recomputed_tokens: int
    swapped_bytes: int  # over the host link (the papers' engine's swap)
    generated: int
    stopped_early: bool
    trace: dict[str, Any] = field(default_factory=dict)
    # (seconds since the batch last decoded, requests that waited that long for their next token),
    # one or more per decoding step: metrics.summarize's inter-token latency. A list of pairs,
    # or (from the loop, which makes hundreds of thousands) the same pairs as an [n, 2] float array.
    itl: list[tuple[float, int]] | np.ndarray = field(default_factory=list)
    max_batch: int = 0  # the most requests one step served: the concurrency reached
    # a first token's time outside the engine's steps (HTTP, tokenizer, detokenizer: what a client's
    # TTFT holds beside them), added to every TTFT by metrics; the measured model's, 0 on the roofline
    outside_s: float = 0.0


class LoopSeq(Sequence):
    """A request on the shared loop: `Sequence` plus the KV it has computed.

    `computed` counts the KV tokens of a request still prefilling (chunk by chunk); once its
    prompt (or, after a preemption, prompt + generated tokens) is computed it samples a token
    and decodes like any `Sequence`. The papers' engine needs no more (its requests stay small:
    a run makes tens of thousands).
    """

    __slots__ = ("computed", "hit")

    def __init__(self, req: Request) -> None:
        super().__init__(req)
        self.computed = 0
        self.hit = 0  # KV tokens found in the prefix cache when it last started


class Seq(LoopSeq):
    """A request inside a today's scheduler: `LoopSeq` plus its prefix-cache state."""

    __slots__ = ("hashes", "registered", "node", "prefix", "own", "mat", "_content")

    def __init__(self, req: Request) -> None:
        super().__init__(req)
        self.hashes: list[Hashable] = []  # chained block hashes, computed as far as needed
        self.registered = 0  # blocks entered in the hash table
        self.node: Any = None  # the radix-tree node it has locked
        self.prefix = NO_SLOTS  # slots of its cached prefix (radix tree)
        self.own: list[np.ndarray] = []  # slots it allocated beyond that prefix
        self.mat = 0  # KV tokens with slots (prefix + own); decoded tokens get slots lazily
        self._content: np.ndarray | None = None

    @property
    def tokens_to_compute(self) -> int:
        """Prompt plus the tokens generated before a preemption: what a (re)prefill computes."""
        return self.req.prompt + self.gen0

    def content(self) -> np.ndarray:
        """Its token ids: the workload's, or unique ids when the request carries none."""
        if self._content is None:
            tokens = self.req.tokens
            if tokens is None:
                tokens = np.arange(self.req.prompt + self.req.output, dtype=np.int64) + TOKEN_BASE * (self.id + 1)
            self._content = np.asarray(tokens, dtype=np.int64)
        return self._content


@dataclass
class ScheduledRun(Run):
    """A run of a today's scheduler: `Run` plus what the prefix cache did."""

    prompt_tokens: int = 0  # prompt tokens of requests admitted for the first time
    hit_tokens: int = 0  # of those, found in the prefix cache
    resumed_hit_tokens: int = 0  # tokens a preempted request found cached when it came back
    cached_s: float = 0.0  # token-seconds of reusable cache nobody holds
    end_occupied: int = 0  # tokens of memory still held by requests when the run ended
    end_cached: int = 0  # tokens of reusable cache nobody holds when the run ended (free, still found)


@dataclass
class Tally:
    """A run's sums and bookkeeping between calls of `ContinuousBatching.advance` (which works on
    local copies: the loop is the hot path)."""

    total: int  # requests given
    progress: Progress
    observer: Callable[[Any, int], None] | None  # the loop's `Observer`, called with the loop and the step
    sample_t: float  # when the trace takes its next sample
    steps: int = 0
    batch_sum: int = 0
    max_batch: int = 0
    decode_tokens: int = 0  # tokens generated by decoding (`generated` counts the rest)
    occupied_s: float = 0.0
    used_s: float = 0.0
    cached_s: float = 0.0
    last_decode: float = 0.0  # when the batch last decoded
    itl_s: list[float] = field(default_factory=list)  # ScheduledRun.itl's two columns: (inter-token latency, requests)
    itl_n: list[int] = field(default_factory=list)
    joins: list[tuple[float, int]] = field(default_factory=list)  # (when, how many) joined the decoding batch since
