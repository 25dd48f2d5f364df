"""ReplicaView: what a router may read of one replica, and nothing it could change.

The fleet implements it over each replica's scheduler; a router gets the views in replica order.
Every figure is the replica's state at the moment of routing (before this request is enqueued):

- `outstanding`: requests sent and not finished (running + waiting): SGLang's router `load`
  and the least-outstanding router's count.
- `waiting`: requests queued, not yet running: llm-d's queue-scorer.
- `prefix_match(tokens, adapter, images)`: how many leading tokens of `tokens`, under LoRA adapter
  `adapter` (0: the base model; a prefix cached under another adapter is no match), the
  replica's cache holds now, read-only (a probe is not a use: no LRU stamp, no split). llm-d's precise scorer and Dynamo's
  indexer learn this from KV events; kvweb reads the cache itself. A vLLM replica answers with
  `block_pool_match` (whole cached blocks, a block holding an image's placeholders keyed by the
  image's mm hash too, as vLLM hashes it: the same placeholders of another image are no match), an
  SGLang replica with `RadixCache.peek_length` (each scheduler's `cached_prefix`).
- `prefill_tokens`: prompt tokens its requests still have to prefill (waiting, and running
  requests part way through a chunked prefill): Dynamo's active prefill tokens.
- `decode_blocks`: KV blocks held by its running requests: Dynamo's active blocks.
- `adapters`: its LoRA adapters (None: it has no adapter slots): those in its GPU slots, those its
  running and its waiting requests use, and max_loras: what vLLM publishes as the gauge
  `vllm:lora_requests_info` (running_lora_adapters, waiting_lora_adapters, max_lora), which
  llm-d's lora-affinity scorer reads, with the slots' contents beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from kvweb.serving.load.workload import Image


@dataclass(frozen=True)
class Adapters:
    """A replica's LoRA adapters at the moment of routing."""

    loaded: frozenset[int]  # in its GPU slots (a request of one needs no load)
    running: frozenset[int]  # used by its running requests
    waiting: frozenset[int]  # used by its requests not yet running
    max_loras: int  # distinct adapters a batch may use


class ReplicaView(Protocol):
    def outstanding(self) -> int: ...
    def waiting(self) -> int: ...
    def prefix_match(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int: ...
    def prefill_tokens(self) -> int: ...
    def decode_blocks(self) -> int: ...
    def adapters(self) -> Adapters | None: ...
