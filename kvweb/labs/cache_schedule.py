"""Lab `cache-schedule`: which waiting request to serve next when the cache is small.

Also `WorkloadLab`, the workload parameters shared by the prefix-cache labs.
"""

from __future__ import annotations

from typing import Any

import param

from kvweb.prefix.cache_schedule import POLICIES, RadixServer, hit_rate, optimal, simulate, summary
from kvweb.prefix.cache_workload import FEW_SHOT_ORDERS, Request, few_shot, multi_turn
from kvweb.budget import CACHE_BLOCKS, HASHED_PEEKS, HASHES, PEEKS, POOL_BLOCKS, Estimate, Unit, work
from kvweb.lab import ADVANCED, Lab, ParamError, Progress, no_progress
from kvweb.memo import Memo

MAX_PROMPT_TOKENS = 2_000_000  # all prompts of a workload together

# Remembered across runs (least recently used dropped first), shared by every session: a widget
# that does not change the workload does not draw it again. Callers only read the requests.
_WORKLOADS: Memo[list[Request]] = Memo(4)  # `workload_key()` -> the requests


class WorkloadLab(Lab):
    """Few-shot tasks or multi-turn chat sessions (SPEC 5), sizes and seed as parameters."""

    workload = param.Selector(
        objects=["few-shot", "multi-turn"],
        default="few-shot",
        doc="few-shot: tasks share a system prompt and their examples; "
        "multi-turn: each turn repeats the conversation so far",
    )
    # The sizes are folded away in the app (precedence ADVANCED): the workload's details.
    tasks = param.Integer(8, bounds=(1, 32), precedence=ADVANCED, doc="few-shot: tasks (each with its own examples)")
    per_task = param.Integer(16, bounds=(1, 64), precedence=ADVANCED, doc="few-shot: requests per task")
    order = param.Selector(
        objects=list(FEW_SHOT_ORDERS),
        default="random",
        precedence=ADVANCED,
        doc="few-shot: the tasks' requests in a seeded random order (the lecture's), or "
        "interleaved round-robin (the worst case for LRU)",
    )
    examples_len = param.Integer(
        400, bounds=(0, 4096), precedence=ADVANCED, doc="few-shot: tokens of each task's examples"
    )
    sessions = param.Integer(32, bounds=(1, 128), precedence=ADVANCED, doc="multi-turn: chat sessions")
    turns = param.Integer(6, bounds=(1, 16), precedence=ADVANCED, doc="multi-turn: turns per session")
    gap = param.Integer(
        5, bounds=(0, 1000), precedence=ADVANCED, doc="multi-turn: steps between a turn's end and the next turn"
    )
    system_len = param.Integer(
        100, bounds=(0, 2048), precedence=ADVANCED, doc="tokens of the system prompt every request shares"
    )
    question_len = param.Integer(
        30,
        bounds=(1, 1024),
        precedence=ADVANCED,
        doc="tokens of each new question (few-shot with question_sigma > 0: their mean)",
    )
    question_sigma = param.Number(
        0.0,
        bounds=(0.0, 2.0),
        precedence=ADVANCED,
        doc="few-shot: spread of the questions' lengths, lognormal with mean question_len "
        "(0: every question question_len tokens; 1: as long-tailed as ShareGPT-like prompts)",
    )
    output_len = param.Integer(20, bounds=(1, 1024), precedence=ADVANCED, doc="tokens of each answer")
    seed = param.Integer(
        0, bounds=(0, 2**31 - 1), precedence=ADVANCED, doc="seed of the workload's tokens and arrivals"
    )

    def prompt_tokens(self) -> int:
        if self.workload == "few-shot":
            return self.tasks * self.per_task * (self.system_len + self.examples_len + self.question_len)
        t = self.turns
        per_session = t * self.system_len + t * (t + 1) // 2 * self.question_len + t * (t - 1) // 2 * self.output_len
        return self.sessions * per_session

    def check(self) -> None:
        total = self.prompt_tokens()
        if total > MAX_PROMPT_TOKENS:
            sizes = "tasks, per_task" if self.workload == "few-shot" else "sessions, turns"
            raise ParamError(
                f"workload: its prompts add up to {total:,} tokens; at most {MAX_PROMPT_TOKENS:,} "
                f"(lower {sizes} or the lengths)"
            )

    def request_count(self) -> int:
        return self.tasks * self.per_task if self.workload == "few-shot" else self.sessions * self.turns

    def lengths(self) -> tuple[str, ...]:
        """The parameters the workload's size grows with."""
        sizes = ("tasks", "per_task", "examples_len") if self.workload == "few-shot" else ("sessions", "turns")
        return (*sizes, "system_len", "question_len", "output_len")

    def served_work(
        self, block_size: int = 1, peeking: bool = True, queue: int = 1, hashed: bool = False
    ) -> list[tuple[float, Unit]]:
        """One serving of the workload (`simulate`) on a cache of `block_size`-token blocks: every
        prompt and output inserted and, `peeking` (lspf, aging), every waiting request's prompt
        looked up at every step, up to `queue` of them (a `hashed` cache hashes both block by block,
        and takes each block from its pool)."""
        n = self.request_count()
        tokens = self.prompt_tokens() + n * self.output_len
        lookups = n * min(queue, n) if peeking else 0
        parts = [(tokens / block_size, CACHE_BLOCKS), (lookups, PEEKS)]
        hashes = (tokens + lookups * self.prompt_tokens() / n) / block_size
        if not hashed:
            return parts
        # a hashed cache also takes, registers and releases each block in its pool (an ordered dict's moves)
        return parts + [(lookups, HASHED_PEEKS), (hashes, HASHES), (tokens / block_size, POOL_BLOCKS)]

    def workload_key(self) -> str:
        """Every workload parameter and its value: what the requests depend on."""
        return repr([(name, getattr(self, name)) for name in WorkloadLab.param if name != "name"])

    def requests(self) -> list[Request]:
        """The workload's requests, drawn once for each workload (see `_WORKLOADS`)."""
        return _WORKLOADS.get(self.workload_key(), self.draw)

    def draw(self) -> list[Request]:
        """The workload's requests, drawn afresh."""
        if self.workload == "few-shot":
            return few_shot(
                self.tasks,
                self.per_task,
                self.system_len,
                self.examples_len,
                self.question_len,
                self.output_len,
                self.seed,
                self.order,
                self.question_sigma,
            )
        return multi_turn(
            self.sessions, self.turns, self.system_len, self.question_len, self.output_len, self.gap, self.seed
        )


