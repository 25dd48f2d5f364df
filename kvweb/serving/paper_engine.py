"""The serving engine on the paper GPU (SPEC 3): continuous batching with preemption.

Each step (one iteration of the model):
1. every running sequence grows by one token; if the memory cannot give the blocks that takes,
   the latest-arrived running sequence is preempted with all its blocks, then the next
   latest, until the rest fit (vLLM);
2. preempted work comes back first (FCFS), then new requests are admitted FCFS while memory,
   the batch limit and the prefill budget allow; nothing new is admitted while preempted work
   waits (and a victim never returns in the step that evicted it: it needs more blocks than
   the growth left free);
3. the step costs the roofline time of its prefills plus one decode token for every running
   sequence, plus any swap traffic over the host link;
4. sequences with their full output leave and free their memory.

Requests arrive through serving/arrivals.py: a later chat turn when the answer it follows has
finished. Nothing here walks the batch token by token: a running sequence's length is a function of the
step (kept as a base step and base length), finishing steps are known when a sequence starts,
and the memory manager finds who needs a block this step by phase (see paged_memory).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Protocol

import numpy as np

from kvweb.gpu import CostModel
from kvweb.lab import Progress, no_progress
from kvweb.serving.arrivals import Arrivals, why_refused
from kvweb.serving.engine_trace import TraceRecorder
from kvweb.serving.metrics import SLO
from kvweb.serving.paged_memory import BLOCK_SIZE
from kvweb.serving.step_cost import decode_coefficients
from kvweb.serving.workload import Request


# Quiet stretches longer than this many steps are run in arrays (shorter: a plain loop is quicker).
COAST_ARRAY = 24


class MemoryManager(Protocol):
    """What the engine needs from a KV memory manager (paged or reserved)."""

    kind: str
    capacity: int  # tokens

    @property
    def occupied(self) -> int: ...  # tokens held, written or not

    def never_fits(self, final_kv: int) -> str | None: ...
    def admit(self, seq: Sequence, tokens: int, step: int) -> bool: ...
    def shortfall(self, step: int) -> int: ...
    def grow(self, step: int) -> None: ...
    # quiet steps (nothing but growth): memory occupied after each of steps step+1 .. step+count,
    # up to the last before one that would run short; then the growth of the first n of them
    def occupancy(self, step: int, count: int) -> list[int]: ...
    def grow_through(self, step: int, n: int) -> None: ...
    def free(self, seq: Sequence) -> None: ...
    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]: ...
    def held_cells(self, seq: Sequence, max_cells: int) -> list[int]: ...  # seq's cells in memory_map


class Sequence:
    """A request inside the engine.

    A prefill step writes the KV of every token it processes and yields one output token;
    a decode step writes one token's KV and yields the next. So after any step a sequence
    with g generated tokens holds prompt + g - 1 tokens of KV, and at most
    prompt + output - 1 (`final_kv`). While running, length and output grow by one per step
    from (step0, kv0, gen0).
    """

    __slots__ = ("req", "id", "final_kv", "step0", "kv0", "gen0", "blocks", "phase", "start",
                 "on_host", "first_token_t", "finish_t", "spans", "missed")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.id = req.id
        self.final_kv = req.prompt + req.output - 1
        self.step0 = 0
        self.kv0 = 0
        self.gen0 = 0  # tokens generated so far (while waiting or preempted)
        self.blocks: list[int] = []
        self.phase = 0
        self.start = 0
        self.on_host = False
        self.first_token_t = 0.0
        self.finish_t = 0.0
        self.spans: list[list[float]] = []  # [admitted, left) times on the GPU
        self.missed = False

    def kv(self, step: int) -> int:
        """KV tokens held after `step` (while running)."""
        return self.kv0 + step - self.step0

    def generated(self, step: int) -> int:
        """Output tokens generated after `step` (while running)."""
        return self.gen0 + step - self.step0

    def leave(self, t: float, slo: SLO) -> bool:
        """It finished at time t; whether that made it miss the SLO (its mean time per output token)."""
        self.finish_t = t
        self.spans[-1][1] = t
        if self.missed or self.req.output < 2:
            return False
        self.missed = (t - self.first_token_t) / (self.req.output - 1) > slo.tpot_s
        return self.missed


@dataclass(frozen=True)
class EngineConfig:
    max_len: int  # the model's limit on prompt + output
    preemption: str = "recompute"  # or "swap"
    block_size: int = BLOCK_SIZE  # swap copies whole blocks, paying a per-block overhead
    max_seqs: int = 256  # running sequences per step (vLLM's max_num_seqs)
    max_batch_tokens: int = 0  # prefill tokens per step; 0 means max_len
    host_tokens: int | None = None  # swap space; None means the GPU's KV capacity


@dataclass
class Run:
    """Everything a run produced; metrics.summarize turns it into figures."""

    sequences: list[Sequence]  # finished, by id
    rejected: list[tuple[Request, str]]
    sim_time: float
    steps: int
    batch_sum: int
    occupied_s: float  # token-seconds
    used_s: float
    capacity: int
    preemptions: int
    recomputed_tokens: int
    swapped_bytes: int
    generated: int
    stopped_early: bool
    trace: dict[str, Any] = field(default_factory=dict)
    # (seconds since the batch last decoded, requests that waited that long for their next token),
    # one or more per decoding step: metrics.summarize's inter-token latency. A list of pairs,
    # or (from Engine, which makes hundreds of thousands) the same pairs as an [n, 2] float array.
    itl: list[tuple[float, int]] | np.ndarray = field(default_factory=list)
    max_batch: int = 0  # the most requests one step served: the concurrency reached


Observer = Callable[["Engine", int], None]


class Engine:
    def __init__(self, cost: CostModel, memory: MemoryManager, config: EngineConfig,
                 slo: SLO = SLO(), give_up_after: int | None = None) -> None:
        """`give_up_after`: stop once more than this many requests missed the SLO (a max-rate
        search only needs to know that the target is out of reach)."""
        if config.preemption not in ("recompute", "swap"):
            raise ValueError("preemption must be 'recompute' or 'swap'")
        self.cost = cost
        self.memory = memory
        self.config = config
        self.slo = slo
        self.give_up_after = give_up_after
        self.budget = config.max_batch_tokens or config.max_len
        host = cost.kv_capacity_tokens if config.host_tokens is None else config.host_tokens
        self.host_blocks = host // config.block_size
        self.host_free = self.host_blocks
        self._decode = decode_coefficients(cost)
        self._weights = self._decode[3]
        self.arrivals = Arrivals([])
        self.running: dict[int, Sequence] = {}  # insertion order = arrival order
        self.waiting: deque[Sequence] = deque()  # arrived, never admitted
        self.preempted: deque[Sequence] = deque()  # by arrival; comes back before anything new
        self.finish_at: dict[int, list[Sequence]] = {}
        self.finished: list[Sequence] = []
        self.rejected: list[tuple[Request, str]] = []
        self.now = 0.0
        self.step = 0
        self.kv_tokens = 0  # KV held by running sequences after the last step
        self.preemptions = 0
        self.recomputed_tokens = 0
        self.swapped_bytes = 0
        self.misses = 0
        # The queue's head did not fit and nothing has left since: memory only grows fuller
        # until a sequence leaves, so trying again before that is wasted work.
        self.blocked = False
        self.trace: TraceRecorder | None = None
        if self.budget < config.max_len:
            raise ValueError("max_batch_tokens must be at least max_len, or a long prompt could never start")

    # -- arrival -------------------------------------------------------------
    def _submit(self, req: Request) -> None:
        why = why_refused(req, self.config.max_len, self.memory.never_fits)
        if why:
            gone = self.arrivals.refused(req, why)
            self.rejected += gone
            self.misses += len(gone)
        else:
            self.waiting.append(Sequence(req))

    # -- admission -----------------------------------------------------------
    def _start(self, seq: Sequence, step: int, tokens: int) -> None:
        """seq runs from this step on, holding `tokens` KV tokens after it."""
        seq.step0, seq.kv0, seq.gen0 = step, tokens, seq.gen0 + 1
        self.running[seq.id] = seq
        self.finish_at.setdefault(step + seq.req.output - seq.gen0, []).append(seq)
        seq.spans.append([self.now, 0.0])

    def _admit(self, step: int) -> tuple[int, int, int, int, float, float, float, list[Sequence]]:
        """Bring back preempted work, then admit new requests, FCFS with head-of-line blocking.

        Returns (sequences joined, KV tokens they hold after the step, swapped-in decoders,
        their context, prefill FLOPs, prefill bytes beyond the weights, swap seconds,
        sequences getting their first token).
        """
        mm, cost, bs = self.memory, self.cost, self.config.block_size
        joined = added = decoders = context = 0
        flops = nbytes = swap_s = 0.0
        fresh: list[Sequence] = []
        budget = self.budget
        queue = self.preempted or self.waiting
        while queue:
            seq = queue[0]
            tokens = seq.req.prompt + seq.gen0  # what it holds after this step
            if not seq.on_host and tokens > budget:
                break  # the prefill budget is per step: try again next step
            if len(self.running) >= self.config.max_seqs or not mm.admit(seq, tokens, step):
                self.blocked = True
                break
            queue.popleft()
            if seq.on_host:  # swap in, then decode in this very step
                seq.on_host = False
                self.host_free += -(-(tokens - 1) // bs)
                swap_s += cost.swap_cost(tokens - 1, bs)
                self.swapped_bytes += (tokens - 1) * cost.kv_bytes_per_token
                decoders += 1
                context += tokens
                self._event("swap_in", seq)
            else:  # prefill: a new prompt, or prompt + generated tokens when recomputing
                f, b = cost.prefill_work(tokens)
                flops += f
                nbytes += b - self._weights
                budget -= tokens
                if seq.gen0 == 0:
                    fresh.append(seq)
                else:
                    self._event("recompute", seq)
            self._start(seq, step, tokens)
            joined += 1
            added += tokens
            if not self.preempted:
                queue = self.waiting
        return joined, added, decoders, context, flops, nbytes, swap_s, fresh

    # -- preemption ----------------------------------------------------------
    def _preempt(self, step: int) -> float:
        """Evict latest-arrived running sequences until this step's growth fits.

        Returns the seconds spent swapping out. A victim that does not fit in the host swap
        space is recomputed instead.
        """
        mm, cost, bs = self.memory, self.cost, self.config.block_size
        swap_s = 0.0
        while mm.shortfall(step) > 0:
            _, seq = self.running.popitem()
            kv, gen = seq.kv(step - 1), seq.generated(step - 1)
            self.finish_at[seq.step0 + seq.req.output - seq.gen0].remove(seq)
            self.kv_tokens -= kv
            seq.gen0 = gen
            seq.spans[-1][1] = self.now
            blocks = -(-kv // bs)
            if self.config.preemption == "swap" and blocks <= self.host_free:
                self.host_free -= blocks
                seq.on_host = True
                swap_s += cost.swap_cost(kv, bs)
                self.swapped_bytes += kv * cost.kv_bytes_per_token
                self._event("swap_out", seq)
            else:
                self.recomputed_tokens += kv
                self._event("preempt", seq)
            mm.free(seq)  # after the event, which draws the cells it frees
            self.preempted.appendleft(seq)
            self.preemptions += 1
            self.blocked = False
        return swap_s

    def _event(self, kind: str, seq: Sequence) -> None:
        """Record a preemption, swap or recompute with the KV it drops or moves (the
        prompt + generated - 1 tokens a sequence holds between steps) and its cells."""
        if self.trace is not None:
            self.trace.event(self.now, kind, seq.id, seq.req.prompt + seq.gen0 - 1,
                             self.memory.held_cells(seq, self.trace.max_cells))

    # -- leaving -------------------------------------------------------------
    def _finish(self, seq: Sequence, step: int) -> None:
        del self.running[seq.id]
        self.blocked = False
        self.kv_tokens -= seq.kv(step)
        self.memory.free(seq)
        self.misses += seq.leave(self.now, self.slo)
        self.finished.append(seq)
        self.arrivals.finished(seq.id, self.now)

    # -- quiet steps ---------------------------------------------------------
    def _quiet(self, stop: int, steps: int, occupied_s: float, used_s: float, sample_t: float,
               itl_s: list[float], itl_n: list[int], progress: Progress, total: int) -> tuple[int, float, float, float]:
        """Run the quiet steps from here: steps in which nothing arrives, nobody is admitted,
        finishes (the next leaves at step `stop`) or is preempted, so a step only decodes the
        running batch and grows its memory. Most steps of a run are quiet. The arithmetic is
        the full step's (`run`), in the same order, so every figure comes out the same to the
        last bit; a long stretch is done in arrays (numpy's accumulate adds in order).
        Returns the run's updated (steps, occupied_s, used_s, next trace sample time)."""
        mm, cost, trace, step_time = self.memory, self.cost, self.trace, self.cost.step_time
        f0, fb, fc, b0, bb, bc = self._decode
        step, batch, now, kv = self.step, len(self.running), self.now, self.kv_tokens
        next_t = self.arrivals.next_t
        flops0, nbytes0 = f0 + fb * batch, b0 + bb * batch
        while step + 1 < stop and now < next_t:
            limit = min(next_t, sample_t)  # a stretch ends at the step that reaches it
            k = min(stop - step - 1, 1024 - (steps & 1023))  # and at the next progress report
            if k > COAST_ARRAY and limit < float("inf"):
                # steps only get longer as the context grows: about this many reach `limit`
                first = cost.step_time(flops0 + fc * (kv + batch), nbytes0 + bc * (kv + batch))
                k = int(min(k, (limit - now) / first + 2))
            held = mm.occupancy(step, k)  # memory after each step, up to one that would run short
            if not held:
                break  # the next step preempts: a full step
            if len(held) > COAST_ARRAY:
                m = len(held)
                ctx = np.arange(kv + batch, kv + batch * m + 1, batch)  # KV after each step = its context
                flops, nbytes = ctx * fc, ctx * bc
                flops += flops0
                nbytes += nbytes0
                dts = cost.step_times(flops, nbytes)
                # three running sums in one accumulate (it adds in order along a row): the clock,
                # occupied x dt and used x dt
                sums = np.empty((3, m))
                sums[0] = dts
                np.multiply(dts, held[0] if held[0] == held[-1] else np.array(held), out=sums[1])
                np.multiply(ctx, dts, out=sums[2])
                sums[:, 0] += (now, occupied_s, used_s)
                np.add.accumulate(sums, axis=1, out=sums)
                n = min(int(np.searchsorted(sums[0], limit)) + 1, m)
                now, occupied_s, used_s = sums[:, n - 1].tolist()
                kv += batch * n
                itl_s += dts[:n].tolist()
            else:
                for n, held_now in enumerate(held, 1):
                    kv += batch  # the step's context: KV before it plus one token each
                    dt = step_time(flops0 + fc * kv, nbytes0 + bc * kv)
                    itl_s.append(dt)
                    now += dt
                    occupied_s += held_now * dt
                    used_s += kv * dt
                    if now >= limit:
                        break
            itl_n += repeat(batch, n)
            mm.grow_through(step, n)
            step += n
            steps += n
            self.step, self.now, self.kv_tokens = step, now, kv
            if now >= sample_t:
                trace.sample(now, step, len(self.waiting), len(self.preempted), batch, kv, mm)
                sample_t = trace.next_t
            if not steps & 1023:
                progress(len(self.finished) / total, f"{len(self.finished)}/{total} requests done, t = {now:.1f} s")
        return steps, occupied_s, used_s, sample_t

    # -- the loop ------------------------------------------------------------
    def run(self, requests: list[Request], progress: Progress = no_progress,
            observer: Observer | None = None, trace: TraceRecorder | None = None) -> Run:
        """Serve `requests` (sorted by arrival) to the end; `observer(engine, step)` is
        called after every step (tests check invariants there)."""
        self.trace = trace
        mm, cost = self.memory, self.cost
        f0, fb, fc, b0, bb, bc = self._decode
        total = len(requests)
        self.arrivals = arrivals = Arrivals(requests)
        steps = batch_sum = generated = max_batch = 0
        itl_s: list[float] = []  # Run.itl's two columns
        itl_n: list[int] = []
        occupied_s = used_s = 0.0
        sample_t = trace.next_t if trace else float("inf")
        give_up = float("inf") if self.give_up_after is None else self.give_up_after
        stopped = False
        running, finish_at, waiting, preempted = self.running, self.finish_at, self.waiting, self.preempted
        coast = observer is None  # an observer sees every step go through the full path
        while True:
            if not (running or waiting or preempted):
                if arrivals.next_t == float("inf"):
                    break
                self.now = max(self.now, arrivals.next_t)
            while arrivals.next_t <= self.now:
                self._submit(arrivals.pop())
            if not (running or waiting or preempted):
                continue  # everything that arrived was rejected
            if self.misses > give_up:
                stopped = True
                break
            if coast and running and (self.blocked or not (waiting or preempted)):
                # Quiet steps (see `_quiet`) first, then a full step where something happens.
                before = steps
                steps, occupied_s, used_s, sample_t = self._quiet(
                    min(finish_at), steps, occupied_s, used_s, sample_t, itl_s, itl_n, progress, total)
                batch_sum += (steps - before) * len(running)
                if steps > before:
                    max_batch = max(max_batch, len(running))
                generated += (steps - before) * len(running)
                if self.now >= arrivals.next_t:
                    continue  # submit the arrivals first
            self.step = step = self.step + 1
            swap_s = self._preempt(step) if mm.shortfall(step) > 0 else 0.0
            mm.grow(step)
            batch = decoding = len(running)
            grown = batch  # KV tokens added by this step
            context = self.kv_tokens + batch
            flops = f0 + fb * batch + fc * context
            nbytes = b0 + bb * batch + bc * context
            fresh: list[Sequence] = []
            if (waiting or preempted) and not self.blocked:
                joined, added, decoders, ctx, pf_flops, pf_bytes, s, fresh = self._admit(step)
                flops += fb * decoders + fc * ctx + pf_flops
                nbytes += bb * decoders + bc * ctx + pf_bytes
                swap_s += s
                batch += joined
                grown += added
            if not batch:
                raise RuntimeError(f"engine stalled at t={self.now:.3f}s: nothing runs and nothing can be admitted")
            dt = cost.step_time(flops, nbytes) + swap_s
            if decoding:
                itl_s.append(dt)
                itl_n.append(decoding)
            self.now += dt
            self.kv_tokens += grown
            steps += 1
            batch_sum += batch
            max_batch = max(max_batch, batch)
            generated += batch
            occupied_s += mm.occupied * dt
            used_s += self.kv_tokens * dt
            for seq in fresh:
                seq.first_token_t = self.now
                if self.now - seq.req.arrival > self.slo.ttft_s:
                    seq.missed = True
                    self.misses += 1
            leaving = finish_at.pop(step, None)
            if leaving:
                for seq in leaving:
                    self._finish(seq, step)
            if self.now >= sample_t:
                trace.sample(self.now, step, len(waiting), len(preempted), batch, self.kv_tokens, mm)
                sample_t = trace.next_t
            if observer is not None:
                observer(self, step)
            if not steps & 1023:
                progress(len(self.finished) / total, f"{len(self.finished)}/{total} requests done, t = {self.now:.1f} s")
        return Run(
            sequences=sorted(self.finished, key=lambda s: s.id), rejected=self.rejected,
            sim_time=self.now, steps=steps, batch_sum=batch_sum, occupied_s=occupied_s,
            used_s=used_s, capacity=mm.capacity, preemptions=self.preemptions,
            recomputed_tokens=self.recomputed_tokens, swapped_bytes=self.swapped_bytes,
            generated=generated, stopped_early=stopped, trace=trace.result() if trace else {},
            itl=np.column_stack((np.array(itl_s, dtype=float), np.array(itl_n, dtype=float))), max_batch=max_batch,
        )
