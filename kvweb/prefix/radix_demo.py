"""RadixAttention on the mini model: requests prefill only what the radix cache lacks.

A request matches its prompt against the tree, locks the matched path, takes pool slots
for the rest, prefills only the uncached suffix (attending to the cached prefix's K and V
through the same slots), decodes, then inserts prompt + output and unlocks. The tokens
must equal `generate_alone`, a from-scratch run on a contiguous cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvweb.kv.generate import generate_alone
from kvweb.kv.model import MiniModel, causal_attention, sample
from kvweb.prefix.radix_cache import RadixCache


class RadixStore:
    """A KVStore over the radix cache's pool: one K and one V array per layer, indexed by
    slot. A running sequence is a list of slots; the first ones may belong to the tree."""

    def __init__(self, model: MiniModel, pool_size: int) -> None:
        c = model.config
        shape = (c.layers, pool_size, c.heads, c.head_dim)
        self.k = np.zeros(shape)
        self.v = np.zeros(shape)
        self._slots: dict[int, np.ndarray] = {}
        self._len: dict[int, int] = {}

    def open(self, seq: int, slots: np.ndarray, cached: int) -> None:
        """Start a sequence whose first `cached` slots already hold K and V."""
        self._slots[seq] = slots
        self._len[seq] = cached

    def close(self, seq: int) -> np.ndarray:
        del self._len[seq]
        return self._slots.pop(seq)

    def length(self, seq: int) -> int:
        return self._len[seq]

    def write(self, seq: int, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        start = self._len[seq]
        rows = self._slots[seq][start : start + len(k)]
        self.k[layer, rows] = k
        self.v[layer, rows] = v

    def attend(self, seq: int, layer: int, q: np.ndarray) -> np.ndarray:
        rows = self._slots[seq][: self._len[seq] + len(q)]
        return causal_attention(q, self.k[layer, rows], self.v[layer, rows])

    def advance(self, seq: int, n: int) -> None:
        self._len[seq] += n


@dataclass(frozen=True)
class DemoRequest:
    prompt: list[int]
    cached_tokens: int  # prompt tokens whose KV came from the tree
    prefilled_tokens: int  # prompt tokens computed
    output: list[int]
    reference: list[int]  # generate_alone's tokens for the same prompt and seed
    evicted: int  # cached tokens evicted to make room for this request
    match_node: int  # id of the node the matched prefix ends at (the root when nothing matched)
    running_tree: dict[str, Any]  # the tree while it runs: prefix locked (the match's split marked),
    # its new slots taken (the leaves evicted for them drawn as ghosts)
    tree: dict[str, Any]  # the tree after it was inserted (the insert's split marked) and unlocked


def run_demo(
    model: MiniModel,
    prompts: Sequence[Sequence[int]],
    max_new: int,
    pool_size: int,
    page_size: int = 1,
    seed: int = 0,
    temperature: float = 1.0,
    follow: dict[int, tuple[int, Sequence[int]]] | None = None,
) -> list[DemoRequest]:
    """Serve prompts one at a time on a radix cache of `pool_size` slots.

    `follow[i] = (j, question)`: request i's prompt is request j's prompt, its output and
    then `question` (a later turn of the same conversation); `prompts[i]` is then unused.
    Request i samples with seed `seed + i`.
    """
    cache = RadixCache(pool_size, page_size, record=True)
    store = RadixStore(model, pool_size)
    done: list[DemoRequest] = []
    for i, given in enumerate(prompts):
        if follow and i in follow:
            j, question = follow[i]
            prompt = done[j].prompt + done[j].output + list(question)
        else:
            prompt = list(given)
        match = cache.match_prefix(prompt[:-1])  # the last prompt token is always computed: it gives the logits
        cache.lock(match.node)
        before = cache.cached_size
        kv_len = len(prompt) + max_new - 1  # the last sampled token is never fed back
        fresh = cache.alloc(kv_len - match.length)
        if fresh is None:
            raise ValueError(f"request {i} needs {kv_len} slots; the pool has {pool_size}")
        evicted = before - cache.cached_size
        running = cache.describe(prompt, match.length, pool_size, cache.changes())
        store.open(i, np.concatenate([match.slots, fresh]), match.length)
        rng = None if temperature == 0 else np.random.default_rng(seed + i)
        logits = model.forward_batch(store, [i], [prompt[match.length :]])[0]
        output: list[int] = []
        while True:
            output.append(sample(logits, rng, temperature))
            if len(output) == max_new:
                break
            logits = model.forward_batch(store, [i], [[output[-1]]])[0]
        full = prompt + output
        cache.insert(full[:kv_len], store.close(i))
        cache.unlock(match.node)
        reference = generate_alone(model, prompt, max_new, None if temperature == 0 else seed + i, temperature)
        after = cache.describe(full[:kv_len], match.length, pool_size, cache.changes())
        done.append(
            DemoRequest(
                prompt,
                match.length,
                len(prompt) - match.length,
                output,
                reference,
                evicted,
                match.node.id,
                running,
                after,
            )
        )
    return done