class QueueLab(WorkloadLab):
    """A workload served one request at a time through a bounded waiting queue."""

    queue = param.Integer(32, bounds=(1, 1024), doc="waiting queue size; later arrivals wait outside it")
    alpha = param.Number(20.0, bounds=(0.0, 1000.0), doc="aging: priority = match length + alpha x steps waited")


class CapacityLab(QueueLab):
    """... on a cache of a given capacity."""

    capacity = param.Integer(2000, bounds=(1, 1_000_000), doc="tokens the pool holds (cache + running request)")


class CacheSchedule(CapacityLab):
    lab_name = "cache-schedule"
    title = "Cache-aware scheduling"
    summary = (
        "One request at a time from a bounded waiting queue; each matches its prompt in the radix "
        "cache, then inserts prompt + output, evicting least recently used leaves when the pool is "
        "full. FCFS, longest shared prefix first (LSPF), DFS rank (the waiting request that comes first "
        "in the depth-first order of the prompts' prefix tree: an online policy, blind to the cache) and "
        "aging. Waits count steps in the waiting queue. The optimum (optimal_hit_rate) is the offline "
        "DFS order: every request served back to back in depth-first order."
    )

    policy = param.Selector(
        objects=list(POLICIES),
        default="lspf",
        doc="order in which waiting requests are served; dfs-rank: each request's rank in the "
        "offline depth-first order, applied within the waiting queue",
    )
    cache_answers = param.Boolean(
        True,
        doc="insert each answer's tokens into the cache after its prompt, as vLLM and "
        "SGLang do; off: only prompts are cached, so a chat's next turn, whose "
        "prompt holds the last answer, matches only up to that answer",
    )

    def estimate(self) -> Estimate:
        """The fcfs, lspf and chosen orders' servings, and the offline optimum's."""
        orders = dict.fromkeys(("fcfs", "lspf", self.policy, "dfs"))
        runs = [self.served_work(peeking=p in ("lspf", "aging"), queue=self.queue) for p in orders]
        return work(*(part for run in runs for part in run), lower=("queue", *self.lengths()))

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        requests = self.requests()
        runs: dict[str, dict[str, Any]] = {}
        for i, policy in enumerate(dict.fromkeys(("fcfs", "lspf", self.policy))):
            progress(i / 4, f"serving in {policy} order")
            served = simulate(
                requests, RadixServer(self.capacity, cache_answers=self.cache_answers), policy, self.queue, self.alpha
            )
            runs[policy] = summary(served)
        progress(0.75, "serving offline in depth-first order")
        best = hit_rate(optimal(requests, self.capacity, cache_answers=self.cache_answers))
        chosen = runs[self.policy]
        return {
            "policy": self.policy,
            "requests": len(requests),
            "prompt_tokens": int(sum(len(r.prompt) for r in requests)),
            "longest_request": int(max(len(r.tokens) for r in requests)),
            "hit_rate": chosen["hit_rate"],
            "optimal_hit_rate": best,
            "ratio_to_optimal": chosen["hit_rate"] / best if best else None,
            "max_wait": chosen["max_wait"],
            "mean_wait": chosen["mean_wait"],
            # Little's law: when every request waits from the start and one leaves per step, the
            # waits add up to the same total whatever the order (few-shot); said, not left to look odd
            "mean_wait_same_in_every_order": len({round(r["mean_wait"], 9) for r in runs.values()}) == 1,
            "runs": runs,
        }
