"""SGLang's scheduler on the paper GPU: a radix tree holds finished requests' KV in the same pool
as running requests (python/sglang/srt/managers/scheduler.py, schedule_policy.py, schedule_batch.py).

Each iteration runs a prefill batch if one can be formed, otherwise a decode batch
(`get_next_batch_to_run`: "run prefill first if possible"); with `mixed_chunk` (SGLang's
--enable-mixed-chunk, off by default) the running requests decode in the prefill batch too.

Prefill batch (`get_new_batch_prefill`, `PrefillAdder`): the waiting queue is ordered by the
policy: `lpm`, longest cached prefix first (turned off above 128 waiting requests, and a request
whose prompt shares 32 or more leading tokens with an earlier waiting one while the cache holds
at most 32 of them waits behind the rest: in-batch prefix caching), or `fcfs`. A chunked request
goes first. Requests are taken while three budgets last: the pool (free + evictable cache, minus
the tokens the running requests are expected to still generate: remaining output x
`new_token_ratio`, minus what each admitted request takes: its new tokens, a page of slack and
its output), `max_prefill_tokens` and the chunk size (`chunked_prefill_size`); the request
that does not fit the chunk is cut there and continues in the next prefill batch (a chunk is cut
to the memory left too). tests/test_parity_sglang.py replays SGLang 0.5.23's own decisions. A prefix match
stops one token short of the request (the last token must be computed for the logits). A chunk's
KV enters the tree at once (`cache_unfinished_req`), so later requests can share it.

Decode batch (`update_running_batch`): every running request needs one slot. When the pool is
short, unlocked leaves are evicted least recently used first; when that is not enough, requests
are retracted, fewest generated tokens (then longest prompt) first, until one decode step fits:
a retracted request frees its own KV, keeps its cached prefix in the tree, and joins the back of
the waiting queue to be prefilled again (prompt + generated tokens); after each, cache is evicted
until the rest have room for 20 decode steps (`release_req`). `new_token_ratio` starts at
0.7, decays by (0.7 - 0.098) / 600 per decode step, is re-estimated after a retraction and reset
when the server idles. A finished request's prompt + output KV enters the tree, split at the
prompt's end (the output's KV is evicted first), and is unlocked (`release_kv_cache`).

With LoRA adapters (`lora`, serving/memory/lora.py `BatchSlots`): the `max_loras_per_batch` slots
come out of the token pool; a waiting request whose adapter would make the running, chunked and
admitted requests' adapters (the base model counts as one) more than max_loras_per_batch is skipped
and stays in its place, and the requests behind it are still tried (SGLang 0.5.23's
`_get_new_batch_prefill_raw`: `can_schedule_lora_req` -> `continue`); a skip does not fill the
batch. Each forward batch (prefill, decode) loads the adapters it needs that are not in a slot, and
waits for them (`fetch_new_loras`). A request's tokens enter the tree keyed by its adapter
(`radix_key`), so one adapter's prefix is no hit for another.

With a host tier (`host`, HiCache's write_through: serving/memory/host_tier.py) every prefix the tree
takes in is also written to a host tree, and a request whose prompt the host holds at least 10
tokens further than the GPU's match loads them back once the budget has taken it: the batch waits.

Slots are token-granular (SGLang's default page size 1). A decoded token's slot is taken when
its request leaves or when the memory map is drawn; until then the scheduler counts it, so the
pool's free size always subtracts it (as if allocated every step).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.gpu.specs import GPUSpec
from kvweb.serving.loop.continuous_batching import K_CACHED, K_FREE, K_SHARED, NOTHING, ContinuousBatching, key_cells
from kvweb.serving.loop.engine_trace import cell_group
from kvweb.serving.memory.host_tier import LOAD_BACK_THRESHOLD, HostTree
from kvweb.serving.memory.hybrid_kv import sglang_refusal
from kvweb.serving.memory.lora import BatchSlots, LoraConfig, radix_key
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.schedulers.radix_quiet import RadixQuietSteps
from kvweb.serving.loop.sequence import NO_SLOTS, Seq
from kvweb.serving.loop.step_cost import chunk_work
from kvweb.serving.load.workload import Image

POLICIES = ("lpm", "fcfs")
LPM_QUEUE_LIMIT = 128  # longer waiting queues are served FCFS (prefix matching gets too costly)
IN_BATCH_THRESHOLD = 32  # IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD and ..._DEPRIORITIZE_THRESHOLD
CLIP_MAX_NEW_TOKENS = 4096  # the most output a request is expected to still need
PAGE_OVERHEAD = 1  # PrefillAdder.per_req_token_overhead: a page (one token) reserved per admitted request
RETRACT_DECODE_STEPS = 20
INIT_NEW_TOKEN_RATIO, MIN_NEW_TOKEN_RATIO_FACTOR, NEW_TOKEN_RATIO_DECAY_STEPS = 0.7, 0.14, 600
# Memory maps of pools up to this many slots are keyed slot by slot, larger ones only where slots are
# held: in WebAssembly numpy's passes over every slot cost more (a 56k-slot pool's map 1.6 -> 1.1 ms).
DENSE_SLOTS = 1 << (13 if sys.platform == "emscripten" else 16)
Held = tuple[np.ndarray, np.ndarray]  # slots and, for each, the id of the request holding it


class Match(Protocol):
    length: int
    slots: np.ndarray
    node: Any


class Pool(Protocol):
    size: int

    @property
    def available(self) -> int: ...
    @property
    def used(self) -> int: ...
    def alloc(self, n_tokens: int) -> np.ndarray | None: ...
    def free(self, slots: np.ndarray) -> None: ...


class PrefixTree(Protocol):
    """What the scheduler needs from a radix cache (kvweb.prefix.radix_cache.RadixCache)."""

    pool: Pool
    root: Any  # nodes have .children (dict), .value (slots) and .lock_ref
    evictable_size: int
    protected_size: int
    clock: int  # ticked by every match and insert

    def match_prefix(self, tokens: np.ndarray) -> Match: ...
    def insert(self, tokens: np.ndarray, slots: np.ndarray) -> int: ...
    def lock(self, node: Any) -> None: ...
    def unlock(self, node: Any) -> None: ...
    def evict(self, n_tokens: int) -> int: ...


@dataclass(frozen=True)
class NoMatch:
    """An empty match: it ends at the root."""

    node: Any
    length: int = 0
    slots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def default_chunk_size(gpu: GPUSpec) -> int:
    """SGLang's chunked_prefill_size by GPU memory (ServerArgs): 2048 under 35 GiB, 8192 under 160 GiB."""
    gib = gpu.hbm_bytes / 2**30
    return 2048 if gib < 35 else 8192 if gib < 160 else 16384


