"""Speculative decoding's memory side, in vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py).

A drafter (EAGLE's head, DeepSeek-V3's MTP module or a small model: drafters.py) proposes k tokens after each step; the next step the
target model verifies them with the token last sampled, 1 + k tokens for each decoding request
(`num_tokens_with_spec - num_computed_tokens`), all counted in the token budget, so that the
requests at the end of the running list may get fewer of their drafts, or none, once it is spent
(`Scheduler.schedule`). `allocate_slots` gives the request KV slots for those 1 + k tokens plus
`num_lookahead_tokens` more (k with EAGLE, MTP or a draft model: the drafter's next proposals), capped
at the model's length. The draft positions are accepted in order while each is, each with its
position's rate given the ones before were (drawn with the run's seed), and the target samples
one token more (the bonus): the request keeps 1 + accepted tokens, at most the ones it still
needs. `update_from_output` rolls `num_computed_tokens` back by the rejected drafts; their slots
are written again next step, and the blocks they took stay with the request (vLLM frees a
request's blocks only when it finishes or is preempted): the map shows those held ahead of its KV.
With prefix caching, EAGLE's and MTP's blocks are hashed with the token after them too (the drafter's KV at a
block's last position reads it; `VllmConfig.num_hash_lookahead_tokens` = 1): a block is found only
by a prompt that goes on alike, so a shared prefix of whole blocks is found a block short.

The verify step is priced as a decode whose each request computes 1 + k tokens: per-token work
k + 1 times, each token attending to the context before it and the ones verified before it, the
request's KV read once (`verify_work`; at k = 0 it is the decode's own price).

The drafter (drafters.py: EAGLE's head, DeepSeek-V3's MTP module or a separate draft model) keeps
its layers' KV in every block beside the target's (vLLM's one KV cache group of both models' layers):
the pool has fewer blocks (`drafter_blocks`), from the memory left once its own weights are loaded
too. EAGLE's and MTP's one layer of the target's shape leave L / (L + 1) of the blocks; a draft
model's layers their own share, however its heads differ. A draft model's KV at a position reads no
later token, so its blocks are hashed as without drafts (vLLM's `num_hash_lookahead_tokens` is 0 for
it), and its input keeps one token more than the target's: each request it schedules takes one more
token of the budget (`draft_slots`: vLLM's `max_num_new_slots_for_drafting`, 1 for a draft model;
`Scheduler.schedule` gives a request at most the budget less it, and stops once no more is left).

The drafter's compute (vLLM's `propose`, padded drafter batch, its default): after the target's
forward the drafter runs once over every token the step scheduled (a decoding request's 1 + k,
rejected ones too, a prefill chunk's tokens), each reading its KV, with logits at one position per
request, then k - 1 more passes of one token per request, each attending one token further. Each
pass is priced by the cost model on the drafter's model alone (`Drafter.cost`: EAGLE's and MTP's a
one-layer model of the target's shape, a draft model its own spec; the same GPU, precisions and
tensor parallelism), as a prefill chunk per request for the first and a decode step for the others,
and each pays its own step overhead and all-reduce latencies (a forward of its own: `step_time`).
The step's time is the target's plus the passes'.

Not modelled here: the drafters' input projections' compute (EAGLE's fc also in memory), the
n-gram drafter (no lookahead slots), async scheduling, and models whose layers are not all alike.
SGLang's speculative decoding is radix_spec.py's, on `Verifying`.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.serving.loop.continuous_batching import ContinuousBatching
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.memory.prefix_caching import BlockPool, chain_hashes
from kvweb.serving.loop.sequence import Seq
from kvweb.serving.loop.step_cost import Coefficients, chunk_work, decode_coefficients
from kvweb.serving.schedulers.drafters import Drafter, drafter_blocks, make_drafter
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler
from kvweb.serving.load.workload import Image

MAX_SPEC_TOKENS = 16  # vLLM's EAGLE drafters propose a few tokens; more only slows the verify step


def parse_acceptance(text: str, k: int) -> tuple[float, ...]:
    """Each draft position's acceptance rate from "0.7" (every position) or "0.9,0.8,0.6" (one
    per position, k of them); ValueError with the one line that says what is allowed."""
    allowed = f"give one rate in [0, 1] or {k} rates, one per draft position, separated by commas"
    try:
        rates = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"acceptance: {text!r} is not allowed; {allowed}") from None
    if len(rates) == 1:
        rates *= k
    if len(rates) != k or not all(0.0 <= r <= 1.0 for r in rates):
        raise ValueError(f"acceptance: {text!r} is not allowed; {allowed}")
    return rates


def verify_work(coef: Coefficients, tokens: int, context: int) -> tuple[float, float]:
    """(FLOPs, bytes beyond the weights) of verifying `tokens` tokens (the last sampled one and its
    drafts) of a request holding `context` tokens of KV before the step."""
    _, fb, fc, _, bb, bc = coef
    attended = tokens * context + tokens * (tokens + 1) // 2  # token i attends to context + i + 1
    return fb * tokens + fc * attended, bb * tokens + bc * (context + tokens)


def draft_seconds(
    cost: CostModel, coef: Coefficients, first: tuple[float, float], requests: int, context: int, k: int
) -> float:
    """Seconds of the drafter's k passes in a step: the first over the step's tokens, its work
    `first` (the weights and every request's chunk, priced on `cost`, the drafter's), then k - 1
    passes of one token for each of the `requests`, which hold `context` tokens between them after
    the first; each pass a forward of its own."""
    f0, fb, fc, b0, bb, bc = coef
    seconds = cost.step_time(*first)
    for j in range(1, k):
        kv = context + j * requests  # each request's pass j attends to its draft j too
        seconds += cost.step_time(f0 + fb * requests + fc * kv, b0 + bb * requests + bc * kv)
    return seconds


def cover_next_token(hashes: list[Hashable], tokens: np.ndarray, block_size: int) -> None:
    """The last block's hash, made to cover the token after the block as well (vLLM's
    `get_request_block_hasher` with one lookahead token); the chain goes on from it."""
    i = len(hashes) - 1
    hashes[i] = hash((hashes[i], int(tokens[(i + 1) * block_size])))


@dataclass(frozen=True)
class Drafts:
    """What the drafter proposes and how much of it the target keeps."""

    k: int  # draft tokens per step (num_speculative_tokens; 0: today's decode, through this path)
    acceptance: tuple[float, ...]  # each position's rate, given the positions before it were accepted
    seed: int = 0
    drafter: str = "eagle"  # eagle, mtp or a draft model's name (drafters.py); "": a drafter priced as free

    def __post_init__(self) -> None:
        if not 0 <= self.k <= MAX_SPEC_TOKENS or len(self.acceptance) != self.k:
            raise ValueError(f"spec_tokens: {self.k} is not allowed; use 0 to {MAX_SPEC_TOKENS}, one rate each")


class Verifying(ContinuousBatching):
    """What every engine's scheduler that verifies drafts shares (vLLM V1's here, SGLang's in
    radix_spec.py): the seeded acceptance draws, what a request keeps of its drafts, the counts,
    and the drafter's forwards priced on its own cost model (see the module docstring)."""

    drafts: Drafts

    def _init_verifying(self, cost: CostModel, drafts: Drafts) -> None:
        self.drafts = drafts
        self.drafter: Drafter | None = make_drafter(drafts.drafter, cost.model) if drafts.drafter else None
        # P(at least j drafts accepted), j = 1..k: one uniform draw per request and step
        self._at_least: list[float] = []
        p = 1.0
        for rate in drafts.acceptance:
            p *= rate
            self._at_least.append(p)
        self._random = random.Random(drafts.seed)
        self.verifies = 0  # request-steps that verified drafts
        self.drafted = 0  # draft tokens verified
        self.accepted = 0  # of them, kept
        self.kept = 0  # tokens those request-steps kept (accepted + the bonus, up to the output)
        # the drafter's forwards: its cost model, its decode coefficients and its weights read once a pass
        self.drafting = bool(drafts.k and self.drafter)  # (no drafter: one priced as free)
        self.dcost = self.drafter.cost(cost) if self.drafter and drafts.k else cost
        self.dcoef = decode_coefficients(self.dcost)
        self._first = (0.0, 0.0)  # this step's first pass: work over the chunks so far
        self._requests = 0  # requests in this step
        self._context = 0  # the tokens they hold after it
        self.draft_s = 0.0  # seconds of drafter passes, summed over the run

    def _start_drafts(self) -> None:
        """A step begins: its drafter passes have read nothing yet."""
        self._first, self._requests, self._context = (self.dcoef[0], self.dcoef[3]), 0, 0

    def _draft_over(self, n: int, cached: int) -> None:
        """The drafter's first pass runs over a request's n tokens of this step, after `cached`."""
        f, b = chunk_work(self.dcost, self.dcoef[3], n, cached)
        self._first = (self._first[0] + f, self._first[1] + b)
        self._requests += 1
        self._context += cached + n

    def _drafts_seconds(self, passes: int) -> float:
        """Seconds of this step's drafter passes, the first and `passes` - 1 more (`draft_seconds`;
        0 when nothing was drafted)."""
        if not (self.drafting and self._requests):
            return 0.0
        drafting = draft_seconds(self.dcost, self.dcoef, self._first, self._requests, self._context, passes)
        self.draft_s += drafting
        return drafting

    def _keep(self, seq: Seq, n: int, step: int) -> int:
        """seq verified n tokens (0: it was not scheduled): it keeps the last sampled one's KV, the
        accepted drafts' and samples the bonus token, at most the tokens it still needs. Its base
        counts move by what it keeps beyond the loop's one token a step. Returns the tokens kept."""
        if n:
            drafts = n - 1
            u = self._random.random()
            accepted = sum(u < p for p in self._at_least[:drafts])
            kept = min(1 + accepted, seq.req.output - seq.generated(step))
            self.verifies += drafts > 0
            self.drafted += drafts
            self.accepted += accepted
            self.kept += kept
            self.generated += kept - 1  # (the loop counts one token for each request that decoded)
        else:
            kept = 0
        self.kv_tokens += kept
        if kept == 1:
            return kept
        finish = self.finish_at
        at = seq.step0 + seq.req.output - seq.gen0
        finish[at].remove(seq)
        if not finish[at]:
            del finish[at]
        seq.kv0 += kept - 1
        seq.gen0 += kept - 1
        finish.setdefault(at - kept + 1, []).append(seq)
        return kept

    def _drafts_figures(self) -> dict[str, Any]:
        """The drafts' counts: tokens kept per verifying request-step and the share accepted."""
        return {
            "spec_tokens": self.drafts.k,
            "acceptance": list(self.drafts.acceptance),
            "drafter": self.drafts.drafter,
            "drafter_layers": self.drafter.model.layers if self.drafter else 0,
            "drafter_weight_bytes": self.drafter.weight_bytes(self.cost) if self.drafter else 0.0,
            "verifies": self.verifies,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "kept": self.kept,
            "tokens_per_step": self.kept / self.verifies if self.verifies else 0.0,
            "accepted_frac": self.accepted / self.drafted if self.drafted else 0.0,
        }


