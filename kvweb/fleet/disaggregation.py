"""Prefill/decode disaggregation (issue 28, part 2): a prefill pool and a decode pool of SGLang or
vLLM V1 replicas, the KV of each prefilled request moved between them over a link.

A request is routed to a prefill replica (the router named), which serves it with one output
token (with images, vLLM V1: its encoder computes them, or with an encode pool they come from there:
fleet/encode_pool.py; the decode replica reserves the prompt's blocks hashed with the images' mm
hashes, as the request it takes hashes them). When that token is out (t1) a decode replica is chosen (least outstanding requests) and
reserves the request's KV before the transfer (`reserve`), as SGLang's decode server does
(DecodePreallocQueue) and vLLM's NIXL connector (blocks allocated for the remote KV): here the
prompt's KV is entered in its prefix cache at once (SGLang: every token; vLLM: whole blocks). The
transfer leaves over the prefill replica's link (`SharedLink`: each GPU of the tensor-parallel
group sends its share over its own NIC, and the transfers leaving the replica at once share the
bandwidth equally); at t2, its last byte over plus the latency, the decode replica takes the
request with the prompt cached and the first token still to compute, and decodes the rest.

Contention: one link per prefill replica, not one per prefill-decode pair nor one for the whole
fleet. A prefill batch finishes many prompts at the same step and all their KV leaves the same
NICs together: that is where transfers wait for each other. Past the NICs the fabric is taken to
be non-blocking (a rail-optimised RDMA network), and a decode replica's NICs to keep up with what
it receives (several prefill replicas may send to one at once: not modelled).

TTFT is t2 - arrival: SGLang's decode server streams the first token, which the prefill server
sent along with the KV, once the transfer is done (vLLM's proxy discards the prefill's token and
its decode step makes it again, a step later). TPOT is the decode side's: (finish - t2) /
(output - 1). A one-token answer never leaves its prefill replica. A later chat turn arrives
after the turn it follows finished on its decode replica.

Defaults: 50 GB/s per GPU, one 400 Gb/s RDMA NIC (InfiniBand NDR or RoCE, ConnectX-7 class: one
per GPU in DGX H100 / H200 systems), the link Mooncake and SGLang's PD deployments move KV over;
10 us latency: RDMA's few microseconds one way, plus a transfer's setup, rounded up.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kvweb.fleet.fleet import NO_THINK_STEP_S, Replica
from kvweb.fleet.routers import ROUTERS, lowest
from kvweb.serving.load.arrivals import Arrivals, why_refused
from kvweb.serving.loop.continuous_batching import ContinuousBatching
from kvweb.serving.loop.metrics import SLO, distribution
from kvweb.serving.memory.prefix_caching import chain_hashes
from kvweb.serving.schedulers.radix_scheduler import RadixScheduler
from kvweb.serving.loop.sequence import TOKEN_BASE
from kvweb.serving.schedulers.v1_scheduler import V1Scheduler
from kvweb.serving.load.workload import Image, Request
from kvweb.serving.memory.encoder_cache import image_block_keys

if TYPE_CHECKING:
    from kvweb.fleet.encode_pool import EncodePool

LINK_GB_S = 50.0
LINK_LATENCY_US = 10.0


@dataclass(frozen=True)
class Link:
    """A prefill GPU's KV link (its NIC): bandwidth and the latency each transfer pays once."""

    gb_s: float = LINK_GB_S
    latency_us: float = LINK_LATENCY_US


class SharedLink:
    """One prefill replica's link: the transfers in flight share its bandwidth equally (one alone
    has all of it), each arriving its latency after its last byte left. Bytes are per GPU of the
    group (each GPU sends its share over its own NIC at once). Transfers start in time order."""

    def __init__(self, link: Link, bytes_per_token: int) -> None:
        self.rate, self.latency, self.per_token = link.gb_s * 1e9, link.latency_us * 1e-6, bytes_per_token
        self.t = 0.0
        self.left: dict[int, float] = {}  # request id -> bytes still to send

    def send(self, t: float, request: int, tokens: int) -> list[tuple[float, int]]:
        """Start moving a request's `tokens` of KV at t; (arrival, request id) of each transfer
        done by then."""
        done = self.run(t)
        self.left[request] = float(tokens * self.per_token)
        return done

    def run(self, until: float) -> list[tuple[float, int]]:
        """Move bytes up to time `until`; (arrival, request id) of each transfer whose last byte left."""
        done = []
        while self.left:
            least = min(self.left.values())
            end = self.t + least * len(self.left) / self.rate
            if end > until:
                break
            self.t = end
            for k, v in list(self.left.items()):
                if v == least:
                    del self.left[k]
                    done.append((end + self.latency, k))
                else:
                    self.left[k] = v - least
        if until > self.t:
            if self.left:
                sent = (until - self.t) * self.rate / len(self.left)
                self.left = {k: v - sent for k, v in self.left.items()}
            self.t = until
        return done


