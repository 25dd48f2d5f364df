"""Results labs remember between runs.

In the app a widget change reruns a lab with one parameter changed, so much of the new run is
the old run's work again (a memory manager whose inputs did not change, a sample whose seed is
still among the samples). A lab keeps such pieces in a `Memo`: a small dictionary shared by
every session, least recently used dropped first, so memory stays bounded. Keys must hold every
input the piece depends on; results are shared, so callers only read them.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

_ALL: weakref.WeakSet[Memo] = weakref.WeakSet()


def clear_memos() -> None:
    """Forget every kept result (benchmarks measure cold runs after this)."""
    for memo in list(_ALL):
        memo.clear()


class Memo(Generic[T]):
    def __init__(self, keep: int) -> None:
        if keep < 1:
            raise ValueError("a memo keeps at least one result")
        self.keep = keep
        self._kept: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()
        _ALL.add(self)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result kept for `key`, or `compute()` (outside the lock: runs may take a while),
        kept from now on."""
        kept = self.find(key)
        if kept is None:
            kept = compute()
            self.put(key, kept)
        return kept

    def find(self, key: Hashable) -> T | None:
        """The result kept for `key`, or None (results are never None)."""
        with self._lock:
            if key not in self._kept:
                return None
            self._kept.move_to_end(key)
            return self._kept[key]

    def put(self, key: Hashable, value: T) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.keep:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)
