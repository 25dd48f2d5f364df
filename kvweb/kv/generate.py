"""Generating one request alone on a contiguous cache: the reference every lab compares with."""
from __future__ import annotations

from collections.abc import Sequence

from kvweb.kv.contiguous_store import ContiguousStore
from kvweb.kv.model import MiniModel, sample, seeded


def generate_alone(model: MiniModel, prompt: Sequence[int], max_new: int, seed: int | None,
                   temperature: float = 1.0) -> list[int]:
    """Prefill the prompt, then decode `max_new` tokens with a generator seeded by `seed`
    (None: greedy). The output a paged, batched or cached run must reproduce exactly."""
    store = ContiguousStore(model.config.layers)
    store.add(0)
    rng = seeded(seed)
    logits = model.forward_batch(store, [0], [list(prompt)])[0]
    out: list[int] = []
    for _ in range(max_new):
        out.append(sample(logits, rng, temperature))
        if len(out) < max_new:
            logits = model.forward_batch(store, [0], [[out[-1]]])[0]
    return out
