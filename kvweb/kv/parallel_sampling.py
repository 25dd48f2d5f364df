"""Parallel sampling: one prompt, n answers; the prompt is prefilled once and shared by fork.

The parent prefills, n-1 children fork its block table, then each of the n sequences samples
from the same prefill logits with its own generator (answer i uses seed + i) and decodes in
one batch. A child's first write into the prompt's partly filled last block copies it
(copy-on-write); the last holder writes in place.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq

from kvweb.kv.batching import Engine, Sequence, batch_note, forward
from kvweb.kv.model import MiniModel, seeded
from kvweb.kv.paged_store import PagedStore, StepHook


def parallel_sample(
    model: MiniModel,
    store: PagedStore,
    prompt: Seq[int],
    max_new: int,
    n: int,
    seed: int,
    temperature: float = 1.0,
    on_step: StepHook | None = None,
) -> list[list[int]]:
    """n answers of `max_new` tokens to `prompt` (sequence ids 0 .. n-1, 0 the parent)."""
    if n < 1 or max_new < 1:
        raise ValueError("parallel sampling needs n >= 1 answers of max_new >= 1 tokens")
    family = [Sequence(i, max_new, seeded(seed + i), [], list(prompt)) for i in range(n)]
    parent = family[0]
    parent.pending = list(prompt)
    store.add(parent.seq_id)
    logits = forward(model, store, [parent])[0]
    for child in family[1:]:
        store.fork(parent.seq_id, child.seq_id)
    for seq in family:
        seq.take(logits, temperature)
    if on_step:
        on_step(batch_note(0, family, [len(prompt)] + [0] * (n - 1), finished=[]))
    engine = Engine(model, store, temperature, on_step)
    engine.iteration, engine.running = 1, list(family)
    while engine.running:
        engine.step()
    return [engine.outputs[i] for i in range(n)]
