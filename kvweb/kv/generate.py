"""Generating one request alone on a contiguous cache: the reference every lab compares with."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kvweb.kv.contiguous_store import ContiguousStore
from kvweb.kv.model import MiniModel, sample, seeded


def generate_alone(
    model: MiniModel, prompt: Sequence[int], max_new: int, seed: int | None, temperature: float = 1.0
) -> list[int]:
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


class Continued:
    """`generate_alone` that can be taken further. Sampling draws one number per token from the
    seed's generator, in order, so the output for max_new=n is the first n tokens of any longer
    one: `first(n)` returns exactly `generate_alone(model, prompt, n, seed, temperature)` and
    computes only the tokens not made yet (the cache and the generator are kept between calls)."""

    def __init__(self, model: MiniModel, prompt: Sequence[int], seed: int | None, temperature: float = 1.0) -> None:
        self.model, self.prompt, self.temperature = model, list(prompt), temperature
        self.rng = seeded(seed)
        self.store = ContiguousStore(model.config.layers)
        self.store.add(0)
        self.tokens: list[int] = []
        self._lock = threading.Lock()  # one caller at a time takes it further

    def first(self, n: int) -> list[int]:
        with self._lock:
            while len(self.tokens) < n:
                fed = [self.tokens[-1]] if self.tokens else self.prompt
                logits = self.model.forward_batch(self.store, [0], [fed])[0]
                self.tokens.append(sample(logits, self.rng, self.temperature))
            return self.tokens[:n]
