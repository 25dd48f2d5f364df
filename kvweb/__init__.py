"""kvweb: PagedAttention and RadixAttention computed for real, one lab at a time.

The library follows the lecture's parts; each subpackage's docstring names its labs:
  gpu/          1. the paper GPU: specs and the roofline cost model
  kv/           2. the mini model and real KV stores: paging, fork, copy-on-write, beam search
  serving/      3. the serving simulator: workloads, memory managers, engine, metrics
  prefix/       4. prefix reuse: radix cache, cache-aware scheduling, block hashes
  constrained/  5. constrained decoding: regex -> NFA -> DFA -> jump-forward
  fleet/        6. a fleet behind a router: replica views, five routers, regret (docs/fleet.md)
  labs/ (one module per lab), cli.py, reproduce.py, exercises.py, query.py (the share URL)
A lower part never imports from a higher one. Every part may use the base: lab.py (the lab
contract), parsing.py (outside text -> parameter values), memo.py (remembered results) and
jsonable.py (results as JSON and rows).
"""

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.kv.model import MiniModel
from kvweb.kv.paged_store import PagedStore
from kvweb.lab import LABS, get_lab
from kvweb.prefix.radix_cache import RadixCache

__version__ = "0.1.0"
__all__ = ["GPUS", "LABS", "MODELS", "CostModel", "MiniModel", "PagedStore", "RadixCache", "get_lab"]