@dataclass(frozen=True)
class RadixConfig:
    max_len: int  # the model's limit on prompt + output
    max_seqs: int = 256  # max_running_requests
    chunk_size: int = 8192  # chunked_prefill_size (SGLang's default for GPUs of 35-160 GB)
    max_prefill_tokens: int = 16384
    policy: str = "lpm"  # schedule_policy
    mixed_chunk: bool = False  # enable_mixed_chunk
    radix_cache: bool = True  # off: SGLang's --disable-radix-cache (finished KV is freed)
    lora: LoraConfig | None = None  # LoRA adapters' slots and max_loras_per_batch (None: requests carry none)


class RadixScheduler(RadixQuietSteps, ContinuousBatching):
    """SGLang's scheduler (see the module docstring). methods: 23, because SGLang's own `Scheduler`
    and `PrefillAdder` keep admission, chunking and the radix cache's insertions and evictions
    together, and 9 of them are the loop's `SchedulerInterface`."""

    kind = "sglang"
    # the decode count at which the scheduler has work of its own before decoding again (quiet
    # iterations stop there): never here; swa_scheduler.py frees window KV then
    slide_at = 1 << 62
    # whether a prompt's KV enters the tree when its prefill ends (SGLang's `cache_unfinished_req` in
    # `process_batch_result_prefill`), not only a chunk's: swa_scheduler.py does, so that the window
    # pool's eviction may free a long prompt's window KV, and mamba_scheduler.py, so that the prompt's
    # end holds a state; here only chunks do (as replayed in parity: full-attention runs unchanged)
    cache_prompts = False
    # slots a running request needs free for a decode step (`check_decode_mem`'s buf_multiplier):
    # one here; radix_spec.py's draft and verify slots need more
    decode_slots = 1

    def __init__(
        self,
        cost: CostModel,
        tree: PrefixTree,
        config: RadixConfig,
        slo: SLO = SLO(),
        give_up_after: int | None = None,
        host: HostTree | None = None,
    ) -> None:
        if config.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}")
        why = sglang_refusal(cost.model)
        if why:
            raise ValueError(why)
        kinds = {a.kind for a, _ in cost.model.groups}
        if "sliding" in kinds and not getattr(tree, "window", 0):
            raise ValueError(
                f"sglang: {cost.model.name} has sliding-window layers; serve it with SWARadixScheduler "
                "on an SWARadixCache (two pools), not as if every layer were full"
            )
        if "linear" in kinds and not hasattr(tree, "take_state"):
            raise ValueError(
                f"sglang: {cost.model.name} has linear attention layers; serve it with "
                "MambaRadixScheduler on a MambaRadixCache (a state pool), not as if every layer were full"
            )
        super().__init__(cost, config.max_len, config.max_seqs, slo, give_up_after)
        self.config = config
        self.tree = tree
        self.pool = tree.pool
        self.capacity = self.pool.size
        self.chunked: Seq | None = None
        self.pending = 0  # decoded tokens whose slots are not taken yet
        self.init_ratio = self.ratio = INIT_NEW_TOKEN_RATIO
        self.min_ratio = INIT_NEW_TOKEN_RATIO * MIN_NEW_TOKEN_RATIO_FACTOR
        self.decay = (INIT_NEW_TOKEN_RATIO - self.min_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.batch_is_full = False
        self.matches: dict[int, Match] = {}  # this prefill attempt's matches, by request id
        self.inserted: set[int] = set()  # requests whose own chunks entered the tree
        self.no_match = NoMatch(tree.root)
        self.tier = host if config.radix_cache else None  # HiCache's host tree (host_tier.py)
        self.host_hit_tokens = 0  # prompt tokens of first admissions loaded back from the host
        self.loading = 0.0  # seconds of loads the prefill batch being formed waits for
        self.adapters = BatchSlots(config.lora, cost) if config.lora else None
        self.skipped = 0  # the last prefill round's waiting requests skipped for their adapter
        # the waiting queue, the batch's adapters and the tree when every waiting request was skipped
        self.passed_over: tuple | None = None

    def never_fits(self, final_kv: int) -> str | None:
        """SGLang admits a request while prompt + output (final KV + 1) and a page of slack stay below the free pool."""
        if final_kv + 1 + PAGE_OVERHEAD >= self.pool.size:
            return (
                f"prompt + output = {final_kv + 1} tokens; SGLang admits a request only while they and a slot of "
                f"slack stay below the {self.pool.size} token slots of the GPU"
            )
        return None

    @property
    def busy(self) -> bool:
        return self.chunked is not None

    @property
    def free_slots(self) -> int:
        return self.pool.available - self.pending

    # -- one iteration -----------------------------------------------------------
    def _iterate(self) -> tuple[float, int, list[Seq], int, int, int]:
        running, tree = self.running, self.tree
        if not running and self.chunked is None:  # the server was idle
            self.ratio = self.init_ratio
            self.batch_is_full = False
        if self.chunked is None and (self.batch_is_full or not self.waiting):
            prefill = None  # nothing to prefill (`get_new_batch_prefill`'s first test)
        else:
            prefill = self._prefill_batch()
        f0, _, _, b0, _, _ = self.coef
        flops, nbytes, batch = f0, b0, 0
        self.decoded = 0
        if running and (prefill is None or self.config.mixed_chunk):
            retracted = self.free_slots < len(running) * self.decode_slots and self._make_room()
            flops, nbytes, batch = self._decode(flops, nbytes)
            if prefill is None:
                if not retracted:
                    self.ratio = max(self.ratio - self.decay, self.min_ratio)
                held = self.pool.used + self.pending - tree.evictable_size
                dt = self.cost.step_time(flops, nbytes) + self._fetch(())
                return dt, batch, NOTHING, held, held, tree.evictable_size
        fresh: list[Seq] = []
        for seq, n in prefill or ():
            f, b = self._chunk_work(n, seq.computed)
            flops, nbytes, batch = flops + f, nbytes + b, batch + 1
            seq.computed += n
            if seq is self.chunked:
                self._cache_unfinished(seq)
            else:
                if self.cache_prompts:
                    self._cache_unfinished(seq)
                seq.mat = seq.computed
                self._sampled(seq, fresh)
        held = self.occupied
        if prefill:
            self.loading += self._fetch(prefill)
        dt = self.cost.step_time(flops, nbytes) + self.loading if batch else 0.0
        self.loading = 0.0
        return dt, batch, fresh, held, held, tree.evictable_size

    def _decode(self, flops: float, nbytes: float) -> tuple[float, float, int]:
        """Every running request decodes one token (its slot counted, taken later): the step's
        FLOPs and bytes with theirs added, and the requests that ran."""
        _, fb, fc, _, bb, bc = self.coef
        self.dstep += 1
        self.decoded = n = len(self.running)
        self.kv_tokens = kv = self.kv_tokens + n
        self.pending += n
        return flops + (fb * n + fc * kv), nbytes + (bb * n + bc * kv), n  # (as `+=` adds them)

    def _chunk_work(self, n: int, cached: int) -> tuple[float, float]:
        """(FLOPs, bytes) of a prefill chunk of n tokens after `cached`."""
        return chunk_work(self.cost, self.weights, n, cached)

    # -- prefill -------------------------------------------------------------------
    def _prefill_batch(self) -> list[tuple[Seq, int]] | None:
        """The requests to prefill now and how many tokens each computes (slots taken)."""
        cfg = self.config
        running = len(self.running)
        if running >= self.max_seqs:
            self.batch_is_full = True
            return None
        if self._skips_all():
            return None  # every waiting request would be skipped again, and the tree stamped as it is
        mixed = running if cfg.mixed_chunk else 0
        offset = (
            mixed
            + sum(min(s.req.output - s.generated(self.dstep), CLIP_MAX_NEW_TOKENS) for s in self.running.values())
            * self.ratio
        )
        rem_input, rem_chunk = cfg.max_prefill_tokens - mixed, cfg.chunk_size - mixed
        can_run: list[tuple[Seq, int]] = []
        if self.chunked is not None:  # `add_chunked_req`: the next chunk, cut to the memory left
            seq = self.chunked
            rest = seq.tokens_to_compute - seq.computed
            room = int(self._rem_total(offset))
            n = min(rest, min(rem_chunk, room) if room > 0 else rem_chunk)
            if n == rest:
                self.chunked = None
                offset += n + PAGE_OVERHEAD + min(seq.req.output - seq.gen0, CLIP_MAX_NEW_TOKENS)
            else:
                offset += n + PAGE_OVERHEAD
            rem_input, rem_chunk = rem_input - n, rem_chunk - n
            can_run.append((seq, n))
        ordered = self._ordered()
        stop, taken, after = len(ordered), 0, 0  # where the round stops, the requests admitted, past the last
        for at, seq in self._tried(ordered):
            if rem_input <= 0 or rem_chunk <= 0:
                stop = after
                break  # OTHER: a prefill budget is spent
            if self.adapters and not self.adapters.admits(seq.req.adapter):
                continue  # skipped: it stays in its place
            if running + len(can_run) >= self.max_seqs:
                self.batch_is_full = True
                stop = at
                break
            total = seq.tokens_to_compute
            match = self._match(seq, total)
            if match and match.length == total:  # init_next_round_input matches a token short: cut there
                match = self.tree.match_prefix(self._key(seq)[: total - 1])
            hit = min(match.length, total - 1) if match else 0
            n = total - hit
            need = n + PAGE_OVERHEAD + min(seq.req.output - seq.gen0, CLIP_MAX_NEW_TOKENS)
            if need >= self._rem_total(offset):  # NO_TOKEN: full unless nothing would run
                self.batch_is_full = bool(can_run) or running > 0
                stop = at
                break
            if match:
                self.tree.lock(match.node)
                if need >= self._rem_total(offset):  # locking made its prefix unevictable
                    self.tree.unlock(match.node)
                    self.batch_is_full = bool(can_run) or running > 0
                    stop = at
                    break
            more = 0
            if self.tier is not None and match is not self.no_match:
                match, more = self._load_back(seq, total, match)
                hit, n = hit + more, n - more
                need -= more
            if n > rem_chunk:
                n = rem_chunk
                self.chunked = seq
                offset += n + PAGE_OVERHEAD
            else:
                offset += need
            rem_input, rem_chunk = rem_input - n, rem_chunk - n
            self.waiting.remove(seq)
            if seq.spans:
                self.preempted -= 1
            seq.node, seq.prefix = (match.node, match.slots[:hit]) if match else (None, NO_SLOTS)
            seq.computed = seq.mat = hit
            self._admitted(seq, hit)
            if self.adapters:
                self.adapters.join(seq.req.adapter)
            if self.tier is not None and len(seq.spans) == 1:
                self.host_hit_tokens += more
                self.tier.hit(self.now, self.host_hit_tokens, self.prompt_tokens)
            can_run.append((seq, n))
            taken, after = taken + 1, at + 1
            if self._rem_total(offset) <= 0:
                self.batch_is_full = True
                stop = after
                break
        else:
            if rem_input <= 0 or rem_chunk <= 0:
                stop = after  # (requests left out by `_tried` after the last admitted one: never reached)
        self.matches.clear()
        self.skipped = skipped = stop - taken  # the requests before the stop not admitted were skipped
        self.passed_over = self._queue_state() if self.adapters and skipped == len(self.waiting) > 0 else None
        for seq, n in can_run:  # slots last, once every admitted prefix is locked against eviction
            self._take(seq, n)
        return can_run or None

    def _load_back(self, seq: Seq, total: int, match: Match) -> tuple[Match, int]:
        """HiCache's `init_load_back`: the host holds more of seq's prompt than the GPU's match (at
        least LOAD_BACK_THRESHOLD tokens more, at most total - 1 in all): take slots for them (the
        budget counted them as new tokens), enter them in the tree and lock the longer match in place
        of `match`. Returns the match and the tokens loaded; the batch waits for the load."""
        tokens = self._key(seq)[: total - 1]
        more = self.tier.lookup(tokens) - match.length
        if more < LOAD_BACK_THRESHOLD:
            return match, 0
        short = more - self.free_slots
        if short > 0:
            self.tree.evict(short)
        if more > self.free_slots:
            return match, 0
        tokens = tokens[: match.length + more]
        self.tree.insert(tokens, np.concatenate([match.slots, self.pool.alloc(more)]))
        longer = self.tree.match_prefix(tokens)
        self.tree.lock(longer.node)
        self.tree.unlock(match.node)
        self.loading += self.tier.load(more)
        return longer, more

    def _fetch(self, prefill: list[tuple[Seq, int]] | tuple) -> float:
        """The forward batch's adapters into slots (`BatchSlots.fetch`): a prefill batch's requests
        (with `mixed_chunk`, and the running ones), or the running requests decoding; the seconds
        it waits for their loads (0 without adapters)."""
        if self.adapters is None:
            return 0.0
        batch = {seq.req.adapter for seq, _ in prefill}
        if not prefill or self.config.mixed_chunk:
            batch.update(seq.req.adapter for seq in self.running.values())
        waited = self.adapters.fetch(batch)
        self.adapters.note(self.now, self.skipped)
        return waited

    def _tried(self, ordered: list[Seq]) -> list[tuple[int, Seq]] | enumerate[Seq]:
        """The waiting requests in order with their places: with as many adapters running as
        max_loras_per_batch, only those of the batch's adapters (no admission adds one, so every
        other would be skipped); `_prefill_batch` counts the skipped from the places."""
        if self.adapters is None or not self.adapters.full():
            return enumerate(ordered)
        users = self.adapters.users
        return [(at, seq) for at, seq in enumerate(ordered) if seq.req.adapter in users]

    def _skips_all(self) -> bool:
        """Whether a prefill round would skip every waiting request for its adapter, as the last one
        did, with nothing it depends on changed since (`_queue_state`)."""
        return self.passed_over is not None and self.passed_over == self._queue_state()

    def _queue_state(self) -> tuple:
        """What a prefill round that skips every waiting request for its adapter depends on: the
        queue (requests join at its end and leave on admission), the running and chunked requests'
        adapters, and the tree (a match or insert ticks its clock, an eviction or a lock moves its
        sizes). While all stay the same, the round would skip them all again; its matches would
        stamp the same nodes in the same order after every other stamp, an LRU order the same as
        now, so it is not run, and decode steps run as quiet ones (radix_quiet.py) until a request
        arrives or leaves."""
        tree = self.tree
        w = self.waiting
        users = frozenset(self.adapters.users)
        return len(w), w[0], w[-1], users, tree.clock, tree.evictable_size, tree.protected_size

    def _key(self, seq: Seq) -> np.ndarray:
        """seq's tokens as the tree keys them: with adapters, by its adapter (`radix_key`) when it
        has content of its own (a request without content shares nothing anyway)."""
        tokens = seq.content()
        return radix_key(tokens, seq.req.adapter) if self.adapters and seq.req.tokens is not None else tokens

    def _rem_total(self, offset: float) -> float:
        return self.free_slots + self.tree.evictable_size - offset

    def _ordered(self) -> list[Seq]:
        """The waiting queue in the policy's order (`SchedulePolicy.calc_priority`)."""
        waiting = list(self.waiting)
        if self.config.policy != "lpm" or not self.config.radix_cache or len(waiting) > LPM_QUEUE_LIMIT:
            return waiting
        later, seen = set(), set()
        for seq in waiting:
            total = seq.tokens_to_compute
            self.matches[seq.id] = self._lookup(seq, total)
            if (
                self.matches[seq.id].length <= IN_BATCH_THRESHOLD
                and total >= IN_BATCH_THRESHOLD
                and seq.req.tokens is not None
            ):
                head = self._key(seq)[:IN_BATCH_THRESHOLD].tobytes()
                if head in seen:
                    later.add(seq.id)
                else:
                    seen.add(head)
        waiting.sort(key=lambda s: float("inf") if s.id in later else -self.matches[s.id].length)
        self.waiting.clear()  # SGLang sorts its waiting queue in place
        self.waiting.extend(waiting)
        return waiting

    def _match(self, seq: Seq, total: int) -> Match | None:
        if not self.config.radix_cache:
            return None
        match = self.matches.get(seq.id)
        return match if match is not None else self._lookup(seq, total)

    def _lookup(self, seq: Seq, total: int) -> Match:
        """The tree's longest match of seq's first `total` tokens. A request without content of
        its own can only match what it inserted itself (chunks), so otherwise the tree is not asked:
        a match of nothing changes nothing in it (no split, no stamp)."""
        if seq.req.tokens is None and seq.id not in self.inserted:
            return self.no_match
        return self.tree.match_prefix(self._key(seq)[:total])

    def _take(self, seq: Seq, n: int) -> None:
        """Slots for n new tokens of seq, evicting cache as far as needed."""
        short = n - self.free_slots
        if short > 0:
            self.tree.evict(short)
        slots = self.pool.alloc(n)
        if slots is None:
            raise RuntimeError(f"sglang: no room for {n} tokens of request {seq.id} although the budget had it")
        seq.own.append(slots)

    def _cache_unfinished(self, seq: Seq) -> None:
        """A chunk is done: its KV enters the tree now and the request locks the longer path."""
        seq.mat = seq.computed
        if not self.config.radix_cache:
            return
        tokens = self._key(seq)[: seq.computed]
        self.tree.insert(tokens, np.concatenate([seq.prefix, *seq.own]))
        if self.tier is not None:
            self.tier.store(tokens, self.now)
        self.inserted.add(seq.id)
        match = self.tree.match_prefix(tokens)
        self.tree.lock(match.node)
        if seq.node is not None:
            self.tree.unlock(seq.node)
        seq.node, seq.prefix, seq.own = match.node, match.slots, []

    # -- decode ----------------------------------------------------------------------
    def _make_room(self) -> bool:
        """Every running request needs `decode_slots` slots and too few are free: evict cache, then
        retract requests if still short. Returns whether any request was retracted."""
        need = len(self.running) * self.decode_slots
        self.tree.evict(need - self.free_slots)
        if self.free_slots >= need:
            return False
        order = self._retract_order()
        while self.free_slots < len(order) * self.decode_slots and len(order) > 1:
            seq = order.pop()
            self._stop_decoding(seq)
            self._preempt(seq)
            self.waiting.append(seq)
            short = len(order) * RETRACT_DECODE_STEPS - self.free_slots  # release_req: room for 20 steps
            if short > 0:
                self.tree.evict(short)
        done = sum(s.generated(self.dstep) for s in order)
        self.ratio = min(1.0, (done + RETRACT_DECODE_STEPS * len(order)) / (sum(s.req.output for s in order) + 1))
        self.batch_is_full = False
        return True

    def _retract_order(self) -> list[Seq]:
        """The running requests, the next to retract last: the fewest generated tokens (then the
        longest prompt) last (`retract_decode`'s sort)."""
        return sorted(self.running.values(), key=lambda s: (s.generated(self.dstep), -s.req.prompt), reverse=True)

    def _materialize(self, seq: Seq, upto: int) -> None:
        """Take the slots of seq's decoded tokens up to `upto` KV tokens (always free: counted)."""
        n = upto - seq.mat
        if n > 0:
            seq.own.append(self.pool.alloc(n))
            self.pending -= n
            seq.mat = upto

    def _release(self, seq: Seq, finished: bool) -> None:
        if self.adapters:
            self.adapters.leave(seq.req.adapter)
        if finished:
            self._materialize(seq, seq.computed)
            slots = np.concatenate([seq.prefix, *seq.own])
            if self.config.radix_cache:
                tokens = self._key(seq)[: seq.computed]
                self.tree.insert(tokens, slots)
                if self.tier is not None:
                    self.tier.store(tokens, self.now)
                if 0 < seq.req.prompt < seq.computed:  # checkpoint(split_prompt=True): the output's KV is a
                    self.tree.match_prefix(tokens[: seq.req.prompt])  # leaf of its own, evicted before the prompt's
            else:
                self.pool.free(slots)
            self.batch_is_full = False
        else:
            self.pending -= seq.computed - seq.mat
            if seq.own:
                self.pool.free(np.concatenate(seq.own))
        if seq.node is not None:
            self.tree.unlock(seq.node)
        seq.node, seq.prefix, seq.own, seq.mat = None, NO_SLOTS, [], 0  # not a view: it would keep the slots

    # -- figures and the memory map ----------------------------------------------------
    @property
    def occupied(self) -> int:
        return self.pool.used + self.pending - self.tree.evictable_size

    @property
    def used(self) -> int:
        return self.occupied

    @property
    def cached(self) -> int:
        return self.tree.evictable_size

    def cached_prefix(self, tokens: np.ndarray, adapter: int = 0, images: Sequence[Image] = ()) -> int:
        if not self.config.radix_cache:
            return 0
        return self.tree.peek_length(radix_key(tokens, adapter) if self.adapters else tokens)

    def memory_map(self, step: int, max_cells: int) -> tuple[int, list[int], list[int]]:
        """Cells of token slots: a running request's id, SHARED (a tree node locked by running
        requests: their cached prefix, or a chunk already inserted), CACHED (an unlocked tree
        node: evictable, reusable) or FREE (`slot_cells`)."""
        return slot_cells(self.pool.size, max_cells, *self._held_slots())

    def _held_slots(self) -> tuple[list[tuple[int, np.ndarray]], Held | None]:
        """The tree's slots by key (CACHED, then SHARED: locked nodes) and the running requests' own
        slots with their ids (None: no request holds any), every decoded token's slot taken."""
        self._materialize_running()
        by_key: dict[int, list[np.ndarray]] = {K_CACHED: [], K_SHARED: []}
        stack = list(self.tree.root.children.values())
        while stack:
            node = stack.pop()
            by_key[K_SHARED if node.lock_ref else K_CACHED].append(node.value)
            stack.extend(node.children.values())
        own, ids = [], []
        for seq in [*self.running.values(), *([self.chunked] if self.chunked else [])]:
            own += seq.own
            ids += [seq.id] * len(seq.own)
        tree = [
            (k, np.concatenate(arrays)) for k, arrays in by_key.items() if arrays
        ]  # (CACHED first: SHARED outranks it)
        running = (
            (np.concatenate(own), np.repeat(np.array(ids, dtype=np.int64), [len(a) for a in own])) if own else None
        )
        return tree, running

    def _materialize_running(self) -> None:
        """`_materialize` every running request up to its KV: one allocation for all of them, cut
        in their order (the pool hands out the same slots as one allocation each)."""
        dstep, todo, total = self.dstep, [], 0
        for seq in self.running.values():
            n = seq.kv(dstep) - seq.mat
            if n > 0:
                todo.append((seq, n))
                total += n
        if not todo:
            return
        slots = self.pool.alloc(total)
        at = 0
        for seq, n in todo:
            seq.own.append(slots[at : at + n])
            at += n
            seq.mat += n
        self.pending -= total


def slot_cells(
    size: int, max_cells: int, tree: list[tuple[int, np.ndarray]], running: Held | None
) -> tuple[int, list[int], list[int]]:
    """A pool of `size` slots (token slots, or states) in at most max_cells cells: `tree` gives slots
    by key (CACHED before SHARED), `running` slots with their request ids; the rest is FREE. Slots
    are held by one owner each, so a cell's state is the largest key of its slots and its KV the
    count of them: a small pool is keyed slot by slot, a large one (mostly free) only where slots are
    held. Returns (slots per cell, owners, percentage of each cell held)."""
    per_cell = cell_group(size, max_cells)
    cells = -(-size // per_cell)
    if size <= DENSE_SLOTS:
        key = np.full(cells * per_cell, K_FREE, dtype=np.int64)
        for k, slots in tree:
            key[slots] = k
        if running is not None:
            key[running[0]] = running[1]
        key = key.reshape(cells, per_cell)
        return key_cells(per_cell, 1, key.max(axis=1), np.count_nonzero(key != K_FREE, axis=1))
    key = np.full(cells, K_FREE, dtype=np.int64)
    held = [np.zeros(0, dtype=np.intp)]
    for k, slots in tree:
        cell = (slots // per_cell).astype(np.intp, copy=False)  # (bincount wants intp)
        key[cell] = k
        held.append(cell)
    if running is not None:
        cell = (running[0] // per_cell).astype(np.intp, copy=False)
        np.maximum.at(key, cell, running[1])
        held.append(cell)
    return key_cells(per_cell, 1, key, np.bincount(np.concatenate(held), minlength=cells))  # one entry per cell
