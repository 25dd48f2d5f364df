"""Prefill/decode disaggregation (issue 28, part 2): a prefill pool and a decode pool of SGLang
replicas, the KV of each prefilled request moved between them over a link.

A request is routed to a prefill replica (the router named), which serves it with one output
token. When that token is out (t1) a decode replica is chosen (least outstanding requests) and
reserves the request's KV slots before the transfer, as SGLang's decode server does
(DecodePreallocQueue): here the prompt's KV is written into its radix cache at once. The
transfer takes `Link.seconds` (latency + bytes / bandwidth, each GPU of the tensor-parallel
group sending its share over its own NIC); at t2 = t1 + that the decode replica takes the request
with the prompt cached and the first token still to compute, and decodes the rest.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvweb.fleet.fleet import NO_THINK_STEP_S, Replica
from kvweb.fleet.routers import ROUTERS, lowest
from kvweb.gpu import CostModel
from kvweb.serving.arrivals import Arrivals, why_refused
from kvweb.serving.continuous_batching import TOKEN_BASE
from kvweb.serving.metrics import SLO, distribution
from kvweb.serving.radix_scheduler import RadixScheduler
from kvweb.serving.workload import Request

LINK_GB_S = 50.0
LINK_LATENCY_US = 10.0


@dataclass(frozen=True)
class Link:
    """The KV link between a prefill GPU and a decode GPU."""

    gb_s: float = LINK_GB_S
    latency_us: float = LINK_LATENCY_US

    def seconds(self, prompt: int, cost: CostModel) -> float:
        """Moving a prompt's KV: each GPU of the group sends its share, all at once."""
        return self.latency_us * 1e-6 + prompt * cost.kv_bytes_per_token_per_gpu / (self.gb_s * 1e9)


@dataclass
class SplitRun:
    """Per request (id): arrival, TTFT and TPOT seconds and output tokens; the rejections; and
    each transfer's seconds."""

    served: dict[int, tuple[float, float, float, int]]
    rejected: list[tuple[Request, str]]
    transfers: list[float]
    end: float
    reserved_short: int  # transfers whose decode replica had no free slots to reserve (prefilled again there)

    def figures(self, slo: SLO, gpus: int) -> dict[str, Any]:
        ttfts = [v[1] for v in self.served.values()]
        tpots = [v[2] for v in self.served.values()]
        met = sum(1 for a, b in zip(ttfts, tpots) if a <= slo.ttft_s and b <= slo.tpot_s)
        submitted = len(ttfts) + len(self.rejected)
        return {"fleet": "disaggregated", "gpus": gpus, "ttft_s": distribution(ttfts), "tpot_s": distribution(tpots),
                "slo_attainment": met / submitted if submitted else 0.0,
                "throughput_tok_s": sum(v[3] for v in self.served.values()) / self.end if self.end > 0 else 0.0,
                "finished": len(ttfts), "rejected": len(self.rejected), "transfer_s": distribution(self.transfers),
                "reserved_short": self.reserved_short}


def content(req: Request) -> np.ndarray:
    """The request's token ids (`Seq.content`'s, made here when it carries none)."""
    if req.tokens is not None:
        return np.asarray(req.tokens, dtype=np.int64)
    return np.arange(req.prompt + req.output, dtype=np.int64) + TOKEN_BASE * (req.id + 1)


def serve_split(requests: list[Request], make: Callable[[], RadixScheduler], prefill: int, decode: int,
                router: str, link: Link) -> SplitRun:
    """Serve `requests` on `prefill` + `decode` SGLang replicas (see the module docstring)."""
    pre = [Replica(make()) for _ in range(prefill)]
    dec = [Replica(make()) for _ in range(decode)]
    chooser = ROUTERS[router](prefill)
    cost = pre[0].engine.cost
    arrivals = Arrivals(requests)
    by_id = {r.id: r for r in requests}
    think = min((r.delay for r in requests if r.after is not None), default=float("inf"))
    step = max(think, NO_THINK_STEP_S)
    transfers: list[tuple[float, int, int]] = []  # (t2, request id, decode replica)
    first: dict[int, tuple[float, float]] = {}  # request id -> (arrival, t2)
    served: dict[int, tuple[float, float, float, int]] = {}
    rejected: list[tuple[Request, str]] = []
    seconds: list[float] = []
    short, clock = 0, 0.0
    while True:
        busy = transfers or any(r.outstanding() for r in pre + dec)
        until = min(arrivals.next_t, clock + step) if busy else arrivals.next_t
        more = [r.engine.advance(until) for r in pre]
        for r in pre:
            e = r.engine
            for seq in e.finished[r.seen_finished:]:
                req = by_id[seq.id]
                if req.output == 1:
                    served[seq.id] = (seq.req.arrival, seq.first_token_t - seq.req.arrival, 0.0, 1)
                    arrivals.finished(seq.id, seq.finish_t)
                    continue
                k = lowest([d.outstanding() for d in dec])
                tokens = content(req)
                slots = dec[k].engine.tree.alloc(req.prompt)
                if slots is None:
                    short += 1  # no room to reserve: the decode replica computes the prompt itself
                else:
                    dec[k].engine.tree.insert(tokens[:req.prompt], slots)
                s = link.seconds(req.prompt, cost)
                seconds.append(s)
                t2 = seq.finish_t + s
                first[seq.id] = (seq.req.arrival, t2)
                heapq.heappush(transfers, (t2, seq.id, k))
            r.seen_finished = len(e.finished)
        while transfers and transfers[0][0] <= until:
            t2, i, k = heapq.heappop(transfers)
            dec[k].engine.advance(t2)
            req = by_id[i]
            dec[k].sent += 1
            dec[k].engine.submit(Request(i, t2, req.prompt + 1, req.output - 1, content(req)))
        more += [r.engine.advance(until) for r in dec]
        for r in dec:
            e = r.engine
            for seq in e.finished[r.seen_finished:]:
                arrival, t2 = first[seq.id]
                out = seq.req.output + 1
                served[seq.id] = (arrival, t2 - arrival, (seq.finish_t - t2) / (out - 1), out)
                arrivals.finished(seq.id, seq.finish_t)
            r.seen_finished = len(e.finished)
        if arrivals.next_t == float("inf") and not transfers and not any(more):
            break
        clock = until
        while arrivals.next_t <= clock:
            request = arrivals.pop()
            why = why_refused(request, pre[0].engine.max_len, pre[0].engine.never_fits)  # as a decode replica would
            if why:
                rejected += arrivals.refused(request, why)
                continue
            prefill_only = Request(request.id, request.arrival, request.prompt, 1, request.tokens)
            chosen = pre[chooser.route(prefill_only, pre)]
            chosen.sent += 1
            chosen.engine.submit(prefill_only)
    end = max(r.engine.now for r in pre + dec)
    return SplitRun(served, rejected, seconds, end, short)
