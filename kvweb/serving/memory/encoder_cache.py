"""Multimodal inputs in vLLM V1: the encoder cache that keeps images' embeddings, the encoder compute
budget of a step, and the encoder's time.

An image in a prompt is a run of placeholder tokens (its offset and length) whose embeddings the
vision encoder computes; the language model then prefills the placeholders like any other tokens.
vLLM's scheduler (`Scheduler._try_schedule_encoder_inputs`, vllm/v1/core/sched/scheduler.py) asks,
for each image a step's new tokens overlap: are its embeddings cached (by the image's mm hash, so
a second request with the same image finds them: `EncoderCacheManager.check_and_update_cache`)?
If not, the encoder must compute them in this step: its embeddings must fit the step's encoder
compute budget (`max_num_encoder_input_tokens`, by default `max_num_batched_tokens`) and the
cache (`encoder_cache_size` embeddings, by default the budget): free slots first, then entries no
request references, oldest first (`can_allocate`). If either is short, the request's chunk is cut
just before the image (nothing if it is already past the image's start: the image's first tokens
were a prefix-cache hit). A request references each image it needs until its computed tokens pass
the image's end (`_free_encoder_inputs`) or it leaves; an unreferenced entry stays cached, freeable,
until an allocation needs its room (vllm/v1/core/encoder_cache_manager.py).

The encoder's time: a ViT (assumed for every model: `VIT`, about Qwen2.5-VL's vision tower, one
ViT token per embedding, its weights split over the tp GPUs) priced on the roofline, even where
measured kernels price the language model, added to the step's time (vLLM runs the encoder before
the step's forward pass).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.serving.load.workload import Image


@dataclass(frozen=True)
class VisionEncoder:
    """A ViT's shape: every layer attention (4 d² weights) and an MLP (2 d x d_ff), bidirectional
    attention within each image, bf16 weights."""

    layers: int = 32
    d_model: int = 1280
    d_ff: int = 5120

    @property
    def params(self) -> int:
        return self.layers * (4 * self.d_model**2 + 2 * self.d_model * self.d_ff)

    def work(self, images: Sequence[int], tp: int = 1) -> tuple[float, float]:
        """(FLOPs, bytes) on one GPU of `tp` to encode images of these lengths: 2 FLOPs a weight a
        token, and QKᵀ and AV over each image's own tokens (4 d n² a layer); the weights read once."""
        n = np.asarray(images, dtype=float)
        flops = 2.0 * self.params * n.sum() + 4.0 * self.d_model * self.layers * float((n * n).sum())
        return flops / tp, 2.0 * self.params / tp


VIT = VisionEncoder()  # 629,145,600 parameters (Qwen2.5-VL's vision tower: 32 layers of 1280)


def encoder_seconds(cost: CostModel, images: Sequence[int]) -> float:
    """Seconds the vision encoder takes for images of these lengths in one step, on the roofline of
    the cost model's GPU (0 for none)."""
    if not images:
        return 0.0
    flops, nbytes = VIT.work(images, cost.tp)
    return float(max(flops / (cost.peak_flops * cost.compute_eff), nbytes / (cost.gpu.hbm_bandwidth * cost.memory_eff)))