@dataclass
class SplitRun:
    """Per request (id): arrival, TTFT and TPOT seconds and output tokens; the rejections; and
    each transfer's seconds."""

    served: dict[int, tuple[float, float, float, int]]
    rejected: list[tuple[Request, str]]
    transfers: list[float]
    end: float
    reserved_short: int  # transfers whose decode replica had no free slots to reserve (prefilled again there)
    encode: dict[str, Any] | None = None  # the encode pool's figures (None: no encode replicas)

    def figures(self, slo: SLO, gpus: int) -> dict[str, Any]:
        ttfts = [v[1] for v in self.served.values()]
        tpots = [v[2] for v in self.served.values()]
        met = sum(1 for a, b in zip(ttfts, tpots) if a <= slo.ttft_s and b <= slo.tpot_s)
        submitted = len(ttfts) + len(self.rejected)
        return {
            "fleet": "disaggregated",
            "gpus": gpus,
            "ttft_s": distribution(ttfts),
            "tpot_s": distribution(tpots),
            "slo_attainment": met / submitted if submitted else 0.0,
            "throughput_tok_s": sum(v[3] for v in self.served.values()) / self.end if self.end > 0 else 0.0,
            "finished": len(ttfts),
            "rejected": len(self.rejected),
            "transfer_s": distribution(self.transfers),
            "reserved_short": self.reserved_short,
            **({"encode": self.encode} if self.encode is not None else {}),
        }


def content(req: Request) -> np.ndarray:
    """The request's token ids (`Seq.content`'s, made here when it carries none)."""
    if req.tokens is not None:
        return np.asarray(req.tokens, dtype=np.int64)
    return np.arange(req.prompt + req.output, dtype=np.int64) + TOKEN_BASE * (req.id + 1)


def reserve(engine: ContinuousBatching, tokens: np.ndarray, prompt: int, images: Sequence[Image] = ()) -> bool:
    """Hold a prompt's KV on a decode replica before it arrives: entered in its prefix cache, where
    the request finds it (SGLang: slots for every token in the radix cache; vLLM V1: the prompt's
    whole blocks, hashed with its images' mm hashes, its partial last block computed again there).
    False: no room."""
    if isinstance(engine, RadixScheduler):
        slots = engine.tree.alloc(prompt)
        if slots is not None:
            engine.tree.insert(tokens[:prompt], slots)
        return slots is not None
    assert isinstance(engine, V1Scheduler) and engine.width == 1, "SGLang or vLLM V1 on one KV cache group"
    pool, full = engine.pool, prompt // engine.bs
    if len(pool.free) < full:
        return False
    hashes: list = []
    extra = image_block_keys(images, engine.bs) if images else None
    chain_hashes(tokens, engine.bs, hashes, full, extra=extra)
    blocks = pool.take(full)
    pool.register(blocks, hashes, 0, full)
    pool.release(blocks)  # cached and free until the request takes them, as SGLang's slots are
    return True


