"""ContiguousStore: one growing K and V array per sequence and layer (the baseline)."""

from __future__ import annotations

import numpy as np

from kvweb.kv.model import causal_attention


class ContiguousStore:
    """K and V of a sequence and layer live in one array with room to grow (doubled when full,
    so a decode step copies only its own row); attention reads the rows written so far, a
    C-contiguous slice exactly like a freshly concatenated array."""

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self._len: dict[int, int] = {}
        self._k: dict[int, list[np.ndarray | None]] = {}
        self._v: dict[int, list[np.ndarray | None]] = {}
        self._end: dict[int, list[int]] = {}  # rows written (committed + staged), per layer

    def add(self, seq: int) -> None:
        self._len[seq] = 0
        self._k[seq] = [None] * self.layers
        self._v[seq] = [None] * self.layers
        self._end[seq] = [0] * self.layers

    def free(self, seq: int) -> None:
        del self._len[seq], self._k[seq], self._v[seq], self._end[seq]

    @property
    def rows(self) -> int:
        """K/V rows held over all sequences (one per token): what this store's memory grows with."""
        return sum(self._len.values())

    def length(self, seq: int) -> int:
        return self._len[seq]

    def write(self, seq: int, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        committed = self._len[seq]
        end = committed + len(k)
        keys, values = self._k[seq], self._v[seq]
        if keys[layer] is None or len(keys[layer]) < end:
            room = max(end, 2 * committed, 16)
            for arrays, new in ((keys, k), (values, v)):
                grown = np.empty((room, *new.shape[1:]), dtype=np.result_type(new))
                if arrays[layer] is not None:
                    grown[:committed] = arrays[layer][:committed]
                arrays[layer] = grown
        keys[layer][committed:end] = k
        values[layer][committed:end] = v
        self._end[seq][layer] = end

    def attend(self, seq: int, layer: int, q: np.ndarray) -> np.ndarray:
        end = self._end[seq][layer]
        return causal_attention(q, self._k[seq][layer][:end], self._v[seq][layer][:end])

    def advance(self, seq: int, n: int) -> None:
        self._len[seq] += n
