"""Workloads that share prefixes: few-shot tasks and multi-turn chat (SPEC 5).

Tokens are random ids from a large vocabulary, seeded, so two runs share a prefix only
where the workload says so (a system prompt, a task's examples, earlier turns).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kvweb.serving.load.workload import lognormal

VOCAB = 32000


@dataclass(frozen=True)
class Request:
    rid: int
    prompt: np.ndarray
    output: np.ndarray  # the answer's tokens: inserted into the cache after the prompt
    group: int  # the task or the session
    arrival: int = 0  # step at which it arrives (when `after` is None)
    after: int | None = None  # a later chat turn arrives `delay` steps after this rid finishes
    delay: int = 0

    @cached_property
    def tokens(self) -> np.ndarray:
        """Prompt + output, joined once: every cache a lab runs serves the same requests."""
        return np.concatenate([self.prompt, self.output])


FEW_SHOT_ORDERS = ("random", "round-robin")


def question_lengths(n: int, mean: int, sigma: float, seed: int) -> list[int]:
    """n question lengths: all `mean` when sigma is 0, else lognormal with that mean and spread
    (at least 1 token), from a stream of their own."""
    if sigma == 0:
        return [mean] * n
    return np.maximum(1, lognormal(np.random.default_rng([seed, 3]), mean, sigma, n)).astype(int).tolist()


def few_shot(
    tasks: int,
    per_task: int,
    system_len: int,
    examples_len: int,
    question_len: int,
    output_len: int,
    seed: int,
    order: str = "random",
    question_sigma: float = 0.0,
) -> list[Request]:
    """tasks x per_task requests, each = system prompt + its task's examples + a unique
    question, all present at step 0. Questions are `question_len` tokens, or with
    `question_sigma` > 0 lognormal lengths of that mean (`question_lengths`). `order` is how
    they arrive: the tasks' requests in a seeded random order (the lecture's setup), or
    interleaved round-robin over the tasks (the worst case for LRU). Both orders hold the same
    requests; rid is the arrival position."""
    if order not in FEW_SHOT_ORDERS:
        raise ValueError(f"order must be one of {', '.join(FEW_SHOT_ORDERS)}")
    rng = np.random.default_rng(seed)
    system = rng.integers(0, VOCAB, system_len)
    examples = [rng.integers(0, VOCAB, examples_len) for _ in range(tasks)]
    # Common random numbers: every question first draws the fixed case's question_len tokens from
    # the main stream and is cut to its length or topped up from a stream of its own, so varied
    # lengths leave the arrival order and the answers as they are with fixed ones.
    lengths = question_lengths(tasks * per_task, question_len, question_sigma, seed)
    extra = np.random.default_rng([seed, 4])
    drawn = []
    for i in range(tasks * per_task):
        task = i % tasks
        question = rng.integers(0, VOCAB, question_len)
        if lengths[i] != question_len:
            question = np.concatenate([question, extra.integers(0, VOCAB, max(0, lengths[i] - question_len))])[
                : lengths[i]
            ]
        prompt = np.concatenate([system, examples[task], question])
        drawn.append((prompt, rng.integers(0, VOCAB, output_len), task))
    arrival = rng.permutation(len(drawn)) if order == "random" else range(len(drawn))
    return [Request(rid, *drawn[i]) for rid, i in enumerate(arrival)]


def multi_turn(
    sessions: int, turns: int, system_len: int, question_len: int, answer_len: int, gap: int, seed: int
) -> list[Request]:
    """Chat sessions of `turns` turns. A session's first turn arrives at a random step in
    [0, sessions); each later turn arrives `gap` steps after the previous one finished,
    and its prompt is the whole conversation so far plus a new question."""
    rng = np.random.default_rng(seed)
    system = rng.integers(0, VOCAB, system_len)
    starts = np.sort(rng.integers(0, max(1, sessions), sessions))
    requests: list[Request] = []
    for s in range(sessions):
        history, previous = system, None
        for _ in range(turns):
            prompt = np.concatenate([history, rng.integers(0, VOCAB, question_len)])
            answer = rng.integers(0, VOCAB, answer_len)
            rid = len(requests)
            requests.append(
                Request(
                    rid,
                    prompt,
                    answer,
                    s,
                    arrival=int(starts[s]),
                    after=previous,
                    delay=gap if previous is not None else 0,
                )
            )
            history, previous = np.concatenate([prompt, answer]), rid
    return requests


def dfs_order(requests: list[Request]) -> list[int]:
    """Positions of the requests in a depth-first walk of their prompts' prefix tree:
    sorting token sequences lexicographically visits the tree depth first."""
    return sorted(range(len(requests)), key=lambda i: ordered_bytes(requests[i].prompt))


def ordered_bytes(tokens: np.ndarray) -> bytes:
    """Bytes that sort like the token sequence (lexicographically, a prefix first): each
    int64 with its sign bit flipped, big-endian. Much quicker to sort than lists of ints."""
    flipped = np.asarray(tokens, dtype=np.int64).view(np.uint64) ^ np.uint64(1 << 63)
    return flipped.astype(">u8").tobytes()
