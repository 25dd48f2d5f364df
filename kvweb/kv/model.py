"""A tiny decoder-only transformer in numpy: trained character-level weights, or seeded random ones.

It exists so that paging and sharing can be *proved* to change nothing: the model
reaches its KV cache only through a store (`length`, `write`, `attend`, `advance`),
so the same forward runs on a contiguous cache, a paged one, or a radix cache.
float64 throughout, so that batching or block order cannot flip a sampled token.

Positions are rotary (RoPE: q and k turned by their position before the store sees them, so the
store caches rotated keys, as real servers do). The default weights (`mini.npz`, 146 KB) were
trained by `kvweb train-mini` (kv/train.py) on the project's own docs, so its text reads as
English; `weights="random"` is the untrained model.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Protocol

import numpy as np

VOCAB = string.printable[:95]  # digits, letters, punctuation, space: readable text
CHAR_ID = {c: i for i, c in enumerate(VOCAB)}


def encode(text: str) -> list[int]:
    """Characters to token ids; characters outside the vocabulary are an error."""
    bad = sorted({c for c in text if c not in CHAR_ID})
    if bad:
        raise ValueError(f"characters outside the model's vocabulary: {''.join(bad)!r}")
    return [CHAR_ID[c] for c in text]


def decode(tokens: Sequence[int]) -> str:
    return "".join(VOCAB[t] for t in tokens)


class KVStore(Protocol):
    """What the model needs from a KV cache, and nothing more.

    `write` stages the new tokens' K and V for one layer (rows length..length+n);
    `attend` runs causal attention of the new queries over committed + staged rows;
    `advance` commits the n staged tokens once every layer has written.
    """

    def length(self, seq: int) -> int: ...
    def write(self, seq: int, layer: int, k: np.ndarray, v: np.ndarray) -> None: ...
    def attend(self, seq: int, layer: int, q: np.ndarray) -> np.ndarray: ...
    def advance(self, seq: int, n: int) -> None: ...


def causal_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """q: [n, H, D] for the last n positions of k, v: [L, H, D]. Returns [n, H, D]."""
    n, length = q.shape[0], k.shape[0]
    scores = np.einsum("nhd,lhd->hnl", q, k) / math.sqrt(q.shape[-1])
    if n > 1:  # one new token (a decode step) sees every position: nothing to mask
        future = np.arange(length)[None, :] > (length - n + np.arange(n))[:, None]
        scores[:, future] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("hnl,lhd->nhd", weights, v)


WEIGHTS = ("trained", "random")


@dataclass(frozen=True)
class ModelConfig:
    layers: int = 2
    d_model: int = 64
    heads: int = 4
    d_ff: int = 128
    max_positions: int = 4096
    weights: str = "trained"  # the shipped mini.npz, or "random": seeded untrained weights
    seed: int = 0  # the random weights' seed (unused by the trained ones)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


def param_shapes(c: ModelConfig) -> dict[str, tuple[int, int]]:
    """The parameters by name (positions are rotations of q and k, not parameters)."""
    shapes = {"embed": (len(VOCAB), c.d_model), "head": (c.d_model, len(VOCAB))}
    for i in range(c.layers):
        shapes |= {
            f"qkv{i}": (c.d_model, 3 * c.d_model),
            f"out{i}": (c.d_model, c.d_model),
            f"up{i}": (c.d_model, c.d_ff),
            f"down{i}": (c.d_ff, c.d_model),
        }
    return shapes


@lru_cache(maxsize=4)
def rotary(positions: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, head_dim / 2] of the rotary position code (RoPE).

    Rotating q and k by their positions makes a score depend on the distance alone: no weights to
    ship, any length, and a window trained at 0..511 stands for any 512 characters of a longer
    sequence (distances past the trained ones stay untrained: docs/paged.md).
    """
    half = head_dim // 2
    angle = np.arange(positions)[:, None] * 10000.0 ** (-np.arange(half) / half)[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    cos.flags.writeable = sin.flags.writeable = False
    return cos, sin


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [n, H, D] turned by its rows' angles (cos, sin [n, D/2]), pairing dimension i with i + D/2."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


@lru_cache(maxsize=1)
def trained_weights() -> dict[str, np.ndarray]:
    """The shipped weights, as float64 (read once per process)."""
    with resources.files("kvweb.kv").joinpath("mini.npz").open("rb") as f, np.load(f) as npz:
        arrays = {k: npz[k].astype(np.float64) for k in npz.files}
    for a in arrays.values():
        a.flags.writeable = False
    return arrays


class MiniModel:
    """Embeddings, `layers` pre-norm attention + MLP blocks, and an LM head."""

    def __init__(self, config: ModelConfig = ModelConfig()) -> None:
        self.config = c = config
        if c.weights == "trained":
            self._load_trained()
        elif c.weights == "random":
            self._init_random()
        else:
            raise ValueError(f"weights: {c.weights!r} is not allowed; allowed: {', '.join(WEIGHTS)}")

    def _load_trained(self) -> None:
        c, w = self.config, trained_weights()
        shipped = ModelConfig(*(int(n) for n in w["shape"]))
        if (c.layers, c.d_model, c.heads, c.d_ff) != (shipped.layers, shipped.d_model, shipped.heads, shipped.d_ff):
            raise ValueError(
                f"the trained weights are for layers={shipped.layers}, d_model={shipped.d_model}, "
                f"heads={shipped.heads}, d_ff={shipped.d_ff}; use weights='random' for other shapes"
            )
        self.embed, self.head = w["embed"], w["head"]
        self.blocks = [{k: w[f"{k}{i}"] for k in ("qkv", "out", "up", "down")} for i in range(c.layers)]

    def _init_random(self) -> None:
        c = self.config
        rng = np.random.default_rng(c.seed)

        def w(*shape: int) -> np.ndarray:
            return rng.standard_normal(shape) / np.sqrt(shape[0])

        self.embed = rng.standard_normal((len(VOCAB), c.d_model))
        self.blocks = [
            {
                "qkv": w(c.d_model, 3 * c.d_model),
                "out": w(c.d_model, c.d_model),
                "up": w(c.d_model, c.d_ff),
                "down": w(c.d_ff, c.d_model),
            }
            for _ in range(c.layers)
        ]
        self.head = w(c.d_model, len(VOCAB)) * 3.0  # sharper logits: less uniform text

    @staticmethod
    def _norm(x: np.ndarray) -> np.ndarray:
        # RMS norm. `.mean` is this sum divided by the count; called directly it skips numpy's
        # Python wrapper, which costs more than the arithmetic on a decode step's one row.
        return x / np.sqrt(np.add.reduce(x * x, axis=-1, keepdims=True) / x.shape[-1] + 1e-6)

    def forward_batch(self, store: KVStore, seq_ids: Sequence[int], tokens: Sequence[Sequence[int]]) -> np.ndarray:
        """One iteration: each sequence brings any number (>= 1) of new tokens.

        The linear layers run on all new tokens of the batch at once; attention runs per
        sequence through the store. Returns the logits of each sequence's last token, [B, V].
        """
        c = self.config
        counts = [len(t) for t in tokens]
        if min(counts, default=1) < 1:
            raise ValueError("every sequence in a batch brings at least one token")
        starts = [store.length(s) for s in seq_ids]
        if max((s + n for s, n in zip(starts, counts)), default=0) > c.max_positions:
            raise ValueError(f"sequence longer than the model's {c.max_positions} positions")
        cos, sin = rotary(c.max_positions, c.head_dim)
        if len(seq_ids) == 1:  # one sequence (a decode loop's every step): slices, not gathers
            x = self.embed[np.asarray(tokens[0], dtype=np.int64)]
            cos, sin = cos[starts[0] : starts[0] + counts[0]], sin[starts[0] : starts[0] + counts[0]]
            bounds = [0, counts[0]]
        else:
            pos = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, counts)])
            x = self.embed[np.concatenate([np.asarray(t, dtype=np.int64) for t in tokens])]
            cos, sin = cos[pos], sin[pos]
            bounds = np.cumsum([0, *counts]).tolist()
        d = c.d_model
        for layer, blk in enumerate(self.blocks):
            qkv = self._norm(x) @ blk["qkv"]
            # q and k turned together (one call: a decode step is numpy overhead, not arithmetic);
            # the store caches rotated keys
            qk = rotate(qkv[:, : 2 * d].reshape(-1, 2 * c.heads, c.head_dim), cos, sin)
            q, k, v = qk[:, : c.heads], qk[:, c.heads :], qkv[:, 2 * d :].reshape(-1, c.heads, c.head_dim)
            attended = np.empty_like(q)
            for i, seq in enumerate(seq_ids):
                rows = slice(bounds[i], bounds[i + 1])
                store.write(seq, layer, k[rows], v[rows])
                attended[rows] = store.attend(seq, layer, q[rows])
            x = x + attended.reshape(-1, d) @ blk["out"]
            h = self._norm(x) @ blk["up"]
            x = x + (h * (h > 0)) @ blk["down"]
        for seq, n in zip(seq_ids, counts):
            store.advance(seq, n)
        last = x[bounds[1] - 1 : bounds[1]] if len(seq_ids) == 1 else x[np.asarray(bounds[1:]) - 1]
        return self._norm(last) @ self.head


