"""The arenas a reserved ("Orca") memory manager may place its contiguous ranges in, by name.

- ideal (`ideal_arena.py`): no external fragmentation, the lecture's Orca baselines;
- first-fit (`first_fit.py`): the lowest hole that fits;
- buddy (`buddy.py`): power-of-two blocks, the vLLM paper's reservation baselines.
"""

from __future__ import annotations

from kvweb.serving.memory.arena import ContiguousArena
from kvweb.serving.memory.buddy import Buddy
from kvweb.serving.memory.first_fit import FirstFit
from kvweb.serving.memory.ideal_arena import Ideal

ALLOCATORS: dict[str, type[ContiguousArena]] = {"ideal": Ideal, "first-fit": FirstFit, "buddy": Buddy}
__all__ = ["ALLOCATORS", "Buddy", "FirstFit", "Ideal"]
