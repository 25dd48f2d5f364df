"""Fleet: N replicas on one simulated clock behind one router (issue 28, part 1).

Every replica is one of the schedulers (`ContinuousBatching`), started with no requests. At each
arrival the fleet advances every replica to that time, reads each one through a `Replica` view
(`ReplicaView`), lets the router `decide` and `submit`s the request to the replica chosen. The
conversation of a multi-turn workload is the fleet's: a later turn arrives when its previous turn
finished, wherever that ran, and goes through the router like any request. So that no replica
runs past a turn that has not arrived yet, the fleet advances in steps no longer than the
shortest think time, while any request is in the fleet (a turn sent less than `NO_THINK_STEP_S`
after its answer is routed at the end of a step that long, and waits for it). With one replica
this is the single engine, exactly.

`serve` returns each replica's run, every rejection (a replica's, and the later turns of its
conversation), the decisions with their regret, and each replica's load, queue and prefix hit
rate over time (sampled at every arrival, read at `SAMPLES` points); `figures` makes the fleet's
figures from the union of the requests with `metrics.summarize`. With an encode pool
(fleet/encode_pool.py), a request with images goes there first and reaches the router when its
embeddings have arrived; its TTFT counts from its arrival at the fleet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kvweb.fleet.regret import Decision, decide
from kvweb.fleet.replica_view import Adapters
from kvweb.fleet.routers import ROUTERS
from kvweb.lab import Progress, no_progress
from kvweb.serving.load.arrivals import Arrivals, why_refused
from kvweb.serving.loop.continuous_batching import ContinuousBatching, prefix_figures
from kvweb.serving.loop.metrics import SLO, distribution, summarize
from kvweb.serving.memory.paged_memory import BLOCK_SIZE
from kvweb.serving.loop.sequence import ScheduledRun
from kvweb.serving.load.workload import Image, Request

if TYPE_CHECKING:
    from kvweb.fleet.encode_pool import EncodePool

MAX_REPLICAS = 32
SAMPLES = 100  # points of each replica's series over time
NO_THINK_STEP_S = 0.01  # the fleet's shortest step (a later turn sent sooner after its answer waits for it)


class Replica:
    """One replica's scheduler and what the fleet sent it; the router's `ReplicaView` of it."""

    def __init__(self, engine: ContinuousBatching) -> None:
        self.engine = engine
        self.sent = 0
        self.seen_finished = 0  # the engine's finished requests and rejections the fleet has read
        self.seen_rejected = 0
        engine.start([])

    def outstanding(self) -> int:
        return self.sent - len(self.engine.finished) - len(self.engine.rejected)

    def computing(self) -> list[Any]:
        """Requests in the batch still prefilling (vLLM V1's prefilling, SGLang's chunked one)."""
        e = self.engine
        chunked = getattr(e, "chunked", None)
        return [*getattr(e, "prefilling", ()), *([chunked] if chunked is not None else [])]

    def waiting(self) -> int:
        return self.outstanding() - len(self.engine.running) - len(self.computing())

    def prefix_match(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        return self.engine.cached_prefix(tokens, adapter, images)

    def prefill_tokens(self) -> int:
        e = self.engine
        queued = sum(r.prompt for r in e.arrivals.queued()) + sum(s.req.prompt for s in e.waiting)
        return queued + sum(s.tokens_to_compute - s.computed for s in self.computing())

    def decode_blocks(self) -> int:
        """Blocks of 16 tokens held by running requests (SGLang's token slots counted so too)."""
        return -(-self.engine.occupied // BLOCK_SIZE)

    def adapters(self) -> Adapters | None:
        slots = getattr(self.engine, "adapters", None)
        if slots is None:
            return None
        e = self.engine
        waiting = {s.req.adapter for s in e.waiting} | {r.adapter for r in e.arrivals.queued()}
        loaded = frozenset(slots.resident) - {0}  # (SGLang's base model holds a slot, and no adapter to evict)
        return Adapters(loaded, frozenset(slots.users), frozenset(waiting), slots.config.max_loras)

    def adapter_figures(self) -> dict[str, Any] | None:
        """The adapters loaded over the host link and their seconds, and those in slots at the end."""
        slots = getattr(self.engine, "adapters", None)
        if slots is None:
            return None
        return {"loads": slots.loads, "load_s": slots.load_s, "in_slots": sorted(a for a in slots.resident if a)}

    def hit_rate(self) -> float:
        e = self.engine
        return e.hit_tokens / e.prompt_tokens if e.prompt_tokens else 0.0


@dataclass
class FleetRun:
    router: str
    runs: list[ScheduledRun]  # each replica's
    rejected: list[tuple[Request, str]]  # every rejection: by a replica, or its conversation ended there
    decisions: list[Decision]  # in routing order
    samples: list[tuple[float, list[int], list[int], list[float]]]  # (t, outstanding, waiting, hit rate) per replica
    adapters: list[dict[str, Any]] | None = None  # each replica's LoRA loads (None: no adapter slots)
    encode: dict[str, Any] | None = None  # the encode pool's figures (None: no encode replicas)

    def merged(self) -> ScheduledRun:
        """The fleet as one run: the union of the requests, sums of the replicas' work and memory
        (fractions then read against the fleet's capacity over the longest replica's time)."""
        runs = self.runs
        total = lambda name: sum(getattr(r, name) for r in runs)  # noqa: E731
        return ScheduledRun(
            sequences=sorted((s for r in runs for s in r.sequences), key=lambda s: s.id),
            rejected=self.rejected,
            sim_time=max(r.sim_time for r in runs),
            steps=total("steps"),
            batch_sum=total("batch_sum"),
            occupied_s=total("occupied_s"),
            used_s=total("used_s"),
            capacity=total("capacity"),
            preemptions=total("preemptions"),
            recomputed_tokens=total("recomputed_tokens"),
            swapped_bytes=total("swapped_bytes"),
            generated=total("generated"),
            stopped_early=any(r.stopped_early for r in runs),
            trace={},
            itl=np.concatenate([np.asarray(r.itl, dtype=float).reshape(-1, 2) for r in runs]),
            max_batch=max(r.max_batch for r in runs),
            prompt_tokens=total("prompt_tokens"),
            hit_tokens=total("hit_tokens"),
            resumed_hit_tokens=total("resumed_hit_tokens"),
            cached_s=total("cached_s"),
            end_occupied=total("end_occupied"),
            end_cached=total("end_cached"),
            outside_s=max(r.outside_s for r in runs),
        )

    def served_by(self) -> dict[int, int]:
        """Request id -> the replica that finished it."""
        return {s.id: i for i, run in enumerate(self.runs) for s in run.sequences}

    def regret(self) -> dict[str, Any]:
        """Prefix tokens another replica had cached beyond the chosen one's, per decision."""
        regrets = [d.regret for d in self.decisions]
        return {
            "decisions": len(regrets),
            "total_tokens": sum(regrets),
            "share_with_regret": sum(1 for r in regrets if r > 0) / len(regrets) if regrets else 0.0,
            "tokens": distribution([float(r) for r in regrets]),
            "reasons": {
                k: sum(1 for d in self.decisions if d.reason == k) for k in sorted({d.reason for d in self.decisions})
            },
        }

    def series(self) -> dict[str, Any]:
        """Each replica's outstanding requests, queue and prefix hit rate at `SAMPLES` evenly
        spaced times to the end of the run (the last sample at or before each)."""
        end = max(r.sim_time for r in self.runs)
        times = [s[0] for s in self.samples]
        grid = np.linspace(0.0, end, SAMPLES).tolist() if end > 0 else [0.0]
        at = [max(int(np.searchsorted(times, g, side="right")) - 1, 0) for g in grid]
        n = len(self.runs)
        pick = lambda k: [[self.samples[j][k][i] for j in at] for i in range(n)]  # noqa: E731
        return {"t": grid, "outstanding": pick(1), "waiting": pick(2), "hit_rate": pick(3)}

    def figures(self, slo: SLO) -> dict[str, Any]:
        """The fleet's figures (the union of the requests), each replica's, the regret and the series."""
        run = self.merged()
        per = [
            {
                "finished": len(r.sequences),
                "prefix_hit_rate": prefix_figures(r)["prefix_hit_rate"],
                "generated_tokens": r.generated,
                "preemptions": r.preemptions,
                "sim_time_s": r.sim_time,
            }
            for r in self.runs
        ]
        loras = {}
        if self.adapters is not None:
            for figures, slots in zip(per, self.adapters):
                figures["lora"] = slots
            loras = {"adapter_loads": sum(a["loads"] for a in self.adapters)}
        return {
            "router": self.router,
            **summarize(run, slo),
            **prefix_figures(run),
            **loras,
            "max_batch": run.max_batch,
            "replicas": per,
            "regret": self.regret(),
            "series": self.series(),
            **({"encode": self.encode} if self.encode is not None else {}),
        }


def serve(
    requests: list[Request],
    make: Callable[[], ContinuousBatching],
    replicas: int,
    router: str,
    progress: Progress = no_progress,
    encode: EncodePool | None = None,
) -> FleetRun:
    """Serve `requests` on `replicas` copies of `make()` behind the router named `router` (with an
    encode pool, a request with images reaches the router once its embeddings arrived:
    fleet/encode_pool.py)."""
    fleet = [Replica(make()) for _ in range(replicas)]
    chooser = ROUTERS[router](replicas)
    arrivals = Arrivals(requests)
    think = min((r.delay for r in requests if r.after is not None), default=float("inf"))
    step = max(think, NO_THINK_STEP_S)
    rejected: list[tuple[Request, str]] = []
    decisions: list[Decision] = []
    samples: list[tuple[float, list[int], list[int], list[float]]] = []
    clock, total = 0.0, len(requests)

    def route(request: Request, at: float | None = None) -> None:
        """Route `request` now (at its arrival, or at `at` with its images' embeddings) and send it."""
        decision = decide(chooser, request if at is None else request.arriving(at), fleet)
        decisions.append(decision)
        chosen = fleet[decision.replica]
        chosen.sent += 1
        for image in request.images if at is not None else ():
            chosen.engine.encoder.receive(image)
        chosen.engine.submit(request, at)
        samples.append(
            (
                request.arrival if at is None else at,
                [r.outstanding() for r in fleet],
                [r.waiting() for r in fleet],
                [r.hit_rate() for r in fleet],
            )
        )
        if len(decisions) % 64 == 0:
            progress(min(len(decisions) / total, 1.0), f"{len(decisions)} requests routed")

    while True:
        # no request in the fleet: nothing can finish and send a later turn before the next arrival
        encoding = encode is not None and encode.busy()
        busy = encoding or any(r.outstanding() for r in fleet)
        until = min(arrivals.next_t, clock + step) if busy else arrivals.next_t
        for at, request in encode.run(until) if encoding else ():
            for r in fleet:
                r.engine.advance(at)
            route(request, at)
        more = [r.engine.advance(until) for r in fleet]
        for r in fleet:  # what finished releases later turns; what was rejected ends its conversation
            e = r.engine
            for seq in e.finished[r.seen_finished :]:
                arrivals.finished(seq.id, seq.finish_t)
            r.seen_finished = len(e.finished)
            for req, why in e.rejected[r.seen_rejected :]:
                rejected += arrivals.refused(req, why)
            r.seen_rejected = len(e.rejected)
        if arrivals.next_t == float("inf") and not any(more) and not (encode is not None and encode.busy()):
            break  # every request served or rejected, and no turn is still to come
        clock = until
        while arrivals.next_t <= clock:
            request = arrivals.pop()
            if encode is None or not request.images:
                route(request)
                continue
            why = why_refused(request, fleet[0].engine.max_len, fleet[0].engine.never_fits)  # as a replica would
            if why:  # refused before the encode pool, as a split refuses it before its prefill pool
                rejected += arrivals.refused(request, why)
            else:
                encode.submit(request)
    end = max(r.engine.now for r in fleet)
    samples.append((end, [r.outstanding() for r in fleet], [r.waiting() for r in fleet], [r.hit_rate() for r in fleet]))
    adapters = [a for a in (r.adapter_figures() for r in fleet) if a is not None] or None
    encoded = encode.figures() if encode is not None else None
    return FleetRun(router, [r.engine.result() for r in fleet], rejected, decisions, samples, adapters, encoded)
