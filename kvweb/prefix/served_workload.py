"""The few-shot and multi-turn workloads (cache_workload) as timed requests for the serving simulator.

Few-shot requests arrive as a Poisson process at `rate` (the tasks' requests in the workload's
seeded random order). Chat sessions start as a Poisson process at rate / turns, so requests
arrive at about `rate` per second over a long run; each later turn is sent `think_s` seconds
after the previous turn's answer has finished (a closed loop: its prompt holds that answer).
Each request carries its tokens, prompt then answer, so prefix caches can match them.
"""

from __future__ import annotations

import numpy as np

from kvweb.memo import Memo
from kvweb.prefix.cache_workload import Request as CacheRequest
from kvweb.prefix.cache_workload import few_shot, multi_turn
from kvweb.serving.load.workload import Request, unit_arrivals

# The drawn requests (tokens and all; only read), by what the drawing reads: not the rate, which
# only times them, so a new rate reuses the requests of the last (drawing costs more than timing).
_DRAWN: Memo[list[CacheRequest]] = Memo(4)


def _timed(r: CacheRequest, arrival: float, think_s: float) -> Request:
    return Request(
        r.rid,
        arrival,
        len(r.prompt),
        len(r.output),
        tokens=r.tokens,
        after=r.after,
        delay=think_s if r.after is not None else 0.0,
    )


def few_shot_traffic(
    n: int, rate: float, seed: int, tasks: int, system_len: int, examples_len: int, question_len: int, output_len: int
) -> list[Request]:
    """n requests of `tasks` tasks (system prompt + the task's examples + a question)."""
    drawn = _DRAWN.get(
        ("few-shot", n, seed, tasks, system_len, examples_len, question_len, output_len),
        lambda: few_shot(tasks, -(-n // tasks), system_len, examples_len, question_len, output_len, seed)[:n],
    )
    arrivals = unit_arrivals(n, seed) / rate
    return [_timed(r, float(a), 0.0) for r, a in zip(drawn, arrivals)]


def multi_turn_traffic(
    n: int, rate: float, seed: int, turns: int, system_len: int, question_len: int, output_len: int, think_s: float
) -> list[Request]:
    """n requests of chat sessions of `turns` turns (the last session may be cut short)."""
    sessions = -(-n // turns)
    drawn = _DRAWN.get(
        ("multi-turn", n, seed, turns, system_len, question_len, output_len),
        lambda: multi_turn(sessions, turns, system_len, question_len, output_len, 0, seed)[:n],
    )
    starts = unit_arrivals(sessions, seed) / (rate / turns)
    first = np.cumsum([r.after is None for r in drawn]) - 1  # each request's session
    return [_timed(r, float(starts[first[i]]) if r.after is None else 0.0, think_s) for i, r in enumerate(drawn)]
