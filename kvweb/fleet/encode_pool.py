"""Encode/prefill/decode disaggregation (issue 38): a pool of encode replicas computes the requests'
images and sends their embeddings to the replica that prefills them, as vLLM's disaggregated
encoder does (an encode instance and a prefill or prefill+decode instance joined by an ECConnector,
`--ec-transfer-config`, vllm/distributed/ec_transfer; the proxy of
examples/online_serving/disaggregated_encoder sends a request's images to an encode instance, waits
for it, then sends the request on). SGLang's EPD (`--encoder-only`, `--language-only`) is alike.

A request with images goes first to the encode replica with the fewest requests outstanding (the
first of equals; vLLM's example proxy picks one at random). An encode replica runs the vision
encoder only, in steps: each takes the queued requests first come first served while their
images not cached fit the encoder budget (the first request always, whole), and lasts what a
prefill replica's encoder takes for them (`encoder_seconds`: the ViT on the roofline of the
replica's GPUs). It has its own encoder cache (`EncoderCache`, by mm hash): an image it holds is
not computed again, and a step's images are held until the step ends. When a request's images
are encoded their embeddings (image tokens x the model's hidden size x 2 B, bf16) leave over the
encode replica's link (`SharedLink`: the transfers in flight share it); when the last byte is over
(plus the latency) the request enters the prefill pool, or the co-located fleet, through its
router, and the replica chosen loads the embeddings as vLLM's scheduler does from its ECConnector
(`EncoderCache.receive`): when the request's chunk reaches the image they take room in its
encoder cache like computed ones, but no encoder budget and no encoder time. A request without
images skips the pool (one the replicas would refuse is refused before it). TTFT counts from the request's arrival at the fleet: it
holds the encode queue, the encoding and the transfer.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kvweb.fleet.disaggregation import Link, SharedLink
from kvweb.fleet.routers import lowest
from kvweb.gpu.cost import CostModel
from kvweb.serving.load.workload import Image, Request
from kvweb.serving.loop.metrics import distribution
from kvweb.serving.memory.encoder_cache import EncoderCache, EncoderConfig, encoder_seconds

EMBEDDING_BYTES = 2  # an embedding's element: bf16


@dataclass
class EncodeReplica:
    """One encode replica: its encoder cache, its link, its queue (arrival, request) and what it did."""

    cache: EncoderCache
    link: SharedLink
    queue: deque[tuple[float, Request]] = field(default_factory=deque)
    free_t: float = 0.0  # when its current step ends
    outstanding: int = 0  # requests sent to it whose embeddings have not arrived yet
    requests: int = 0  # requests encoded
    images: int = 0  # images its encoder computed
    embeddings: int = 0  # embeddings its encoder computed
    busy_s: float = 0.0  # seconds its encoder ran
    sent_bytes: float = 0.0  # embeddings' bytes sent over its link

    def figures(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "images": self.images,
            "embeddings": self.embeddings,
            "hits": self.cache.hits,
            "evicted": self.cache.evicted,
            "busy_s": self.busy_s,
            "embedding_bytes": self.sent_bytes,
        }


class EncodePool:
    """`replicas` encode replicas of the cost model's GPUs with vLLM's encoder `config` (see the module
    docstring); `run(until)` says which requests' embeddings have reached the next pool."""

    def __init__(self, cost: CostModel, config: EncoderConfig, replicas: int, link: Link) -> None:
        self.cost, self.budget = cost, config.budget
        self.per_token = cost.model.d_model * EMBEDDING_BYTES
        self.replicas = [
            EncodeReplica(EncoderCache(config.cache_size), SharedLink(link, self.per_token)) for _ in range(replicas)
        ]
        self.sending: dict[int, tuple[float, int, Request]] = {}  # request id -> (encoded at, replica, request)
        self.arrived: list[
            tuple[float, int, int, Request]
        ] = []  # (embeddings over, request id, replica, request), a heap
        self.transfers: list[float] = []  # each transfer's seconds

    def busy(self) -> bool:
        return any(r.outstanding for r in self.replicas)

    def submit(self, request: Request) -> None:
        """`request` (with images) reaches the pool at its arrival."""
        k = lowest([r.outstanding for r in self.replicas])
        self.replicas[k].queue.append((request.arrival, request))
        self.replicas[k].outstanding += 1

    def run(self, until: float) -> list[tuple[float, Request]]:
        """Encode and send up to `until`; (time, request) of each request whose embeddings arrived by
        then, in time order."""
        for k, r in enumerate(self.replicas):
            while r.queue:
                start = max(r.free_t, r.queue[0][0])
                if start >= until:
                    break
                seconds, taken = self._step(r, start)
                r.free_t = start + seconds
                for request in taken:
                    self.sending[request.id] = (r.free_t, k, request)
                    tokens = sum(image.length for image in request.images)
                    r.sent_bytes += tokens * self.per_token
                    self._over(r.link.send(r.free_t, request.id, tokens))
            self._over(r.link.run(until))
        out = []
        while self.arrived and self.arrived[0][0] <= until:
            t, _, k, request = heapq.heappop(self.arrived)
            self.replicas[k].outstanding -= 1
            out.append((t, request))
        return out

    def _step(self, r: EncodeReplica, start: float) -> tuple[float, list[Request]]:
        """One encoder step of `r` starting at `start`: its seconds and the requests it takes."""
        taken: list[Request] = []
        budget, lengths = self.budget, []
        while r.queue and r.queue[0][0] <= start:
            request = r.queue[0][1]
            need = sum(image.length for image in distinct(request.images) if image.mm_hash not in r.cache.cached)
            if taken and need > budget:
                break
            r.queue.popleft()
            taken.append(request)
            budget -= need
            found: list[Image] = []
            for image in request.images:
                if r.cache.check(image, request.id, found):
                    continue
                if r.cache.can_allocate(image, image.length, 0):
                    r.cache.allocate(image, request.id)  # else computed and sent, not kept
                lengths.append(image.length)
            r.cache.commit(request.id, [], found)
        seconds = encoder_seconds(self.cost, lengths)
        for request in taken:  # the step's embeddings are out: freeable, still cached
            r.cache.leave(request.id, request.images)
        r.requests += len(taken)
        r.images += len(lengths)
        r.embeddings += sum(lengths)
        r.busy_s += seconds
        return seconds, taken

    def _over(self, done: list[tuple[float, int]]) -> None:
        """Transfers whose last byte is over (plus the latency): their requests go on at that time."""
        for t, i in done:
            encoded, k, request = self.sending.pop(i)
            self.transfers.append(t - encoded)
            heapq.heappush(self.arrived, (t, i, k, request))

    def figures(self) -> dict[str, Any]:
        """Each encode replica's requests, images and embeddings computed, cache hits and evictions,
        encoder seconds and embedding bytes sent, and the transfers' seconds."""
        return {
            "replicas": [r.figures() for r in self.replicas],
            "embedding_transfer_s": distribution(self.transfers),
        }


def distinct(images: tuple[Image, ...]) -> list[Image]:
    """A request's images, each mm hash once (the same image twice is computed once)."""
    return list({image.mm_hash: image for image in images}.values())