class SpecV1Scheduler(Verifying, V1Scheduler):
    """`V1Scheduler` whose decoding requests verify k drafts a step (see the module docstring).

    Every iteration goes through `_iterate` (its quiet stretches are not arrays: requests move on
    by different counts). A request keeps the loop's clock (`Sequence.kv`: one token a step): its
    base counts move by what it kept beyond that one, and its finish by as many steps."""

    def __init__(
        self, cost: CostModel, config: V1Config, drafts: Drafts, slo: SLO = SLO(), give_up_after: int | None = None
    ) -> None:
        if config.async_scheduling:
            raise ValueError("speculative decoding with async scheduling is not simulated")
        super().__init__(cost, config, slo, give_up_after)
        if self.width > 1:
            raise ValueError(
                "speculative decoding under vLLM's KV cache groups (layers of several kinds) is not simulated"
            )
        self._init_verifying(cost, drafts)
        self.lookahead = drafts.k  # EAGLE's, MTP's and a draft model's num_lookahead_tokens
        self.draft_slots = self.drafter.input_slots if self.drafter else 0
        self.next_token_hashes = self.drafter.next_token if self.drafter else True
        # the drafter's layers in every block: fewer blocks (the null block still out of use)
        self.pool = BlockPool(drafter_blocks(cost, self.bs, self.drafter) - 1, self.bs)
        self.capacity = self.pool.n_blocks * self.bs
        self.ahead_s = 0.0  # token-seconds of blocks held wholly ahead of running requests' KV

    def may_be_quiet(self) -> bool:
        return False

    @property
    def lookahead_hashes(self) -> bool:
        """Blocks hashed with the token after them: EAGLE and MTP (lookahead slots) under prefix
        caching, not a draft model."""
        return bool(self.lookahead and self.config.prefix_caching and self.next_token_hashes)

    def _hashes(self, seq: Seq, blocks: int) -> list:
        if not self.lookahead_hashes or seq.req.tokens is None:
            return super()._hashes(seq, blocks)
        tokens = seq.content()
        while len(seq.hashes) < blocks:  # one block at a time: each chains on the one covering its next token
            super()._hashes(seq, len(seq.hashes) + 1)
            cover_next_token(seq.hashes, tokens, self.bs)
        return seq.hashes

    def cached_prefix(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        if not self.lookahead_hashes:  # (images and drafts together are not simulated)
            return super().cached_prefix(tokens, adapter, images)
        tokens = np.asarray(tokens, dtype=np.int64)
        hashes: list[Hashable] = []
        for blocks in range(1, (len(tokens) - 1) // self.bs + 1):  # the last token is no block's next
            chain_hashes(tokens, self.bs, hashes, blocks)
            cover_next_token(hashes, tokens, self.bs)
        return len(self.pool.lookup(hashes)) * self.bs

    def never_fits(self, final_kv: int) -> str | None:
        # its last step holds slots for its drafts and lookahead past its last token
        return super().never_fits(min(final_kv + self.drafts.k + self.lookahead, self.max_len))

    def _iterate(self) -> tuple[float, int, list[Seq], int, int, int]:
        self._start_drafts()
        out = super()._iterate()
        out = (out[0] + self._drafts_seconds(self.drafts.k), *out[1:])
        # the blocked head's note (`V1Scheduler._blocked`) assumes its first chunk only grows with the
        # budget; a padded one shrinks when no decode runs: look at the head again every step
        self._blocked = (None, -1, -1, -1)
        bs = self.bs
        ahead = sum(len(s.blocks) - -(-s.kv(self.dstep) // bs) for s in self.running.values())
        ahead += sum(len(s.blocks) - -(-s.computed // bs) for s in self.prefilling)
        self.ahead_s += ahead * bs * out[0]
        return out

    def _chunk_work(self, n: int, cached: int) -> tuple[float, float]:
        if self.drafting:
            self._draft_over(n, cached)
        return super()._chunk_work(n, cached)

    def _first_chunk(self, uncached: int, hit: int, budget: int, running: bool, chunked: bool) -> int:
        """A waiting request with one token to compute, while running requests decode, is padded to
        a decode's 1 + k tokens (placeholder drafts, all rejected) when they fit the model's length,
        or waits if they do not fit the budget (vLLM pads it to keep the step's decodes uniform)."""
        k = self.drafts.k
        if k and uncached == 1 and not chunked and (running or hit) and hit + 2 + k <= self.max_len:
            return 1 + k if 1 + k <= budget else 0
        return min(uncached, budget)

    def _decode(self) -> tuple[bool, float, float, int]:
        """Each running request in order takes 1 + k tokens of the budget (fewer at its end; a draft
        model's input slot more) and slots for them and its lookahead, preempting the tail while they
        do not fit; then keeps its accepted drafts and the bonus token."""
        pool, bs, k, step, slots = self.pool, self.bs, self.drafts.k, self.dstep, self.draft_slots
        f0, _, _, b0, _, _ = coef = self.coef
        flops, nbytes, budget, preempted, decoded, stopped = f0, b0, self.config.token_budget, False, 0, False
        for seq in list(self.running.values()):
            if seq.id not in self.running:
                continue  # preempted for an earlier request's blocks
            kv = seq.kv(step)  # num_computed_tokens
            n = 0 if stopped else max(0, min(1 + k, budget - slots, self.max_len - 1 - kv))
            if n > 0:
                need = -(-min(kv + n + self.lookahead, self.max_len) // bs) - len(seq.blocks)
                while need > len(pool.free) and self._preempt_tail() is not seq:
                    preempted = True
                if seq.id not in self.running:
                    preempted, stopped = True, True  # it was the tail: nothing more is scheduled
                    continue
                if need > 0:
                    seq.blocks += pool.take(need)
            else:
                stopped = stopped or budget <= slots
            self._keep(seq, n, step)
            if n > 0 and self.drafting:
                self._draft_over(n, kv)
                self._context -= n - (seq.kv(step + 1) - kv)  # its drafts go on after the tokens it kept
            if n > 0:
                f, b = verify_work(coef, n, kv)
                flops, nbytes, budget, decoded = flops + f, nbytes + b, budget - n - slots, decoded + 1
        self.dstep += 1
        self.decoded = decoded
        return preempted, flops, nbytes, budget

    def figures(self, sim_time: float) -> dict[str, float | int]:
        """What the drafts did: tokens kept per verifying request-step, the share of drafts accepted,
        and the KV capacity held ahead of requests' KV (whole blocks), time-averaged; the blocks the
        GPU has with the drafter's layers in them (vLLM's null block among them)."""
        span = sim_time * self.capacity
        return {
            **self._drafts_figures(),
            "kv_blocks": self.pool.n_blocks + 1,
            "ahead_frac": self.ahead_s / span if span else 0.0,
        }
