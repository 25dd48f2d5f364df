"""SGLang's quiet iterations, fast: the decode batches that take nothing but a slot per request.

While no prefill batch is tried (nothing is chunked, and the batch is full or nobody waits), the
LoRA adapters the batch needs were the last batch's, and the free slots suffice (no eviction, no
retraction), an iteration of `RadixScheduler` only decodes
every running request; a stretch ends before the decode count `slide_at`, where the scheduler has
work of its own (a window model's running requests free window KV: swa_scheduler.py).
`RadixQuietSteps` runs such iterations one by one in a tight loop (`_quiet_run`) or, in long
stretches, as arrays (`_quiet_plan`, `_quiet_commit`), changing the
state exactly as `RadixScheduler._iterate` would (tests/test_speed_exact_schedulers.py compares
them); it is kept apart from the scheduling rules (radix_scheduler.py), which it only reads.
"""

from __future__ import annotations

import numpy as np

from kvweb.serving.loop.continuous_batching import ContinuousBatching


class RadixQuietSteps(ContinuousBatching):
    """The quiet-iteration methods of `ContinuousBatching`, for `RadixScheduler`'s state."""

    def _only_decodes(self) -> bool:
        """Whether the next iteration only decodes: nothing chunked, no prefill batch tried (the
        batch is full, nobody waits, or every waiting request would be skipped for its adapter
        again: `_skips_all`) and, with LoRA adapters, the decode batch's adapters were the last
        batch's (`BatchSlots.ready`: nothing to load, no order to change)."""
        return (
            self.chunked is None
            and (self.batch_is_full or not self.waiting or self._skips_all())
            and (self.adapters is None or self.adapters.ready())
        )

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
        """`_iterate`'s decode batch, one by one: while no prefill batch is tried (nothing chunked,
        and the batch is full or nobody waits) and the free slots suffice (no eviction, no retraction)."""
        if not self._only_decodes():
            return 0, occupied_s, used_s, cached_s
        n = len(self.running)
        most = min(
            most, (self.pool.available - self.pending) // n, self.slide_at - self.dstep
        )  # a slot per request per batch
        if most <= 0:
            return 0, occupied_s, used_s, cached_s
        f0, fb, fc, b0, bb, bc = self.coef
        fbn, bbn, step_time = fb * n, bb * n, self.cost.step_time
        ratio, decay, floor = self.ratio, self.decay, self.min_ratio
        cached = self.tree.evictable_size
        used, pending = self.pool.used, self.pending  # the pool hands out nothing meanwhile
        now, dstep, kv, ran = self.now, self.dstep, self.kv_tokens, 0
        while ran < most:
            dstep += 1
            kv += n
            pending += n
            ratio = max(ratio - decay, floor)
            held = used + pending - cached
            dt = step_time(f0 + (fbn + fc * kv), b0 + (bbn + bc * kv))
            now = now + dt
            occupied_s += held * dt
            used_s += held * dt
            cached_s += cached * dt
            itl_s.append(now - last)
            itl_n.append(n)
            last = now
            ran += 1
            if now >= limit:
                break
        self.now, self.dstep, self.kv_tokens, self.pending, self.ratio, self.decoded = now, dstep, kv, pending, ratio, n
        self.step += ran
        return ran, occupied_s, used_s, cached_s

    def _quiet_plan(self, most: int, room_s: float) -> tuple[int, tuple | None]:
        """`_quiet_step` over many decode batches: each takes one slot per request from the free room."""
        if not self._only_decodes():
            return 0, None
        n, kv = len(self.running), self.kv_tokens
        f0, fb, fc, b0, bb, bc = self.coef
        fbn, bbn = fb * n, bb * n
        most = min(most, (self.pool.available - self.pending) // n, self.slide_at - self.dstep)
        most = self._quiet_span(
            most, room_s, self.cost.step_time(f0 + (fbn + fc * (kv + n)), b0 + (bbn + bc * (kv + n)))
        )
        if most < self.quiet_array:
            return max(most, 0), None
        ctx = np.arange(kv + n, kv + n * most + 1, n)  # KV after each batch
        flops, nbytes = fc * ctx, bc * ctx
        flops += fbn
        flops += f0
        nbytes += bbn
        nbytes += b0
        held = ctx + (self.pool.used + self.pending - self.tree.evictable_size - kv)
        return most, (flops, nbytes, held, held, self.tree.evictable_size)

    def _quiet_commit(self, m: int) -> None:
        n = len(self.running)
        self.dstep += m
        self.decoded = n
        self.kv_tokens += n * m
        self.pending += n * m
        ratio, decay, floor = self.ratio, self.decay, self.min_ratio
        for _ in range(m):
            if ratio == floor:
                break  # it stays there
            ratio = max(ratio - decay, floor)
        self.ratio = ratio
