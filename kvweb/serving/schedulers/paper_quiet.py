"""The papers' engine's quiet steps, fast: the ones that only decode, run without `_iterate`.

Most steps of a run are quiet: nothing arrives, nobody is admitted or preempted, so a step only
decodes the running batch and grows its memory (requests whose last token it was leave after it,
as after any step). `PaperQuietSteps` runs them one by
one in a tight loop (`_quiet_run`) or, in long stretches, as arrays (`_quiet_plan`,
`_quiet_commit`), changing the state exactly as `PaperScheduler._iterate` would
(tests/test_speed_exact.py compares them). It is kept apart from the rules (paper_scheduler.py),
which it only reads: the memory manager says how much memory each coming step holds
(`occupancy`, up to the one that would run short) and grows the sequences through them at once
(`grow_through`); a waiting queue stays blocked until a sequence leaves.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from kvweb.serving.loop.continuous_batching import ContinuousBatching


class PaperQuietSteps(ContinuousBatching):
    """The quiet-iteration methods of `ContinuousBatching`, for `PaperScheduler`'s state."""

    # A plan is one `occupancy` list and a few array operations, so arrays pay off sooner than for
    # today's schedulers: from 25 steps, as before the loop was shared (from 48, scenario A with
    # Max reservations at rate 10 took 7 000 more steps one by one, 1.7x the `step_time` calls).
    quiet_array = 25

    # The memory held after each of the next steps, read by a `_quiet_plan` that found too few of
    # them for arrays: the `_quiet_run` the loop calls next takes it instead of reading it again.
    _held: list[int] = []

    def may_be_quiet(self) -> bool:
        """Nothing can be admitted: the queues are empty or their head is blocked (until the next
        arrival or finish, where a quiet stretch ends anyway)."""
        return self.blocked or not (self.waiting or self.evicted)

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
        """`_iterate` as it runs when it only decodes, one step at a time (the inter-token latency
        of each is its dt: `itl_is_step_time`)."""
        held, self._held = self._held or self.memory.occupancy(self.step, most), []
        if not held:
            return 0, occupied_s, used_s, cached_s  # the next step preempts
        f0, fb, fc, b0, bb, bc = self.coef
        n, kv, step_time = len(self.running), self.kv_tokens, self.cost.step_time
        flops0, nbytes0 = f0 + fb * n, b0 + bb * n
        now = self.now
        itl = itl_s.append
        for ran, held_now in enumerate(held, 1):
            kv += n  # the step's context: KV before it plus one token each
            dt = step_time(flops0 + fc * kv, nbytes0 + bc * kv)
            itl(dt)
            now += dt
            occupied_s += held_now * dt
            used_s += kv * dt
            if now >= limit:
                break
        itl_n += repeat(n, ran)
        self.memory.grow_through(self.step, ran)
        self.now, self.kv_tokens, self.decoded = now, kv, n
        self.step += ran
        self.dstep = self.step
        return ran, occupied_s, used_s, cached_s

    def _quiet_plan(self, most: int, room_s: float) -> tuple[int, tuple | None]:
        """The coming quiet steps as arrays: the memory each holds comes from `occupancy`."""
        f0, fb, fc, b0, bb, bc = self.coef
        n, kv = len(self.running), self.kv_tokens
        flops0, nbytes0 = f0 + fb * n, b0 + bb * n
        most = self._quiet_span(most, room_s, self.cost.step_time(flops0 + fc * (kv + n), nbytes0 + bc * (kv + n)))
        if most < self.quiet_array:
            return most, None
        held = self.memory.occupancy(self.step, most)  # up to the step before one that runs short
        k = len(held)
        if k < self.quiet_array:
            self._held = held
            return k, None
        ctx = np.arange(kv + n, kv + n * k + 1, n)  # KV after each step = its context
        flops, nbytes = ctx * fc, ctx * bc
        flops += flops0
        nbytes += nbytes0
        return k, (flops, nbytes, held[0] if held[0] == held[-1] else np.array(held), ctx, None)

    def _quiet_commit(self, m: int) -> None:
        n = len(self.running)
        self.memory.grow_through(self.step, m)
        self.dstep = self.step + m  # (the loop adds m to `step` after this)
        self.kv_tokens += n * m
        self.decoded = n
