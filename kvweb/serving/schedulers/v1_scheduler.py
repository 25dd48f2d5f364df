"""vLLM V1's scheduler on the paper GPU, as released in vLLM 0.33.0: one token budget per step,
chunked prefill, automatic prefix caching, recompute-only preemption
(vllm/v1/core/sched/scheduler.py, `Scheduler.schedule`). tests/test_parity_vllm.py replays vLLM's
own recorded decisions on it, step by step.

Each iteration (V1 has no prefill or decode phase; a request's computed tokens catch up with its
tokens):
1. Running requests first, in the order they started: each decoding request takes one token of
   the budget (`max_num_batched_tokens`) and a new block when its last one is full. While the
   blocks do not suffice, the last running request is preempted (`self.running.pop()`): it frees
   its blocks, forgets its progress and goes to the front of the waiting queue. A request still
   prefilling takes min(rest of its prompt, budget left) tokens: its next chunk.
2. Only if nothing was preempted: waiting requests, first come first served, while budget,
   `max_num_seqs` and memory allow. A request that has not started looks up its longest run of
   cached full blocks (at most prompt - 1 tokens: one token must be computed for the logits),
   then takes blocks for its first chunk, if the blocks for its whole uncached prompt are free
   (`scheduler_reserve_full_isl`; or only its first chunk's, the older rule); the first that
   does not fit stops admission.
3. Full blocks get their chained hash (`prefix_caching.BlockPool`); a finished request's blocks
   stay cached, free, until an allocation needs them. vLLM keeps one block out of use (the null
   block). With async scheduling a finished request keeps its blocks and batch slot through the
   next iteration (`leaving`).
4. With LoRA adapters (`lora`, serving/memory/lora.py): the adapters' GPU slots come out of the
   KV blocks; a waiting request whose adapter is not among the batch's, when the batch already
   has `max_loras`, is skipped and stays waiting in its place, and the requests behind it are
   still tried (vLLM's `scheduled_loras` check, its `skipped_waiting_requests` put back in front);
   an adapter not in a slot is loaded over the host link, and the step waits for it. A block's
   hash starts from the request's adapter (vLLM puts the LoRA's name in every block's hash,
   `kv_cache_utils._gen_lora_extra_hash_keys`), so one adapter's prefix is no hit for another.
5. With images (`encoder`, serving/memory/encoder_cache.py): a chunk overlapping an image's
   placeholders needs its embeddings, from the encoder cache (by mm hash: a second request with the
   same image hits) or computed in this step within the encoder budget and the cache's room; else
   the chunk is cut just before the image (`_try_schedule_encoder_inputs`, for running and waiting
   requests alike; a request cut to nothing is passed over, a waiting one staying in its place).
   A request releases an image once its computed tokens pass it (`_free_encoder_inputs`, after
   the step), or when it leaves. The encoder's time is added to the step's. A block holding an
   image's placeholders hashes the image's mm hash too (`_gen_mm_extra_hash_keys`).
6. With a host tier (`host_blocks`, the OffloadingConnector: serving/memory/host_tier.py) every block is
   also written to host memory as its hash is entered, and an admitted request's lookup runs on
   in the host after its GPU hits: those blocks are loaded into fresh GPU blocks (the step waits).

Because decoding requests are served before prefills and V1 requires the budget to be at least
`max_num_seqs`, every decoding request decodes in every iteration, and a request still
prefilling is always at the tail of the running list (it took all the budget that was left).
Blocks filled by decoding get their hash when the request leaves or is preempted (vLLM hashes
them as they fill); only another request whose prompt holds this request's generated tokens
could tell, and such a request (a later chat turn) arrives after this one has finished.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import chain, islice

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.gpu.specs import GPUSpec
from kvweb.serving.loop.continuous_batching import (
    K_AHEAD,
    K_CACHED,
    K_FREE,
    K_SHARED,
    NOTHING,
    ContinuousBatching,
    key_cells,
)
from kvweb.serving.loop.engine_trace import GroupMap, cell_group
from kvweb.serving.memory.encoder_cache import EncoderCache, EncoderConfig, encoder_seconds, image_block_keys
from kvweb.serving.memory.host_tier import HostTier
from kvweb.serving.memory.hybrid_kv import GroupedPool, group_maps, grouped_memory_map, kv_layout
from kvweb.serving.memory.lora import AdapterSlots, LoraConfig, hash_root
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.memory.paged_memory import BLOCK_SIZE
from kvweb.serving.memory.prefix_caching import BlockPool, chain_hashes
from kvweb.serving.loop.sequence import Seq
from kvweb.serving.loop.step_cost import chunk_work
from kvweb.serving.schedulers.v1_quiet import V1QuietSteps
from kvweb.serving.load.workload import Image


def default_token_budget(gpu: GPUSpec) -> int:
    """vLLM's max_num_batched_tokens for an API server (EngineArgs.get_batch_defaults): 8192 on GPUs of
    70 GiB and more except A100s (a larger budget lowered A100 throughput, vLLM PR #17885), else 2048."""
    return 8192 if gpu.hbm_bytes >= 70 * 2**30 and "A100" not in gpu.name else 2048


def block_pool_match(pool: BlockPool, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
    """Tokens of `tokens` under `adapter` in vLLM's block cache: its whole blocks whose chained
    hashes (with the mm hashes of the `images` whose placeholders they hold) are all in the table
    (a lookup, which changes nothing)."""
    hashes: list[Hashable] = []
    bs = pool.block_size
    extra = image_block_keys(images, bs) if images else None
    chain_hashes(np.asarray(tokens, dtype=np.int64), bs, hashes, len(tokens) // bs, hash_root(adapter), extra)
    return len(pool.lookup(hashes)) * bs


@dataclass(frozen=True)
class V1Config:
    max_len: int  # the model's limit on prompt + output
    block_size: int = BLOCK_SIZE
    max_seqs: int = 256  # max_num_seqs
    token_budget: int = 2048  # max_num_batched_tokens (vLLM's default for an API server on an A100)
    prefix_caching: bool = True  # enable_prefix_caching (on by default in V1)
    full_prompt_check: bool = True  # scheduler_reserve_full_isl (on by default since vLLM PR #37307)
    async_scheduling: bool = False  # AsyncScheduler (on by default in vLLM 0.33.0)
    host_blocks: int = 0  # the OffloadingConnector's CPU blocks (0: no host tier); needs prefix caching
    lora: LoraConfig | None = None  # LoRA adapters' slots and max_loras (None: requests carry none)
    encoder: EncoderConfig | None = None  # images' encoder budget and cache (None: requests carry none)


class V1Scheduler(V1QuietSteps, ContinuousBatching):
    """vLLM V1's scheduler (see the module docstring). methods: 29, because vLLM's own `Scheduler`
    keeps scheduling, preemption and its calls into the KV cache manager (prefix hits, block hashes)
    in one class, and 11 of them are the loop's `SchedulerInterface`."""

    kind = "vllm-v1"

    def __init__(self, cost: CostModel, config: V1Config, slo: SLO = SLO(), give_up_after: int | None = None) -> None:
        if config.token_budget < config.max_seqs:
            raise ValueError("the token budget must be at least max_seqs, as vLLM requires")
        super().__init__(cost, config.max_len, config.max_seqs, slo, give_up_after)
        self.config = config
        # Layers of several kinds (windows, linear states): vLLM's hybrid manager, its groups on one
        # pool of blocks (serving/memory/hybrid_kv.py), the block size raised for linear layers
        layout = kv_layout(cost, config.block_size)
        self.bs = layout.block_size
        # vLLM keeps one block out of use, the null block (`BlockPool.null_block`, block 0)
        self.pool = (
            GroupedPool(layout, layout.blocks(cost) - 1)
            if layout.hybrid
            else BlockPool(cost.kv_capacity_blocks(self.bs) - 1, self.bs)
        )
        if config.lora:  # the adapters' slots are allocated before the KV cache
            if layout.hybrid:
                raise ValueError("LoRA under vLLM's KV cache groups (layers of several kinds) is not simulated")
            self.pool = BlockPool(config.lora.kv_blocks(cost, self.bs) - 1, self.bs)
        self.adapters = AdapterSlots(config.lora, cost) if config.lora else None
        self._passed_over: tuple | None = None  # the waiting queue and adapters when every waiting request was skipped
        if config.encoder and layout.hybrid:
            raise ValueError("images under vLLM's KV cache groups (layers of several kinds) are not simulated")
        self.encoder = EncoderCache(config.encoder.cache_size) if config.encoder else None
        self._encoded: list[Seq] = []  # requests with images that computed tokens in this step
        # Async scheduling: the last iteration's `_encoded` and its decode step, its output not read yet
        self._unread: tuple[list[Seq], int] = ([], 0)
        self.width = len(layout.groups) if layout.hybrid else 1  # blocks a request's block takes, one per group
        self.capacity = self.pool.n_blocks * self.bs
        self.prefilling: list[Seq] = []  # running requests still computing: the tail of the running list
        # Async scheduling: requests that finished in the last iteration. The next iteration is
        # scheduled before their last tokens are known, so they keep their blocks and batch slots
        # through it (they are skipped: no token, no new block).
        self.leaving: list[Seq] = []
        self._due: list[dict[int, Seq]] = [{} for _ in range(self.bs)]  # phase -> decoding requests
        self._started: list[Seq] = []  # hybrid models: requests that started decoding in the last iteration
        # The waiting queue's head did not fit with this many free blocks, this table version (None:
        # no cached block can be its) and this budget: while it stays the head and until blocks are
        # freed, the table changes or the budget shrinks, it still does not (decoding only takes
        # blocks), so it is not retried.
        self._blocked: tuple[Seq | None, int, int | None, int] = (None, -1, -1, -1)
        if config.host_blocks and layout.hybrid:  # the tier keeps whole blocks of every layer
            raise ValueError("a host tier under vLLM's KV cache groups (layers of several kinds) is not simulated")
        self.tier = (
            HostTier(config.host_blocks, self.bs, cost) if config.host_blocks and config.prefix_caching else None
        )
        self.host_hit_tokens = 0  # prompt tokens of first admissions loaded from the host tier
        self.lookahead = 0  # slots a running request holds past its new tokens (spec_decode.py)
        # budget each scheduled request takes beside its tokens (vLLM's `max_num_new_slots_for_drafting`:
        # a draft model's input keeps one token more, spec_decode.py)
        self.draft_slots = 0

    def never_fits(self, final_kv: int) -> str | None:
        need = -(-final_kv // self.bs)
        if need * self.width > self.pool.n_blocks:
            groups = f" in each of {self.width} KV cache groups" if self.width > 1 else ""
            return (
                f"needs {need} blocks of {self.bs} tokens{groups}; the GPU holds {self.pool.n_blocks + 1}, "
                "one of them vLLM's null block"
            )
        return None

    @property
    def busy(self) -> bool:
        return bool(self.prefilling)

    def _idle(self) -> None:
        self._leave()  # an idle engine has read every step's output
        if self.encoder:
            self._read_encoded()

    def _leave(self) -> None:
        """Free the blocks, adapters and images of the requests that finished in the iteration before
        the last one."""
        for seq in self.leaving:
            self._let_go(seq)
            self.pool.release(seq.blocks)
            seq.blocks = []
        self.leaving = []

    # -- one iteration -----------------------------------------------------------
    def _iterate(self) -> tuple[float, int, list[Seq], int, int, int]:
        if self.width > 1:
            self._slide()
        if self._unread[0] and self._unread[1] != self.dstep:  # quiet iterations ran since: it was read
            self._read_encoded()
        # With async scheduling the last iteration's output is read once this one is scheduled: finished
        # requests leave (their blocks, adapters and slots) and passed images are released only then.
        unread = bool(self.leaving or self._unread[0])
        out = self._schedule(len(self.leaving))
        self._leave()
        if not out[1] and unread:  # nothing could run before that output was read: vLLM's empty step, merged
            out = self._schedule(0)
        if self.width > 1:  # whole blocks: what running requests hold, each shared block once
            out = (*out[:4], out[3] - self.pool.shared_extra * self.bs, out[5])
        return out

    def _slide(self) -> None:
        """Window groups free the blocks out of each running request's window (vLLM's
        `remove_skipped_blocks`, here for every request before anything is allocated). A decoding
        request's skipped blocks grow only in the iterations its KV is `kept` tokens past a block
        boundary (a phase of `_due`), or in the first after it started decoding."""
        slide, dstep, bs, running = self.pool.slide, self.dstep, self.bs, self.running
        for seq in self._started:
            if seq.id in running:  # (not finished or preempted since)
                slide(seq.blocks, seq.kv(dstep))
        self._started = []
        for kept, _ in self.pool.windows:
            for seq in self._due[(dstep + 1 - kept) % bs].values():
                slide(seq.blocks, seq.kv(dstep))
        for seq in self.prefilling:
            slide(seq.blocks, seq.computed)

    def _decode(self) -> tuple[bool, float, float, int]:
        """The running requests' decode: each takes one token of the budget and a new block when its
        last one is full (preempting the tail while they do not fit), and the decode counter moves
        on. Returns (whether a request was preempted, the step's FLOPs and bytes so far, the budget
        left); sets `decoded` and `kv_tokens`."""
        pool = self.pool
        due = self._due[(self.dstep + 1) % self.bs]  # decoding requests whose last block is full
        preempted = False
        if due:
            while len(due) * self.width > len(pool.free):
                self._preempt_tail()
                preempted = True
            for seq, block in zip(due.values(), pool.take(len(due))):
                seq.blocks.append(block)
        self.dstep += 1
        self.decoded = decoders = len(self.running)
        self.kv_tokens = kv = self.kv_tokens + decoders
        f0, fb, fc, b0, bb, bc = self.coef
        budget = self.config.token_budget - decoders
        return preempted, f0 + fb * decoders + fc * kv, b0 + bb * decoders + bc * kv, budget

    def _chunk_work(self, n: int, cached: int) -> tuple[float, float]:
        """A prefill chunk's (FLOPs, bytes beyond the weights): n tokens after `cached` (a subclass
        prices what else the chunk costs: the drafter's pass over it, spec_decode.py)."""
        return chunk_work(self.cost, self.weights, n, cached)

    def _schedule(self, leaving: int) -> tuple[float, int, list[Seq], int, int, int]:
        """One iteration while `leaving` finished requests still hold batch slots (async scheduling)."""
        pool, bs = self.pool, self.bs
        preempted, flops, nbytes, budget = self._decode()
        decoders, kv = self.decoded, self.kv_tokens
        head, free, version, blocked_budget = self._blocked
        blocked = (
            len(pool.free) <= free
            and version in (None, pool.version)
            and budget >= blocked_budget
            and self.waiting
            and self.waiting[0] is head
        )
        if not (self.prefilling or preempted) and (not self.waiting or blocked):
            # only decodes (the common case): nothing else can be scheduled
            return (
                self.cost.step_time(flops, nbytes),
                decoders,
                NOTHING,
                (pool.n_blocks - len(pool.free)) * bs,
                kv - pool.shared_extra * bs,
                pool.reusable * bs,
            )
        batch = decoders
        chunked = False  # a request still prefilling got its next chunk
        fresh: list[Seq] = []
        load_s = 0.0  # the host tier's and adapters' loads: the step waits for them (host_tier.py, lora.py)
        encode: list[int] = []  # images the encoder computes in this step, their lengths
        encoder_budget = self.config.encoder.budget if self.encoder else 0
        for seq in list(self.prefilling) if self.prefilling else ():  # the next chunk of each request prefilling
            if seq not in self.prefilling:
                continue  # preempted for an earlier one's chunk
            n = min(seq.tokens_to_compute - seq.computed, budget - self.draft_slots)
            if n <= 0:
                break  # the budget is spent (vLLM schedules running requests while budget is left)
            images: list = []  # the images the encoder computes for it, and those it finds cached
            found: list = []
            if seq.req.images:
                n, encoder_budget = self.encoder.schedule(
                    seq.id, seq.req.images, seq.computed, n, encoder_budget, images, found
                )
                if not n:
                    continue  # its image cannot be computed in this step: passed over
            # a running request's chunk takes its lookahead's slots too (`allocate_slots`)
            need = max(-(-min(seq.computed + n + self.lookahead, self.max_len) // bs) - len(seq.blocks), 0)
            while need * self.width > len(pool.free) and self._preempt_tail() is not seq:
                preempted = True
            if seq not in self.prefilling:
                preempted = True
                break
            seq.blocks += pool.take(need)
            chunked = True
            if seq.req.images:
                encode += self._encode(seq, images, found)
            f, b = self._chunk_work(n, seq.computed)
            flops, nbytes, budget, batch = flops + f, nbytes + b, budget - n - self.draft_slots, batch + 1
            seq.computed += n
            self._register(seq, seq.computed)
            if seq.computed == seq.tokens_to_compute:
                self.prefilling.remove(seq)
                self._start_decoding(seq, fresh)
        if self.waiting and not preempted and not blocked:
            running = batch > 0  # running requests were scheduled in this step
            skipped = 0  # waiting requests whose adapter the batch has no room for: they stay in place
            cut = 0  # of them, requests whose image the encoder cannot take in this step (vLLM's `skip_request`)
            # Every one was skipped in the last scan, and since then no request joined the queue at either
            # end, none left it and the batch's adapters are the same: each is skipped again.
            if self.adapters:
                passed = (len(self.waiting), self.waiting[0], self.waiting[-1], self.adapters.users.keys())
                if passed == self._passed_over:
                    skipped = len(self.waiting)
            while (
                len(self.waiting) > skipped
                and budget > self.draft_slots
                and len(self.running) + len(self.prefilling) + leaving < self.max_seqs
            ):
                seq = self.waiting[skipped]
                if self.adapters and not self.adapters.admits(seq.req.adapter):
                    skipped += 1
                    continue
                total = seq.tokens_to_compute
                hits = self._hits(seq, total)
                loaded = self._host_hits(seq, total, len(hits)) if self.tier else ()
                hit = (len(hits) + len(loaded)) * bs
                n = self._first_chunk(total - hit, hit, budget - self.draft_slots, running, chunked)
                images, found = [], []
                if n and seq.req.images:
                    n, new_budget = self.encoder.schedule(seq.id, seq.req.images, hit, n, encoder_budget, images, found)
                    if not n:  # its image cannot be computed: it stays in place, the ones behind it are tried
                        skipped += 1
                        cut += 1
                        continue
                if not n:
                    break
                # its first chunk's slots and its lookahead's (`allocate_slots`)
                new = -(-min(hit + n + self.lookahead, self.max_len) // bs) - len(hits)
                # the whole prompt must fit too (vLLM's `full_sequence_must_fit`), or only its first chunk
                must_fit = max(-(-total // bs) - len(hits), new) if self.config.full_prompt_check else new
                if must_fit * self.width + pool.evictable(hits) > len(pool.free):
                    if self.encoder:  # tried again each step (its images' references and evictions), as in vLLM
                        self.encoder.leave(seq.id, seq.req.images)  # (vLLM frees its references here)
                        break
                    self._blocked = (seq, len(pool.free), pool.version if self._may_hit(seq) else None, budget)
                    if self._may_hit(seq):
                        # Losing a found block that is free (the only kind an allocation takes) costs a
                        # new block and a free one at once: it can only help if only the first chunk
                        # must fit and the prompt's rest then no longer fits the budget (total > budget).
                        losing_helps = total > budget - self.draft_slots and not self.config.full_prompt_check
                        pool.watch(hits if losing_helps else [], seq.hashes[: (total - 1) // bs])
                    break  # head-of-line blocking, as in vLLM
                del self.waiting[skipped]
                if self.adapters:
                    load_s += self.adapters.join(seq.req.adapter)
                if seq.spans:
                    self.preempted -= 1
                pool.touch(hits)
                seq.blocks = hits + pool.take(new)
                if seq.req.images:
                    encoder_budget = new_budget
                    encode += self._encode(seq, images, found)
                seq.registered = len(hits)
                if loaded:
                    load_s += self.tier.load(loaded)
                self._admitted(seq, hit)
                if self.tier and len(seq.spans) == 1:
                    self.host_hit_tokens += len(loaded) * bs
                    self.tier.hit(self.now, self.host_hit_tokens, self.prompt_tokens)
                f, b = self._chunk_work(n, hit)
                flops, nbytes, budget, batch = flops + f, nbytes + b, budget - n - self.draft_slots, batch + 1
                seq.computed = min(hit + n, total)  # (past it: placeholder drafts, rejected)
                self._register(seq, seq.computed)
                if seq.computed == total:
                    self._start_decoding(seq, fresh)
                else:
                    self.prefilling.append(seq)
            if self.adapters:
                self.adapters.note(self.now, skipped - cut)
                self._passed_over = (
                    (len(self.waiting), self.waiting[0], self.waiting[-1], set(self.adapters.users))
                    if skipped and skipped == len(self.waiting) and not cut
                    else None
                )
        if self.encoder:
            self._after_encoding()
        used = self.kv_tokens - pool.shared_extra * bs
        for seq in self.prefilling:
            used += seq.computed
        return (
            self.cost.step_time(flops, nbytes) + load_s + encoder_seconds(self.cost, encode),
            batch,
            fresh,
            (pool.n_blocks - len(pool.free)) * bs,
            used,
            pool.reusable * bs,
        )

    def _encode(self, seq: Seq, images: list, found: list) -> list[int]:
        """seq is scheduled: the encoder computes `images` for it (their embeddings take cache room;
        those an encode replica sent are loaded instead), the `found` ones are hits; the lengths of
        those computed. It releases the images it passes after the step (`_after_encoding`)."""
        self.encoder.commit(seq.id, images, found)
        self._encoded.append(seq)
        return [image.length for image in images if image.mm_hash not in self.encoder.remote]

    def _after_encoding(self) -> None:
        """After the step (vLLM's `update_from_output`): the requests that computed tokens release
        the images they have passed; the cache's figures are noted. With async scheduling a step's
        output is read once the next one is scheduled: the last step's requests release theirs now,
        this step's then."""
        if self.config.async_scheduling:
            self._read_encoded()
            self._unread = (self._encoded, self.dstep)
        else:
            for seq in self._encoded:
                self.encoder.passed(seq.id, seq.req.images, seq.computed)
        self._encoded = []
        self.encoder.note(self.now)

    def _read_encoded(self) -> None:
        """Async scheduling: the last step's output is read; its requests release the images their
        computed tokens have passed (vLLM counts the tokens scheduled since, too)."""
        for seq in self._unread[0]:
            self.encoder.passed(seq.id, seq.req.images, seq.computed)
        self._unread = ([], 0)

    def _first_chunk(self, uncached: int, hit: int, budget: int, running: bool, chunked: bool) -> int:
        """The tokens a waiting request computes in this step, its `uncached` tokens after `hit` cached
        ones: its first chunk (0: admission stops). `running`: running requests were scheduled in
        this step; `chunked`: one of them a prefill chunk (spec_decode.py reads them)."""
        return min(uncached, budget)

    def _start_decoding(self, seq: Seq, fresh: list[Seq]) -> None:
        self._sampled(seq, fresh)
        seq.phase = (self.dstep + 1 - seq.computed) % self.bs
        self._due[seq.phase][seq.id] = seq
        if self.width > 1:
            self._started.append(seq)

    def _preempt_tail(self) -> Seq:
        """Preempt the last running request (vLLM's `self.running.pop()`); returns it."""
        if self.prefilling:
            seq = self.prefilling.pop()
            known = seq.computed
        else:
            seq = next(reversed(self.running.values()))
            decoded = seq.kv(self.dstep) > seq.kv0
            self._stop_decoding(seq)
            # Async scheduling: the token sampled in the last step is not known yet, so vLLM has not
            # hashed the block its KV completed (`cache_blocks` stops at the known tokens).
            known = seq.computed - (decoded and self.config.async_scheduling)
        self._register(seq, known)
        self._preempt(seq)
        self.waiting.appendleft(seq)
        return seq

    # -- prefix caching -----------------------------------------------------------
    def _hashes(self, seq: Seq, blocks: int) -> list:
        """seq's chained block hashes, computed up to `blocks` blocks. A request without token
        content gets keys of its own (nothing else matches them; a preempted request finds its
        own blocks again)."""
        have = len(seq.hashes)
        if have < blocks:
            if seq.req.tokens is None:
                seq.hashes += [(seq.id, i) for i in range(have, blocks)]
            else:
                adapter, images = seq.req.adapter, seq.req.images
                extra = image_block_keys(images, self.bs) if images else None
                chain_hashes(seq.content(), self.bs, seq.hashes, blocks, hash_root(adapter), extra)
        return seq.hashes

    def _hits(self, seq: Seq, total: int) -> list[int]:
        """Cached blocks of the longest cached prefix, at most total - 1 tokens
        (`KVCacheManager.get_computed_blocks`)."""
        if not self._may_hit(seq):
            return []
        blocks = (total - 1) // self.bs
        return self.pool.lookup(islice(self._hashes(seq, blocks), blocks))

    def _host_hits(self, seq: Seq, total: int, on_gpu: int) -> list:
        """The hashes of the blocks the host tier holds right after the `on_gpu` blocks found on the
        GPU, at most total - 1 tokens in all (the connector's `get_num_new_matched_tokens`)."""
        if not self._may_hit(seq):
            return []
        blocks = (total - 1) // self.bs
        hashes = self._hashes(seq, blocks)[on_gpu:blocks]
        return hashes[: self.tier.lookup(hashes)]

    def _may_hit(self, seq: Seq) -> bool:
        """Whether any cached block can be seq's: not for a request without content of its own
        that never ran (its keys are its own and none was ever entered)."""
        return self.config.prefix_caching and (seq.req.tokens is not None or bool(seq.spans))

    def _register(self, seq: Seq, tokens: int) -> None:
        """Enter the hashes of seq's blocks full of its first `tokens` tokens of computed KV."""
        full = tokens // self.bs
        if self.config.prefix_caching and full > seq.registered:
            hashes = self._hashes(seq, full)
            self.pool.register(seq.blocks, hashes, seq.registered, full)
            if self.tier and self.tier.store(hashes[seq.registered : full], self.now):
                self.pool.version += 1  # a dropped block may shorten the blocked head's lookup: try it again
            seq.registered = full

    # -- memory ----------------------------------------------------------------------
    def _release(self, seq: Seq, finished: bool) -> None:
        if finished:
            self._register(seq, seq.computed)  # (a preempted request's blocks: `_preempt_tail`)
        seq.registered = 0
        self._due[seq.phase].pop(seq.id, None)
        if finished and self.config.async_scheduling:
            self.leaving.append(seq)  # freed once the next iteration is scheduled (`_iterate`)
        else:
            self._let_go(seq)
            self.pool.release(seq.blocks)
            seq.blocks = []

    def _let_go(self, seq: Seq) -> None:
        """seq no longer runs: its adapter leaves the batch and it releases its images (with async
        scheduling a finished request only once the next iteration is scheduled: until vLLM reads
        its last output it stays in `running`, its adapter among `scheduled_loras`)."""
        if self.adapters:
            self.adapters.leave(seq.req.adapter)
        if seq.req.images:
            self.encoder.leave(seq.id, seq.req.images)

    @property
    def occupied(self) -> int:
        return (self.pool.n_blocks - len(self.pool.free)) * self.bs

    @property
    def used(self) -> int:
        if self.width > 1:
            return self.occupied - self.pool.shared_extra * self.bs
        return self.kv_tokens + sum(s.computed for s in self.prefilling) - self.pool.shared_extra * self.bs

    @property
    def cached(self) -> int:
        return self.pool.reusable * self.bs

    def cached_prefix(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        """The interface's, the blocks holding an image's placeholders keyed by its mm hash too."""
        return block_pool_match(self.pool, tokens, adapter, images) if self.config.prefix_caching else 0

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        """Cells of whole blocks: a running request's id (SHARED for blocks it found in the cache
        or shares with another, AHEAD for blocks it holds past its KV), CACHED (free but hashed:
        reusable) or FREE; the share of each cell holding KV."""
        if self.width > 1:
            return grouped_memory_map(self.pool, [*self.running.values(), *self.prefilling, *self.leaving], max_cells)
        pool, bs = self.pool, self.bs
        n = pool.n_blocks
        per_cell = cell_group(n, max_cells)
        size = -(-n // per_cell) * per_cell  # whole cells: the padding stays free
        key = np.full(size, K_FREE, dtype=np.int64)
        written = np.zeros(size, dtype=np.int64)
        # every block with a hash is cached; the running requests' own are drawn over it below (only
        # they hold blocks): no look at each block's reference count
        cached = np.fromiter(chain(pool.table.values(), *pool.copies.values()), np.intp)
        key[cached] = K_CACHED
        written[cached] = bs
        seqs = [*self.running.values(), *self.prefilling, *self.leaving]
        if seqs:
            counts = [len(s.blocks) for s in seqs]
            blocks = np.fromiter(chain.from_iterable(s.blocks for s in seqs), np.intp, sum(counts))
            key[blocks] = np.repeat(np.array([s.id for s in seqs], dtype=np.int64), counts)
            written[blocks] = bs
            last, last_kv, hits, ahead = [], [], [], []
            for s, count in zip(seqs, counts):
                if count:
                    kv = s.kv(self.dstep) if s.id in self.running else s.computed
                    with_kv = -(-kv // bs)  # blocks holding its KV; the rest are held ahead (lookahead)
                    last.append(s.blocks[with_kv - 1])
                    last_kv.append(kv - (with_kv - 1) * bs)
                    if count > with_kv:
                        ahead += s.blocks[with_kv:]
                if s.hit >= bs:
                    hits += s.blocks[: s.hit // bs]
            written[last] = last_kv
            if ahead:
                key[ahead] = K_AHEAD
                written[ahead] = 0
            if hits:
                key[hits] = K_SHARED
            if pool.shared_extra:  # blocks held more than once (pool.ref > 1): only running requests hold blocks
                key[:n][np.bincount(blocks, minlength=n) > 1] = K_SHARED
        return key_cells(bs, per_cell, key, written)

    def group_maps(self, step: int, max_cells: int) -> list[GroupMap]:
        """Each KV cache group's map of the one pool (`hybrid_kv.group_maps`; none with one group)."""
        if self.width == 1:
            return []
        return group_maps(self.pool, [*self.running.values(), *self.prefilling, *self.leaving], max_cells)