def serve_split(
    requests: list[Request],
    make: Callable[[], ContinuousBatching],
    prefill: int,
    decode: int,
    router: str,
    link: Link,
    encode: EncodePool | None = None,
) -> SplitRun:
    """Serve `requests` on `prefill` + `decode` replicas of `make()`, SGLang or vLLM V1 (see the
    module docstring; with an encode pool, a request with images reaches the prefill pool once its
    embeddings arrived: fleet/encode_pool.py)."""
    pre = [Replica(make()) for _ in range(prefill)]
    dec = [Replica(make()) for _ in range(decode)]
    chooser = ROUTERS[router](prefill)
    links = [SharedLink(link, pre[0].engine.cost.kv_bytes_per_token_per_gpu) for _ in pre]
    arrivals = Arrivals(requests)
    by_id = {r.id: r for r in requests}
    think = min((r.delay for r in requests if r.after is not None), default=float("inf"))
    step = max(think, NO_THINK_STEP_S)
    transfers: list[tuple[float, int, int]] = []  # (t2, request id, decode replica), once known
    sending: dict[int, tuple[float, int, float]] = {}  # request id -> (t1, decode replica, arrival), in flight
    first: dict[int, tuple[float, float]] = {}  # request id -> (arrival, t2)
    served: dict[int, tuple[float, float, float, int]] = {}
    rejected: list[tuple[Request, str]] = []
    seconds: list[float] = []
    short, clock = 0, 0.0

    def arrived(done: list[tuple[float, int]]) -> None:
        """Transfers whose KV is over: their decode replica takes them at t2."""
        for t2, i in done:
            t1, k, arrival = sending.pop(i)
            seconds.append(t2 - t1)
            first[i] = (arrival, t2)
            heapq.heappush(transfers, (t2, i, k))

    def prefill_only(request: Request, at: float | None = None) -> None:
        """Send `request` to the prefill pool for its first token (at its arrival, or at `at` with
        its images' embeddings, which the replica chosen then loads: `EncoderCache.receive`)."""
        one = Request(request.id, request.arrival, request.prompt, 1, request.tokens, images=request.images)
        chosen = pre[chooser.route(one if at is None else one.arriving(at), pre)]
        chosen.sent += 1
        for image in request.images if at is not None else ():
            chosen.engine.encoder.receive(image)
        chosen.engine.submit(one, at)

    while True:
        encoding = encode is not None and encode.busy()
        busy = encoding or transfers or sending or any(r.outstanding() for r in pre + dec)
        until = min(arrivals.next_t, clock + step) if busy else arrivals.next_t
        for at, request in encode.run(until) if encoding else ():
            for r in pre:
                r.engine.advance(at)
            prefill_only(request, at)
        more = [r.engine.advance(until) for r in pre]
        for r, line in zip(pre, links):
            e = r.engine
            for seq in e.finished[r.seen_finished :]:
                req = by_id[seq.id]
                if req.output == 1:
                    served[seq.id] = (seq.req.arrival, seq.first_token_t - seq.req.arrival, 0.0, 1)
                    arrivals.finished(seq.id, seq.finish_t)
                    continue
                k = lowest([d.outstanding() for d in dec])
                if not reserve(dec[k].engine, content(req), req.prompt, req.images):
                    short += 1  # no room to reserve: the decode replica computes the prompt itself
                sending[seq.id] = (seq.finish_t, k, seq.req.arrival)  # a later turn's, set when it was sent
                arrived(line.send(seq.finish_t, seq.id, req.prompt))
            r.seen_finished = len(e.finished)
            arrived(line.run(until))
        while transfers and transfers[0][0] <= until:
            t2, i, k = heapq.heappop(transfers)
            dec[k].engine.advance(t2)
            req = by_id[i]
            dec[k].sent += 1
            dec[k].engine.submit(Request(i, t2, req.prompt + 1, req.output - 1, content(req), images=req.images))
        more += [r.engine.advance(until) for r in dec]
        for r in dec:
            e = r.engine
            for seq in e.finished[r.seen_finished :]:
                arrival, t2 = first[seq.id]
                out = seq.req.output + 1
                served[seq.id] = (arrival, t2 - arrival, (seq.finish_t - t2) / (out - 1), out)
                arrivals.finished(seq.id, seq.finish_t)
            r.seen_finished = len(e.finished)
        if arrivals.next_t == float("inf") and not transfers and not sending and not any(more):
            if not (encode is not None and encode.busy()):
                break
        clock = until
        while arrivals.next_t <= clock:
            request = arrivals.pop()
            why = why_refused(request, pre[0].engine.max_len, pre[0].engine.never_fits)  # as a decode replica would
            if why:
                rejected += arrivals.refused(request, why)
                continue
            if encode is not None and request.images:
                encode.submit(request)
            else:
                prefill_only(request)
    end = max(r.engine.now for r in pre + dec)
    return SplitRun(served, rejected, seconds, end, short, encode.figures() if encode is not None else None)
