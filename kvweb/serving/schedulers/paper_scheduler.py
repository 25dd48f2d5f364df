"""The papers' engine (vLLM 2023, SPEC 3) as a scheduler on the shared loop: whole prefills,
a KV memory manager (paged with a watermark, or reserved), preemption by swap or recompute.

Each iteration (`PaperScheduler._iterate`; the loop, `continuous_batching`, does the rest):
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

A running sequence's length is a function of the step (kept as a base step and base length),
finishing steps are known when a sequence starts, and the memory manager finds who needs a block
this step by phase (see paged_memory). Every step decodes every running sequence, so the step
counter is the sequences' decode counter too (`dstep` = `step`). The quiet steps (only decoding)
run in `paper_quiet.py`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from kvweb.gpu import CostModel, LLMSpec
from kvweb.serving.loop.continuous_batching import NOTHING, ContinuousBatching
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.memory.paged_memory import BLOCK_SIZE
from kvweb.serving.schedulers.paper_quiet import PaperQuietSteps
from kvweb.serving.loop.sequence import LoopSeq, Seq, Sequence


class MemoryManager(Protocol):
    """What the papers' engine needs from a KV memory manager (paged or reserved)."""

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


def paper_refusal(model: LLMSpec) -> str | None:
    """Why the papers' engine cannot serve this model, or None: it pages every layer alike, so only
    models whose layers are all full or latent attention."""
    kinds = sorted({a.kind for a, _ in model.groups} - {"full", "latent"})
    if not kinds:
        return None
    return (
        f"paper: {model.name} has {' and '.join(kinds)} attention layers; the papers' engine (vLLM, 2023) "
        "pages every layer alike, so it is not run on it"
    )


@dataclass(frozen=True)
class PaperConfig:
    max_len: int  # the model's limit on prompt + output
    preemption: str = "recompute"  # or "swap"
    block_size: int = BLOCK_SIZE  # swap copies whole blocks, paying a per-block overhead
    max_seqs: int = 256  # running sequences per step (vLLM's max_num_seqs)
    max_batch_tokens: int = 0  # prefill tokens per step; 0 means max_len
    host_tokens: int | None = None  # swap space; None means the GPU's KV capacity


