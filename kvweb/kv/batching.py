"""Continuous batching over the mini model, on any KV store (contiguous or paged).

Each iteration admits the requests that have arrived, runs their prompts (prefill) in the same
forward as one token of every running sequence (decode), samples, and retires the sequences
that are done. Every sequence samples with its own seeded generator, so the tokens cannot
depend on who else is in the batch.

A sequence is done once its last answer token is in the cache too: it ends holding
prompt + answer tokens, the count the lecture's block arithmetic uses (so an answer of Lo
tokens takes 1 prefill and Lo decode iterations; the last one's logits are not sampled).
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kvweb.kv.model import KVStore, MiniModel, sample, seeded
from kvweb.kv.paged_store import StepHook


class BatchStore(KVStore, Protocol):
    def add(self, seq: int) -> None: ...
    def free(self, seq: int) -> None: ...


@dataclass
class Request:
    prompt: list[int]
    max_new: int
    seed: int | None = None  # None: greedy
    arrival: int = 0  # the iteration at which the request arrives


@dataclass
class Sequence:
    """One sequence being generated: what it feeds next and what it has sampled so far."""

    seq_id: int
    max_new: int
    rng: np.random.Generator | None
    pending: list[int]  # tokens the next iteration feeds: the prompt, then the last sample
    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return not self.pending

    def take(self, logits: np.ndarray, temperature: float) -> None:
        """After a forward: sample the next token, or finish when the answer is complete."""
        if len(self.output) < self.max_new:
            self.output.append(sample(logits, self.rng, temperature))
            self.pending = [self.output[-1]]
        else:
            self.pending = []


def forward(model: MiniModel, store: KVStore, batch: Seq[Sequence]) -> np.ndarray:
    """One model iteration over every sequence's pending tokens; their last-token logits."""
    return model.forward_batch(store, [s.seq_id for s in batch], [s.pending for s in batch])


def batch_note(step: int, batch: Seq[Sequence], fed: Seq[int], **extra: Any) -> dict[str, Any]:
    """What a trace step says about the engine: who fed how many tokens, who sampled what, and
    each sequence's tokens so far (a Tracer turns them into the characters each block holds)."""
    return {
        "step": step,
        "batch": [
            {"seq": s.seq_id, "fed": n, "sampled": s.output[-1] if s.pending else None} for s, n in zip(batch, fed)
        ],
        "tokens": {s.seq_id: s.prompt + s.output for s in batch},
        **extra,
    }


class Engine:
    def __init__(
        self, model: MiniModel, store: BatchStore, temperature: float = 1.0, on_step: StepHook | None = None
    ) -> None:
        self.model, self.store, self.temperature, self.on_step = model, store, temperature, on_step
        self.iteration = 0
        self.waiting: list[tuple[int, Request]] = []
        self.running: list[Sequence] = []
        self.outputs: dict[int, list[int]] = {}

    def submit(self, seq_id: int, request: Request) -> None:
        self.waiting.append((seq_id, request))
        self.waiting.sort(key=lambda item: item[1].arrival)

    def step(self) -> None:
        """Admit arrivals, run one forward over the batch, sample, retire finished sequences."""
        while self.waiting and self.waiting[0][1].arrival <= self.iteration:
            seq_id, req = self.waiting.pop(0)
            self.store.add(seq_id)
            self.running.append(Sequence(seq_id, req.max_new, seeded(req.seed), list(req.prompt), list(req.prompt)))
        if self.running:
            self._iterate()
        self.iteration += 1

    def _iterate(self) -> None:
        """Forward + sample for the running batch; report the step, then free the finished."""
        batch = self.running
        fed = [len(s.pending) for s in batch]
        for seq, logits in zip(batch, forward(self.model, self.store, batch)):
            seq.take(logits, self.temperature)
        finished = [s for s in batch if s.done]
        if self.on_step:
            self.on_step(batch_note(self.iteration, batch, fed, finished=[s.seq_id for s in finished]))
        for seq in finished:
            self.store.free(seq.seq_id)
            self.outputs[seq.seq_id] = seq.output
            batch.remove(seq)

    def run(self, requests: Seq[Request]) -> list[list[int]]:
        """Generate every request (sequence id = its index); the answers in request order."""
        for i, req in enumerate(requests):
            self.submit(i, req)
        while self.waiting or self.running:
            self.step()
        return [self.outputs[i] for i in range(len(requests))]