def seeded(seed: int | None) -> np.random.Generator | None:
    """A sequence's own sampling generator; None (greedy) when it has no seed."""
    return None if seed is None else np.random.default_rng(seed)


def sample(
    logits: np.ndarray, rng: np.random.Generator | None, temperature: float = 1.0, mask: np.ndarray | None = None
) -> int:
    """Draw one token. `rng=None` or temperature 0 is greedy and consumes no random number.

    `mask` (bool, True = allowed) restricts the choice; exactly one allowed token is taken
    without drawing, so constrained and jump-forward decoding stay in step.
    """
    if mask is not None:
        allowed = np.flatnonzero(mask)
        if len(allowed) == 0:
            raise ValueError("no token is allowed")
        if len(allowed) == 1:
            return int(allowed[0])
        logits = np.where(mask, logits, -np.inf)
    if rng is None or temperature == 0:
        return int(np.argmax(logits))
    # Shift before dividing: the best token gets exactly 0, so a tiny temperature (1e-320)
    # sends the others to -inf (probability 0: greedy in the limit), never inf - inf = NaN.
    with np.errstate(over="ignore"):
        z = (np.asarray(logits, dtype=np.float64) - np.max(logits)) / temperature
    p = np.exp(z)
    p /= p.sum()
    return int(min(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right"), len(p) - 1))
