"""The one continuous-batching loop: requests arrive, each iteration runs one batch, requests leave.

`ContinuousBatching` owns what does not depend on the scheduler: arrivals (later chat turns
come when the turn they follow has finished), rejection of requests that can never run, the
clock, first tokens and finishes, SLO misses, time-weighted memory figures, the inter-token
latencies, the tokens generated and the animation trace. A scheduler (`paper_scheduler`, the
papers' engine; `v1_scheduler`; `radix_scheduler`) implements `_iterate`: it builds one batch,
changes its KV memory and returns the batch's cost, so its file reads as its rules.

No per-token work for decoding requests: a decoding request's KV grows by one token in every
iteration that decodes, so its length is a function of the decode counter (kept as a base
count and a base length, `Sequence`: sequence.py holds the loop's data), and the counter value
at which it finishes is known when it starts decoding.

Most iterations are quiet: they only decode. A scheduler runs those without the general path
(`_quiet_run`, one by one in a tight loop) and long stretches of them as arrays (`_quiet_plan`),
each in a module of its own beside its rules (`paper_quiet.py`, `v1_quiet.py`, `radix_quiet.py`),
with every figure the same to the last bit (tests/test_speed_exact.py and
tests/test_speed_exact_schedulers.py compare them with the run that takes every iteration
through `_iterate`, as an observer makes it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.lab import Progress, no_progress
from kvweb.serving.load.arrivals import Arrivals, why_refused
from kvweb.serving.loop.engine_trace import TraceRecorder
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.loop.scheduler_interface import SchedulerInterface
from kvweb.serving.loop.sequence import Run, ScheduledRun, Seq, Tally
from kvweb.serving.loop.step_cost import decode_coefficients
from kvweb.serving.load.workload import Request

# Memory-map owners besides request ids: cached KV nobody holds (reusable), free memory, and
# KV running requests read from the prefix cache (blocks they hit or share, locked tree nodes);
# in a KV cache group's map of a pool every group shares (`group_maps`), another group's memory;
# and blocks a running request holds ahead of its KV (speculative decoding's slots: spec_decode.py).
CACHED, FREE, SHARED, OTHER, AHEAD = -2, -1, -3, -4, -5
NOTHING: list = []  # an iteration in which no request got its first token (never appended to)


def prefix_figures(run: Run) -> dict[str, Any]:
    """What the prefix cache did in a run (all zero for the papers' engine, which has none):
    the share of first-admission prompt tokens found cached, the tokens a preempted request
    found again, and the reusable cache nobody held, time-averaged, as a share of the KV capacity;
    and at the end of the run the memory requests still held (what vLLM's KV cache usage reads:
    cached blocks nobody holds count as free) beside the cache kept for later requests."""
    prompt = getattr(run, "prompt_tokens", 0)
    hits = getattr(run, "hit_tokens", 0)
    span = run.sim_time * run.capacity
    return {
        "prefix_hit_rate": hits / prompt if prompt else 0.0,
        "hit_tokens": hits,
        "prompt_tokens": prompt,
        "resumed_hit_tokens": getattr(run, "resumed_hit_tokens", 0),
        "cached_frac": getattr(run, "cached_s", 0.0) / span if span else 0.0,
        "end_usage_frac": getattr(run, "end_occupied", 0) / run.capacity if run.capacity else 0.0,
        "end_cached_frac": getattr(run, "end_cached", 0) / run.capacity if run.capacity else 0.0,
    }


Observer = Callable[["ContinuousBatching", int], None]


class ContinuousBatching(SchedulerInterface):
    """Base of the schedulers: see the module docstring. What a scheduler implements is
    `SchedulerInterface` (scheduler_interface.py); this class is the loop that calls it."""

    quiet_array = 48  # quiet stretches at least this long run as arrays (numpy calls cost more in Pyodide)

    # The loop's state in slots, the schedulers' own in their instance dicts: CPython 3.11 reads an
    # attribute of an object with more than 30 in its dict about a third slower (its keys are no
    # longer shared), and every iteration reads dozens (see docs/engine.md).
    __slots__ = (
        "cost",
        "max_len",
        "max_seqs",
        "slo",
        "give_up_after",
        "coef",
        "weights",
        "running",
        "waiting",
        "finish_at",
        "finished",
        "rejected",
        "arrivals",
        "now",
        "step",
        "dstep",
        "kv_tokens",
        "preempted",
        "preemptions",
        "recomputed_tokens",
        "swapped_bytes",
        "generated",
        "prompt_tokens",
        "hit_tokens",
        "resumed_hit_tokens",
        "misses",
        "decoded",
        "joined",
        "trace",
        "tally",
        "stopped",
        "__dict__",
    )

    def __init__(
        self, cost: CostModel, max_len: int, max_seqs: int, slo: SLO = SLO(), give_up_after: int | None = None
    ) -> None:
        self.cost = cost
        self.max_len = max_len
        self.max_seqs = max_seqs
        self.slo = slo
        self.give_up_after = give_up_after
        self.coef = decode_coefficients(cost)
        self.weights = self.coef[3]
        self.running: dict[int, Seq] = {}  # decoding, in the order they (re)started
        self.waiting: deque[Seq] = deque()
        self.finish_at: dict[int, list[Seq]] = {}  # decode count -> who finishes then
        self.finished: list[Seq] = []
        self.rejected: list[tuple[Request, str]] = []
        self.arrivals = Arrivals([])
        self.now = 0.0
        self.step = 0
        self.dstep = 0  # iterations that decoded: a decoding request's clock
        self.kv_tokens = 0  # KV held by decoding requests after the last decode
        self.preempted = 0  # of the waiting requests, how many were preempted
        self.preemptions = 0
        self.recomputed_tokens = 0
        self.swapped_bytes = 0  # KV moved over the host link (the papers' engine's swap)
        self.generated = 0  # tokens sampled by requests that (re)started; the loop adds the decoded ones
        self.prompt_tokens = 0
        self.hit_tokens = 0
        self.resumed_hit_tokens = 0
        self.misses = 0
        self.decoded = 0  # requests that decoded in the last iteration (set by `_iterate`)
        self.joined = 0  # requests that got a token in the last iteration and decode next
        self.trace: TraceRecorder | None = None
        self.tally = Tally(0, no_progress, None, float("inf"))
        self.stopped = False  # gave up: more than `give_up_after` requests missed the SLO

    # -- bookkeeping the schedulers call ---------------------------------------
    def _event(self, kind: str, seq: Seq) -> None:
        if self.trace is not None:
            self.trace.event(self.now, kind, seq.id)

    def _admitted(self, seq: Seq, hit: int) -> None:
        """A waiting request starts (or restarts) computing, with `hit` tokens from the cache."""
        seq.hit = hit
        if not seq.spans:
            self.prompt_tokens += seq.req.prompt
            self.hit_tokens += hit
        else:
            self.resumed_hit_tokens += hit
            self._event("recompute", seq)
        seq.spans.append([self.now, 0.0])

    def _sampled(self, seq: Seq, fresh: list[Seq]) -> None:
        """seq computed all its tokens in this iteration and samples one: it decodes from now on,
        or leaves at the end of the iteration if that was its last."""
        if seq.gen0 == 0:
            fresh.append(seq)
        seq.gen0 += 1
        self.generated += 1
        seq.step0, seq.kv0 = self.dstep, seq.computed
        self.running[seq.id] = seq
        self.kv_tokens += seq.computed
        self.finish_at.setdefault(self.dstep + seq.req.output - seq.gen0, []).append(seq)
        self.joined += seq.gen0 < seq.req.output

    def _stop_decoding(self, seq: Seq) -> int:
        """Take a decoding request out of the batch (before this iteration decodes); returns the
        KV it holds."""
        del self.running[seq.id]
        self.finish_at[seq.step0 + seq.req.output - seq.gen0].remove(seq)
        seq.computed = seq.kv(self.dstep)
        seq.gen0 = seq.generated(self.dstep)
        self.kv_tokens -= seq.computed
        return seq.computed

    def _preempt(self, seq: Seq, kind: str = "preempt") -> None:
        """seq (out of the batch, `computed` = the KV it holds) leaves the GPU: "preempt" drops its
        KV, to be recomputed; "swap_out" has moved it to the host (the papers' engine). The scheduler
        puts it back in a queue. The event comes first: it draws the memory the request frees."""
        self._event(kind, seq)
        self._release(seq, finished=False)
        if kind == "preempt":
            self.recomputed_tokens += seq.computed
        seq.computed = 0
        seq.spans[-1][1] = self.now
        self.preemptions += 1
        self.preempted += 1

    def _finish(self, seq: Seq) -> None:
        del self.running[seq.id]
        seq.computed = seq.kv(self.dstep)
        seq.gen0 = seq.req.output
        self.kv_tokens -= seq.computed
        self._release(seq, True)
        self.misses += seq.leave(self.now, self.slo.tpot_s)
        self.finished.append(seq)
        self.arrivals.finished(seq.id, self.now)

    def _submit(self, req: Request) -> None:
        why = why_refused(req, self.max_len, self.never_fits)
        if why:
            gone = self.arrivals.refused(req, why)
            self.rejected += gone
            self.misses += len(gone)
        else:
            self.waiting.append(self.seq_type(req))

    # -- the loop ------------------------------------------------------------
    def run(
        self,
        requests: list[Request],
        progress: Progress = no_progress,
        observer: Observer | None = None,
        trace: TraceRecorder | None = None,
    ) -> ScheduledRun:
        """Serve `requests` to the end; `observer(self, step)` is called after every iteration."""
        self.start(requests, progress, observer, trace)
        self.advance()
        return self.result()

    def start(
        self,
        requests: list[Request],
        progress: Progress = no_progress,
        observer: Observer | None = None,
        trace: TraceRecorder | None = None,
    ) -> None:
        """Take `requests` (once, on a new scheduler); `advance` then serves them, so that several
        engines on one simulated clock can advance in turn, and `result` says what the run produced."""
        self.trace = trace
        self.arrivals = Arrivals(requests)
        self.tally = Tally(len(requests), progress, observer, trace.next_t if trace else float("inf"))

    def submit(self, request: Request, at: float | None = None) -> None:
        """Give a started run one more request (a fleet's router sends it at its arrival time, or at
        `at`, to a replica already advanced that far)."""
        self.arrivals.add(request, at)
        self.tally.total += 1

    def advance(self, until: float = float("inf"), iterations: int = -1) -> bool:
        """Run the iterations that start before `until` seconds (at most `iterations` of them, each
        through `_iterate`, when that is not negative); returns whether the run has more to do
        (False: every request is done, or the run gave up). Where it stops changes no figure: the
        quiet stretches (`_quiet_run`) end there as they end at a trace sample."""
        tally = self.tally
        total, progress, observer = tally.total, tally.progress, tally.observer
        steps, batch_sum, max_batch, decode_tokens = tally.steps, tally.batch_sum, tally.max_batch, tally.decode_tokens
        occupied_s, used_s, cached_s = tally.occupied_s, tally.used_s, tally.cached_s
        sample_t, last_decode = tally.sample_t, tally.last_decode
        itl_s, itl_n, joins = tally.itl_s, tally.itl_n, tally.joins
        trace, arrivals = self.trace, self.arrivals
        give_up = float("inf") if self.give_up_after is None else self.give_up_after
        running, waiting, finish_at, ttft_s = self.running, self.waiting, self.finish_at, self.slo.ttft_s
        step_times, step_itl = self.cost.step_times, self.itl_is_step_time
        # an observer sees every step go through `_iterate`, and so does a count of iterations
        coast = observer is None and iterations < 0
        may_be_quiet = self.may_be_quiet
        more = True
        while True:
            if not (running or waiting or self.busy):
                self._idle()
                if arrivals.next_t == float("inf"):
                    more = False
                    break
                if arrivals.next_t >= until:
                    break
                self.now = max(self.now, arrivals.next_t)
            now = self.now
            if now >= until or iterations == 0:
                break
            if arrivals.next_t <= now:
                while arrivals.next_t <= now:
                    self._submit(arrivals.pop())
                if not (running or waiting or self.busy):
                    continue  # everything that arrived was rejected
            if self.misses > give_up:
                self.stopped = True
                more = False
                break
            if coast and running and not joins and (may_be_quiet is None or may_be_quiet()):
                # Quiet iterations (see `_quiet_run`) up to the next arrival (or `until`) or the next finish
                # (the requests finishing leave after it), with the full iteration's bookkeeping (below) in the
                # same order: long stretches as arrays (`_quiet_plan`; numpy's accumulate adds in order, so
                # every sum is the same to the last bit), short ones one by one.
                stop, next_t = min(finish_at), arrivals.next_t
                if until < next_t:
                    next_t = until
                while self.dstep < stop:
                    limit = min(next_t, sample_t)
                    most = min(stop - self.dstep, 1024 - (steps & 1023))  # and the next progress report
                    plan = None
                    if most >= self.quiet_array:
                        most, plan = self._quiet_plan(most, limit - self.now)
                    if plan is not None:
                        n = len(running)
                        flops, nbytes, occ, use, cache = plan
                        dts = step_times(flops, nbytes)
                        k = len(dts)
                        # the clock and the three time integrals (the third only where something is cached)
                        sums = np.empty((3 if cache is None else 4, k))
                        sums[0] = dts
                        np.multiply(dts, occ, out=sums[1])
                        np.multiply(dts, use, out=sums[2])
                        if cache is None:
                            sums[:, 0] += (self.now, occupied_s, used_s)
                        else:
                            np.multiply(dts, cache, out=sums[3])
                            sums[:, 0] += (self.now, occupied_s, used_s, cached_s)
                        np.add.accumulate(sums, axis=1, out=sums)
                        m = min(int(sums[0].searchsorted(limit)) + 1, k)  # up to the one reaching the limit
                        self._quiet_commit(m)
                        if step_itl:
                            itl_s += dts[:m].tolist()
                        else:
                            times = sums[0, :m]
                            itl_s.append(times[0].item() - last_decode)
                            itl_s += np.diff(times).tolist()
                        itl_n += [n] * m
                        self.now, occupied_s, used_s, *cached = sums[:, m - 1].tolist()
                        if cached:
                            cached_s = cached[0]
                        self.step += m
                    else:
                        if most <= 0:
                            break
                        m, occupied_s, used_s, cached_s = self._quiet_run(
                            most, limit, occupied_s, used_s, cached_s, last_decode, itl_s, itl_n
                        )
                        if not m:
                            break  # the next iteration is not quiet
                    last_decode = now = self.now
                    steps += m
                    decoded = self.decoded
                    batch_sum += decoded * m
                    if decoded > max_batch:
                        max_batch = decoded
                    decode_tokens += decoded * m
                    if self.dstep == stop:  # the last one is the next finish's: they leave, as below
                        for seq in finish_at.pop(stop):
                            self._finish(seq)
                    if now >= sample_t:
                        hit_rate = self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
                        trace.sample(
                            now,
                            self.step,
                            len(self.waiting),
                            self.preempted,
                            decoded,
                            self.used,
                            self,
                            self.cached,
                            hit_rate,
                        )
                        sample_t = trace.next_t
                    if not steps & 1023:
                        progress(
                            len(self.finished) / total, f"{len(self.finished)}/{total} requests done, t = {now:.1f} s"
                        )
                    if now >= next_t:
                        break
                if self.now >= next_t or self.dstep == stop:
                    continue  # submit the arrivals first (or stop at `until`), or look again after a finish
            self.step += 1
            iterations -= 1
            dt, batch, fresh, occupied, used, cached = self._iterate()
            if not batch:
                raise RuntimeError(
                    f"{self.kind} stalled at t={self.now:.3f}s: nothing runs and nothing can be admitted"
                )
            self.now = now = self.now + dt
            steps += 1
            batch_sum += batch
            if batch > max_batch:
                max_batch = batch
            occupied_s += occupied * dt
            used_s += used * dt
            cached_s += cached * dt
            decoded = self.decoded
            decode_tokens += decoded
            if decoded:  # inter-token latency (see metrics): the batch waited since it last decoded
                if step_itl:
                    itl_s.append(dt)
                    itl_n.append(decoded)
                elif joins:  # ... or, for requests that joined since, since their last token
                    old = decoded - sum(c for _, c in joins)
                    if old > 0:
                        itl_s.append(now - last_decode)
                        itl_n.append(old)
                    for t, c in joins:
                        itl_s.append(now - t)
                        itl_n.append(c)
                    joins.clear()
                else:
                    itl_s.append(now - last_decode)
                    itl_n.append(decoded)
                last_decode = now
            if self.joined:
                if not step_itl:
                    joins.append((now, self.joined))
                self.joined = 0
            for seq in fresh:
                seq.first_token_t = now
                if now - seq.req.arrival > ttft_s:
                    seq.missed = True
                    self.misses += 1
            leaving = finish_at.pop(self.dstep, None)
            if leaving:
                for seq in leaving:
                    self._finish(seq)
            if now >= sample_t:
                hit_rate = self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
                trace.sample(
                    now, self.step, len(self.waiting), self.preempted, batch, self.used, self, self.cached, hit_rate
                )
                sample_t = trace.next_t
            if observer is not None:
                observer(self, self.step)
            if not steps & 1023:
                progress(len(self.finished) / total, f"{len(self.finished)}/{total} requests done, t = {now:.1f} s")
        tally.steps, tally.batch_sum, tally.max_batch, tally.decode_tokens = steps, batch_sum, max_batch, decode_tokens
        tally.occupied_s, tally.used_s, tally.cached_s = occupied_s, used_s, cached_s
        tally.sample_t, tally.last_decode = sample_t, last_decode
        return more

    def result(self) -> ScheduledRun:
        """What the run produced so far (at its end: everything)."""
        tally, trace = self.tally, self.trace
        return ScheduledRun(
            sequences=sorted(self.finished, key=lambda s: s.id),
            rejected=self.rejected,
            sim_time=self.now,
            steps=tally.steps,
            batch_sum=tally.batch_sum,
            occupied_s=tally.occupied_s,
            used_s=tally.used_s,
            capacity=self.capacity,
            preemptions=self.preemptions,
            recomputed_tokens=self.recomputed_tokens,
            swapped_bytes=self.swapped_bytes,
            generated=self.generated + tally.decode_tokens,
            stopped_early=self.stopped,
            trace=trace.result() if trace else {},
            prompt_tokens=self.prompt_tokens,
            hit_tokens=self.hit_tokens,
            resumed_hit_tokens=self.resumed_hit_tokens,
            cached_s=tally.cached_s,
            itl=np.column_stack((np.array(tally.itl_s, dtype=float), np.array(tally.itl_n, dtype=float))),
            max_batch=tally.max_batch,
            end_occupied=self.occupied,
            end_cached=self.cached,
            outside_s=self.cost.ttft_outside_s,
        )


# Memory-map cells show the most active state among their units: a running request (the largest
# id), else AHEAD, else SHARED, else CACHED, else FREE, else OTHER (a group's map: a cell wholly
# another group's). Maps are built on keys in that order: an owner id is its own key, the marks
# have the keys -1 (AHEAD) down to -5 (OTHER), and `MARKS` turns a key back into an owner.
K_AHEAD, K_SHARED, K_CACHED, K_FREE, K_OTHER = -1, -2, -3, -4, -5
MARKS = np.array([AHEAD, SHARED, CACHED, FREE, OTHER])  # the owner of key -1 - i


def key_cells(
    unit_tokens: int, per_cell: int, key: np.ndarray, written: np.ndarray
) -> tuple[int, list[int], list[int]]:
    """Cells of `per_cell` units from each unit's key and KV tokens, both padded to whole cells
    (padding: K_FREE, 0). Returns (tokens per cell, owners, percentage of each cell holding KV)."""
    cell_tokens = per_cell * unit_tokens
    if per_cell > 1:
        key = key.reshape(-1, per_cell).max(axis=1)
        written = written.reshape(-1, per_cell).sum(axis=1)
    percent = np.rint(100 * written / cell_tokens).astype(int)
    owner = np.where(key >= 0, key, MARKS[np.clip(-1 - key, 0, len(MARKS) - 1)])
    return cell_tokens, owner.tolist(), percent.tolist()