class EncoderCache:
    """vLLM's `EncoderCacheManager`: `size` embeddings; each cached image (by mm hash) with the
    requests referencing it; unreferenced ones in `freeable`, oldest first, still cached until their
    room is needed. free + held == size, and a referenced entry is never evicted."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free = size  # slots no cached image holds
        self.freeable_slots = size  # free slots plus the unreferenced images' slots
        self.cached: dict[int, set[int]] = {}  # mm hash -> ids of the requests referencing it
        self.lengths: dict[int, int] = {}  # mm hash -> its embeddings
        self.freeable: OrderedDict[int, None] = OrderedDict()  # unreferenced images, oldest first
        self.hits = 0  # images a scheduled request found cached that it did not reference yet
        self.computed = 0  # embeddings the encoder computed
        self.remote: set[int] = set()  # mm hashes an encode replica sent (loaded, not computed)
        self.evicted = 0  # images evicted to make room
        self.cut = 0  # chunks cut short (or not scheduled) for want of encoder budget or cache room
        self.changes: list[tuple[float, int, int]] = [(0.0, 0, 0)]  # (time, embeddings held, hits)

    @property
    def held(self) -> int:
        return self.size - self.free

    def check(self, image: Image, seq: int, found: list[Image]) -> bool:
        """Whether `image` is cached; if so `seq` references it (`check_and_update_cache`), and it is
        appended to `found` if `seq` did not reference it yet (a hit, once the request is scheduled)."""
        refs = self.cached.get(image.mm_hash)
        if refs is None:
            return False
        if not refs:
            del self.freeable[image.mm_hash]
            self.freeable_slots -= image.length
        if seq not in refs:
            refs.add(seq)
            found.append(image)
        return True

    def can_allocate(self, image: Image, budget: int, scheduled: int) -> bool:
        """Whether the encoder may compute `image` now: within the step's `budget` left, and with room
        for it beside the `scheduled` embeddings this request already computes in the step, evicting
        unreferenced images oldest first (`can_allocate`)."""
        if image.length > budget:
            return False
        need = image.length + scheduled
        if need <= self.free:
            return True
        if need > self.freeable_slots:
            return False
        while need > self.free:
            mm_hash, _ = self.freeable.popitem(last=False)
            del self.cached[mm_hash]
            self.free += self.lengths.pop(mm_hash)
            self.evicted += 1
        return True

    def commit(self, seq: int, scheduled: list[Image], found: list[Image]) -> None:
        """`seq` is scheduled: the encoder computes the `scheduled` images, and the `found` ones are hits."""
        for image in scheduled:
            self.allocate(image, seq)
        self.hits += len(found)

    def allocate(self, image: Image, seq: int) -> None:
        """The encoder computes `image` for `seq` in this step (or, sent by an encode replica, it is
        loaded); its embeddings take their slots."""
        self.cached.setdefault(image.mm_hash, set()).add(seq)
        self.lengths[image.mm_hash] = image.length
        self.free -= image.length
        self.freeable_slots -= image.length
        if image.mm_hash not in self.remote:
            self.computed += image.length

    def receive(self, image: Image) -> None:
        """An encode replica sent `image`'s embeddings (E/P/D disaggregation, fleet/encode_pool.py):
        vLLM's ECConnector holds them (`has_cache_item`), so a request scheduled over the image loads
        them into the cache when it needs them, with room made as for a computed image, but takes no
        encoder budget and no encoder time (`external_load_encoder_input`)."""
        self.remote.add(image.mm_hash)

    def release(self, image: Image, seq: int) -> None:
        """`seq` no longer needs `image` (`free_encoder_input`): its last reference makes it freeable."""
        refs = self.cached.get(image.mm_hash)
        if not refs or seq not in refs:
            return
        refs.discard(seq)
        if not refs:
            self.freeable[image.mm_hash] = None
            self.freeable_slots += image.length

    def schedule(
        self,
        seq: int,
        images: Sequence[Image],
        computed: int,
        new: int,
        budget: int,
        scheduled: list[Image],
        found: list[Image],
    ) -> tuple[int, int]:
        """vLLM's `_try_schedule_encoder_inputs` for a request with `computed` tokens computed that
        would compute `new` more: the images those tokens overlap that are not cached are appended
        to `scheduled`, the cached ones it did not reference yet to `found` (to `commit` if the
        request is scheduled). Returns the new tokens (cut just before an image that cannot be
        computed, 0 if already past its start) and the budget left."""
        end = computed + new
        embeds = 0
        for image in images:
            if image.offset >= end:
                break
            if image.offset + image.length <= computed or any(i.mm_hash == image.mm_hash for i in scheduled):
                continue
            if self.check(image, seq, found):
                continue
            if not self.can_allocate(image, budget, embeds):
                self.cut += 1
                return max(image.offset - computed, 0), budget
            embeds += image.length
            if image.mm_hash not in self.remote:  # an encode replica's embeddings take no encoder budget
                budget -= image.length
            scheduled.append(image)
        return new, budget

    def passed(self, seq: int, images: Sequence[Image], computed: int) -> None:
        """After a step: `seq` releases the images its computed tokens have passed."""
        for image in images:
            if image.offset + image.length <= computed:
                self.release(image, seq)

    def leave(self, seq: int, images: Sequence[Image]) -> None:
        """`seq` finished or was preempted: it releases every image (`EncoderCacheManager.free`)."""
        for image in images:
            self.release(image, seq)

    def note(self, now: float) -> None:
        """After a step: the embeddings held and the hits so far, where they changed."""
        if self.changes[-1][1:] != (self.held, self.hits):
            self.changes.append((now, self.held, self.hits))

    def figures(self, budget: int, times: Sequence[float] = ()) -> dict[str, Any]:
        """The cache's size, the budget, the hits, embeddings computed, evictions and cut chunks, and
        at each of `times` the embeddings held and the hits so far."""
        changes = np.array(self.changes)
        at = changes[np.searchsorted(changes[:, 0], np.asarray(times, dtype=float), side="right") - 1]
        return {
            "encoder_cache": self.size,
            "encoder_budget": budget,
            "hits": self.hits,
            "computed": self.computed,
            "evicted": self.evicted,
            "cut_chunks": self.cut,
            "held": at[:, 1].astype(int).tolist(),
            "hits_at": at[:, 2].astype(int).tolist(),
        }


@dataclass(frozen=True)
class EncoderConfig:
    """vLLM's encoder settings, resolved: a step's encoder compute budget and the cache's size, in
    embeddings (vLLM raises both to at least the largest image: `compute_mm_encoder_budget`)."""

    budget: int  # max_num_encoder_input_tokens (default: max_num_batched_tokens)
    cache_size: int  # encoder_cache_size (default: the budget)


def image_block_keys(images: Sequence[Image], block_size: int) -> dict[int, tuple[int, ...]]:
    """Block index -> the mm hashes of the images whose placeholders the block holds: what vLLM adds
    to such a block's hash, so the same placeholder tokens of another image are no hit."""
    keys: dict[int, tuple[int, ...]] = {}
    for image in images:
        for block in range(image.offset // block_size, (image.offset + image.length - 1) // block_size + 1):
            keys[block] = (*keys.get(block, ()), image.mm_hash)
    return keys
