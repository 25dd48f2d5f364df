"""vLLM V1's quiet iterations, fast: the ones that only decode, run without `_iterate`.

Most iterations of a run only decode the running requests: nothing is prefilling, admitted or
preempted. `V1QuietSteps` runs them one by one in a tight loop (`_quiet_run`) or, in long
stretches, as arrays (`_quiet_plan`, `_quiet_commit`), changing the scheduler's state exactly as
`V1Scheduler._iterate` would (tests/test_speed_exact_schedulers.py compares them). It is kept
apart from the scheduling rules (v1_scheduler.py), which it only reads: the blocks each decoding
request needs come off the free queue's front in phase order, and the waiting queue's head stays
blocked while the blocks it waits for are not freed and its lookup cannot change.
"""

from __future__ import annotations

from itertools import islice

import numpy as np

from kvweb.serving.loop.continuous_batching import ContinuousBatching


class V1QuietSteps(ContinuousBatching):
    """The quiet-iteration methods of `ContinuousBatching`, for `V1Scheduler`'s state."""

    def _quiet_run(
        self,
        most: int,
        limit: float,
        occupied_s: float,
        used_s: float,
        cached_s: float,
        last: float,
        itl_s: list[float],
        itl_n: list[int],
    ) -> tuple[int, float, float, float]:
        """`_iterate`'s first return (only decodes), one by one: while nothing is prefilling or
        leaving, the blocks due fit, and the waiting queue is empty or its head stays blocked (taking
        the blocks due does not change the version of the lookup it watches)."""
        if self.prefilling or self.leaving or self._started:
            return 0, occupied_s, used_s, cached_s
        pool, waiting, bs, due, n, w = self.pool, self.waiting, self.bs, self._due, len(self.running), self.width
        # a hybrid model's pool is of pages, `w` (one per group) to a block, and its windows slide first
        pages, windows = (pool.pages, pool.windows) if w > 1 else (pool, ())
        free_q, n_blocks, shared = pages.free, pages.n_blocks, pages.shared_extra * bs  # (taking shares nothing)
        watched = None
        if waiting:
            head, free, version, blocked_budget = self._blocked
            if not (
                version in (None, pool.version)
                and self.config.token_budget - n >= blocked_budget
                and waiting[0] is head
            ):
                return 0, occupied_s, used_s, cached_s
            if version is not None and pages.watched:
                watched, block_hash = pages.watched, pages.block_hash
        f0, fb, fc, b0, bb, bc = self.coef
        flops0, nbytes0, step_time = f0 + fb * n, b0 + bb * n, self.cost.step_time
        now, dstep, kv, ran = self.now, self.dstep, self.kv_tokens, 0
        while ran < most:
            for kept, _ in windows:  # `V1Scheduler._slide`
                for seq in due[(dstep + 1 - kept) % bs].values():
                    pool.slide(seq.blocks, seq.kv(dstep))
            phase = due[(dstep + 1) % bs]
            need = len(phase) * w
            if need > len(free_q):
                break  # preemption
            if waiting:
                if len(free_q) - need > free:
                    break  # the head is no longer blocked
                if watched and any(b in watched and block_hash[b] is not None for b in islice(free_q, need)):
                    break  # taking it changes the version: the head is tried again
            if need:
                for seq, block in zip(phase.values(), pool.take(len(phase))):
                    seq.blocks.append(block)
            dstep += 1
            kv += n
            dt = step_time(flops0 + fc * kv, nbytes0 + bc * kv)
            now = now + dt
            occupied_s += (n_blocks - len(free_q)) * bs * dt
            if w > 1:  # whole blocks, as `V1Scheduler._iterate` counts them (a slide may free a shared one)
                used_s += (n_blocks - len(free_q) - pages.shared_extra) * bs * dt
            else:
                used_s += (kv - shared) * dt
            cached_s += pool.reusable * bs * dt
            itl_s.append(now - last)
            itl_n.append(n)
            last = now
            ran += 1
            if now >= limit:
                break
        if ran:
            self.now, self.dstep, self.kv_tokens, self.decoded = now, dstep, kv, n
            self.step += ran
        return ran, occupied_s, used_s, cached_s

    def _quiet_plan(self, most: int, room_s: float) -> tuple[int, tuple | None]:
        """`_quiet_step` over many iterations: the blocks each takes come off the free queue's front
        in order, so which are hashed (cached, reusable) and whether one is watched is known ahead."""
        if self.prefilling or self.leaving:
            return 0, None
        if self.width > 1:
            return most, None  # a hybrid model's iterations one by one (`_quiet_run`)
        pool, waiting, bs, n = self.pool, self.waiting, self.bs, len(self.running)
        watched = None
        if waiting:
            head, free, version, blocked_budget = self._blocked
            if not (
                version in (None, pool.version)
                and self.config.token_budget - n >= blocked_budget
                and waiting[0] is head
            ):
                return 0, None
            if version is not None and pool.watched:
                watched = pool.watched
        f0, fb, fc, b0, bb, bc = self.coef
        flops0, nbytes0, kv = f0 + fb * n, b0 + bb * n, self.kv_tokens
        most = self._quiet_span(most, room_s, self.cost.step_time(flops0 + fc * (kv + n), nbytes0 + bc * (kv + n)))
        if most < self.quiet_array:
            return most, None
        # blocks each iteration takes (the decoding requests' phases repeat every block), and how
        # many the iterations take together, as far as the free blocks go
        dstep, left = self.dstep, len(pool.free)
        needs = [len(self._due[(dstep + 1 + j) % bs]) for j in range(bs)]
        if waiting and left - needs[0] > free:
            return 0, None  # the head is no longer blocked (taking only makes `left` smaller)
        taken = np.cumsum(np.resize(needs, most))
        k = int(np.searchsorted(taken, left, side="right"))
        if k < self.quiet_array:
            return k, None
        taken = taken[:k]
        total = int(taken[-1])
        hashed = None  # which of the blocks taken are cached (free but hashed): they leave the cache
        if pool.reusable and total:
            block_hash = pool.block_hash
            front = list(islice(pool.free, total))
            hashed = [block_hash[b] is not None for b in front]
            if watched and any(hashed):
                first = next((i for i, b in enumerate(front) if hashed[i] and b in watched), None)
                if first is not None:  # taking it changes the version: the head is tried again
                    k = int(np.searchsorted(taken, first, side="right"))
                    if k < self.quiet_array:
                        return k, None
                    taken = taken[:k]
        occupied = (taken + (pool.n_blocks - left)) * bs
        if hashed is None:
            cached = pool.reusable * bs
        else:
            upto = np.cumsum(hashed)  # hashed blocks among the first i + 1 taken
            cached = (pool.reusable - np.where(taken > 0, upto[np.maximum(taken, 1) - 1], 0)) * bs
        ctx = np.arange(kv + n, kv + n * k + 1, n)  # KV after each iteration
        flops, nbytes = fc * ctx, bc * ctx
        flops += flops0
        nbytes += nbytes0
        return k, (flops, nbytes, occupied, ctx - pool.shared_extra * bs, cached)

    def _quiet_commit(self, m: int) -> None:
        due, bs, n = self._due, self.bs, len(self.running)
        phases = [due[step % bs] for step in range(self.dstep + 1, self.dstep + 1 + m)]
        blocks = iter(self.pool.take(sum(map(len, phases))))  # in the iterations' order
        for phase in phases:
            for seq in phase.values():
                seq.blocks.append(next(blocks))
        self.dstep += m
        self.decoded = n
        self.kv_tokens += n * m
