"""What a scheduler provides the continuous-batching loop (as vLLM keeps its scheduler's contract in
`vllm/v1/core/sched/interface.py`): one iteration (`_iterate`), its quiet stretches run fast
(`_quiet_run`, `_quiet_plan`, `_quiet_commit`), a request's memory given back (`_release`), its
refusals (`never_fits`), and what its memory holds and looks like (`occupied`, `used`, `cached`,
`cached_prefix`, `memory_map`, `group_maps`). The loop that calls them is continuous_batching.py;
each scheduler's module implements them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kvweb.serving.loop.engine_trace import GroupMap
from kvweb.serving.load.workload import Image
from kvweb.serving.loop.sequence import LoopSeq, Seq


class SchedulerInterface:
    """The methods and traits a scheduler on `ContinuousBatching` implements: subclasses set `kind`,
    `capacity` and implement `_iterate`, `_release`, `never_fits`, `occupied`, `used`, `cached` and
    `memory_map`, and may implement `_quiet_run`, `_quiet_plan` and `_quiet_commit`."""

    __slots__ = ()  # the loop's state is in `ContinuousBatching`'s slots

    kind = ""
    seq_type: type[LoopSeq] = Seq  # what a request becomes on arrival
    capacity = 0  # tokens
    # Whether every request that decodes in an iteration got its previous token at the end of the
    # iteration before (whole prefills, no chunks: the papers' engine), so that its inter-token
    # latency is the iteration's own duration. The loop then records that `dt`, as the papers'
    # engine always has; otherwise it records clock differences (now - the request's last token),
    # which can differ from `dt` in the last bits.
    itl_is_step_time = False

    def _iterate(self) -> tuple[float, int, list[Seq], int, int, int]:
        """Run one iteration: (seconds, requests in the batch, requests that got their first token,
        and during it the memory `occupied`, `used` and `cached`)."""
        raise NotImplementedError

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
        """Run up to `most` quiet iterations one by one, stopping after the one whose end reaches
        `limit` seconds; return how many ran (0: the next one is not quiet) and the three time
        integrals (occupied, used and cached token-seconds) with theirs added. A quiet iteration
        only decodes the running requests: nothing is admitted, prefilled or preempted (requests
        whose last token it is leave after it: the loop sees to that). Each must change the state
        exactly as `_iterate` would; `last` is when the batch last decoded, and `itl_s` and `itl_n`
        get each one's inter-token latency. Sets `now`, `step` and `decoded`. Most iterations of a
        run are quiet."""
        return 0, occupied_s, used_s, cached_s

    def _quiet_plan(self, most: int, room_s: float) -> tuple[int, tuple | None]:
        """The next quiet iterations (see `_quiet_run`) as arrays, changing nothing: (k, (FLOPs, bytes,
        occupied, used, cached)) for k of them, at least `quiet_array` and at most `most` (arrays of k
        elements; occupied, used and cached may be one number for all, cached None where nothing is); or (k, None): run at most
        the next k one by one (0: the next one is not quiet). `room_s`: seconds to the next event;
        iterations only get longer, so planning stops at about as many as fill it. `_quiet_commit(m)`
        then changes the state as the first m do."""
        return 0, None

    def _quiet_commit(self, m: int) -> None:
        """Change the state as the first m iterations of the last `_quiet_plan` do (and set `decoded`)."""
        raise NotImplementedError

    def _quiet_span(self, most: int, room_s: float, first_s: float) -> int:
        """`most`, cut to about the iterations that fill `room_s` seconds when the first takes first_s."""
        return most if room_s == float("inf") else min(most, int(room_s / first_s) + 2)

    def _release(self, seq: Seq, finished: bool) -> None:
        """Give back a request's KV memory (finished: what the cache keeps is up to the scheduler)."""
        raise NotImplementedError

    def never_fits(self, final_kv: int) -> str | None:
        raise NotImplementedError

    # Whether the next iterations may be quiet (`_quiet_run` decides): a method the loop calls before
    # it looks for the next finish, so that a scheduler that knows it will admit saves that work, or
    # None: they always may.
    may_be_quiet: Callable[[], bool] | None = None

    @property
    def busy(self) -> bool:
        """Work in progress besides the decoding requests (a prefill split into chunks, preempted
        work held apart from the waiting queue)."""
        return False

    def _idle(self) -> None:
        """Nothing runs or waits until the next arrival: settle what a step left pending."""

    @property
    def occupied(self) -> int:
        """Tokens of memory held by running requests."""
        raise NotImplementedError

    @property
    def used(self) -> int:
        """Tokens of KV written by running requests, each shared token once."""
        raise NotImplementedError

    @property
    def cached(self) -> int:
        """Tokens of reusable KV nobody holds (freed, still found by the prefix cache)."""
        raise NotImplementedError

    def cached_prefix(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        """How many leading tokens of `tokens`, under LoRA adapter `adapter` (0: the base model), with
        `images` in them (vLLM V1 keys their blocks by mm hash; no other mode takes images), the
        prefix cache holds now, read-only (a router's probe: no LRU stamp, no split); none without a
        prefix cache, as the papers' engine."""
        return 0

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        raise NotImplementedError

    def group_maps(self, step: int, max_cells: int) -> list[GroupMap]:
        """One map per KV cache group (or per pool, where each kind of layer has a pool of its own),
        for a model whose layers are not all alike; none when `memory_map` says all (one kind of
        layer, one pool). The trace keeps them beside `memory_map`'s (engine_trace.GroupMap)."""
        return []
