"""ContiguousStore: one growing K and V array per sequence and layer (the baseline)."""
from __future__ import annotations

import numpy as np

from kvweb.kv.model import causal_attention


class ContiguousStore:
    def __init__(self, layers: int) -> None:
        self.layers = layers
        self._len: dict[int, int] = {}
        self._k: dict[int, list[np.ndarray | None]] = {}
        self._v: dict[int, list[np.ndarray | None]] = {}

    def add(self, seq: int) -> None:
        self._len[seq] = 0
        self._k[seq] = [None] * self.layers
        self._v[seq] = [None] * self.layers

    def free(self, seq: int) -> None:
        del self._len[seq], self._k[seq], self._v[seq]

    @property
    def rows(self) -> int:
        """K/V rows held over all sequences (one per token): what this store's memory grows with."""
        return sum(self._len.values())

    def length(self, seq: int) -> int:
        return self._len[seq]

    def write(self, seq: int, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        old_k, old_v = self._k[seq][layer], self._v[seq][layer]
        committed = self._len[seq]
        self._k[seq][layer] = k.copy() if old_k is None else np.concatenate([old_k[:committed], k])
        self._v[seq][layer] = v.copy() if old_v is None else np.concatenate([old_v[:committed], v])

    def attend(self, seq: int, layer: int, q: np.ndarray) -> np.ndarray:
        return causal_attention(q, self._k[seq][layer], self._v[seq][layer])

    def advance(self, seq: int, n: int) -> None:
        self._len[seq] += n