class PaperScheduler(PaperQuietSteps, ContinuousBatching):
    kind = "paper"
    seq_type = LoopSeq
    itl_is_step_time = True  # whole prefills: every decoding sequence got its last token one step ago

    def __init__(
        self,
        cost: CostModel,
        memory: MemoryManager,
        config: PaperConfig,
        slo: SLO = SLO(),
        give_up_after: int | None = None,
    ) -> None:
        """`give_up_after`: stop once more than this many requests missed the SLO (a max-rate
        search only needs to know that the target is out of reach)."""
        if config.preemption not in ("recompute", "swap"):
            raise ValueError("preemption must be 'recompute' or 'swap'")
        super().__init__(cost, config.max_len, config.max_seqs, slo, give_up_after)
        self.memory = memory
        self.config = config
        self.capacity = memory.capacity
        self.budget = config.max_batch_tokens or config.max_len
        if self.budget < config.max_len:
            raise ValueError("max_batch_tokens must be at least max_len, or a long prompt could never start")
        host = cost.kv_capacity_tokens if config.host_tokens is None else config.host_tokens
        self.host_blocks = host // config.block_size
        self.host_free = self.host_blocks
        self.evicted: deque[Seq] = deque()  # preempted, by arrival: comes back before anything new
        # The queue's head did not fit and nothing has left since: memory only grows fuller
        # until a sequence leaves, so trying again before that is wasted work.
        self.blocked = False

    # -- one iteration -----------------------------------------------------------
    def _iterate(self) -> tuple[float, int, list[Seq], int, int, int]:
        mm, step = self.memory, self.step
        swap_s = self._make_room(step) if mm.shortfall(step) > 0 else 0.0
        mm.grow(step)
        self.dstep = step
        self.decoded = batch = len(self.running)
        f0, fb, fc, b0, bb, bc = self.coef
        self.kv_tokens = context = self.kv_tokens + batch
        flops = f0 + fb * batch + fc * context
        nbytes = b0 + bb * batch + bc * context
        fresh = NOTHING
        if (self.waiting or self.evicted) and not self.blocked:
            joined, decoders, ctx, pf_flops, pf_bytes, s, fresh = self._admit(step)
            flops += fb * decoders + fc * ctx + pf_flops
            nbytes += bb * decoders + bc * ctx + pf_bytes
            swap_s += s
            batch += joined
        return self.cost.step_time(flops, nbytes) + swap_s, batch, fresh, mm.occupied, self.kv_tokens, 0

    def _admit(self, step: int) -> tuple[int, int, int, float, float, float, list[Seq]]:
        """Bring back preempted work, then admit new requests, FCFS with head-of-line blocking.

        Returns (sequences joined, swapped-in decoders, their context, prefill FLOPs, prefill
        bytes beyond the weights, swap seconds, sequences getting their first token).
        """
        mm, cost, bs = self.memory, self.cost, self.config.block_size
        joined = decoders = context = 0
        flops = nbytes = swap_s = 0.0
        fresh: list[Seq] = []
        budget = self.budget
        queue = self.evicted or self.waiting
        while queue:
            seq = queue[0]
            tokens = seq.req.prompt + seq.gen0  # what it holds after this step
            if not seq.on_host and tokens > budget:
                break  # the prefill budget is per step: try again next step
            if len(self.running) >= self.max_seqs or not mm.admit(seq, tokens, step):
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
                nbytes += b - self.weights
                budget -= tokens
                if seq.gen0:
                    self._event("recompute", seq)
            if seq.spans:
                self.preempted -= 1
            seq.computed = tokens
            seq.spans.append([self.now, 0.0])
            self._sampled(seq, fresh)
            joined += 1
            if not self.evicted:
                queue = self.waiting
        return joined, decoders, context, flops, nbytes, swap_s, fresh

    def _make_room(self, step: int) -> float:
        """Evict latest-arrived running sequences until this step's growth fits.

        Returns the seconds spent swapping out. A victim that does not fit in the host swap
        space is recomputed instead.
        """
        mm, cost, bs = self.memory, self.cost, self.config.block_size
        swap_s = 0.0
        while mm.shortfall(step) > 0:
            seq = next(reversed(self.running.values()))
            kv = self._stop_decoding(seq)
            blocks = -(-kv // bs)
            if self.config.preemption == "swap" and blocks <= self.host_free:
                self.host_free -= blocks
                seq.on_host = True
                swap_s += cost.swap_cost(kv, bs)
                self.swapped_bytes += kv * cost.kv_bytes_per_token
                self._preempt(seq, "swap_out")
            else:
                self._preempt(seq)
            self.evicted.appendleft(seq)
        return swap_s

    def _event(self, kind: str, seq: Seq) -> None:
        """Record a preemption, swap or recompute with the KV it drops or moves (the
        prompt + generated - 1 tokens a sequence holds between steps) and its cells."""
        if self.trace is not None:
            self.trace.event(
                self.now, kind, seq.id, seq.req.prompt + seq.gen0 - 1, self.memory.held_cells(seq, self.trace.max_cells)
            )

    # -- memory ----------------------------------------------------------------------
    def _release(self, seq: Seq, finished: bool) -> None:
        self.memory.free(seq)
        self.blocked = False  # memory was freed: the queue's head may fit now

    def never_fits(self, final_kv: int) -> str | None:
        return self.memory.never_fits(final_kv)

    @property
    def busy(self) -> bool:
        return bool(self.evicted)

    @property
    def occupied(self) -> int:
        return self.memory.occupied

    @property
    def used(self) -> int:
        return self.kv_tokens

    @property
    def cached(self) -> int:
        return 0

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        return self.memory.memory_map(step, max_cells)
