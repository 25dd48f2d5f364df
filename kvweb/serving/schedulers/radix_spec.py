"""Speculative decoding's memory side in SGLang's scheduler: EAGLE as a chain, `--speculative-algorithm
EAGLE --speculative-num-steps k --speculative-eagle-topk 1 --speculative-num-draft-tokens k+1`
(python/sglang/srt/speculative/eagle_worker.py `EAGLEWorker`, eagle_info.py, managers/scheduler.py,
managers/schedule_batch.py, model_executor/model_runner.py).

Each decode step of every running request, in SGLang's allocator (token slots, page size 1):

- drafting (`EAGLEWorker.draft`): `alloc_token_slots(num_seqs * topk * num_steps, backup_state=True)`
  takes k slots a request, where the drafter's k - 1 forwards write its KV; `restore_state` hands
  them all back once it has drafted;
- verifying (`EagleVerifyInput.prepare_for_verify`): k + 1 slots a request (the token last sampled
  and its k drafts), where the target writes their KV; `EagleVerifyInput.verify` keeps the
  accepted drafts' and the last token's, and frees the rejected ones at once
  (`token_to_kv_pool_allocator.free(batch.out_cache_loc[evict_mask])`; a request that finishes
  frees those past its end too); the target's bonus token is the next step's last token;
- `forward_draft_extend_after_decode`: the drafter runs over the kept tokens, writing its KV at the
  same slot indices in its own pool.

So a request holds exactly its KV between steps (`RadixScheduler` counts it, the map draws it):
unlike vLLM V1 (spec_decode.py), which keeps the blocks its rejected drafts and lookahead took until
the request leaves, nothing is held ahead, and there are no lookahead slots nor a token budget to
cut drafts: every running request verifies k + 1 tokens a step. The draws (one a request and step,
with the run's seed), what a request keeps (1 + accepted, at most what it still needs) and the
verify step's price are spec_decode.py's (`Verifying`, `verify_work`).

The decode check (`Scheduler.update_running_batch` -> `ScheduleBatch.check_decode_mem` with
`decode_mem_cache_buf_multiplier` = num_draft_tokens + topk x num_steps = 2k + 1): every running
request needs 2k + 1 free slots, after evicting the tree's cache; when they are not there
`retract_decode` retracts requests from the back of the batch (with speculative decoding
`filter_batch` can only drop from the back; without it, the fewest generated tokens go first)
until the rest have 2k + 1 each, freeing their KV as without drafts (`release_req`: cache evicted
for 20 decode steps of the rest). Admission (`PrefillAdder`) reserves as without drafts (each
running request's remaining output x new_token_ratio): the draft and verify slots are the decode
check's. SGLang turns --enable-mixed-chunk off with EAGLE, so a step prefills or decodes.

The pools (`ModelRunner.init_memory_pool`): the drafter's `token_to_kv_pool` has as many slots as
the target's and shares its `token_to_kv_pool_allocator` and `req_to_token_pool` (a slot index
holds a token's KV in both pools). Here, as for vLLM, the drafter's layers are counted in the KV
budget beside the target's (their bytes a token and the drafter's weights: drafters.py
`drafter_blocks`), so fewer slots fit (`spec_pool_slots`). SGLang itself profiles the target's pool
alone, then gives the allocator max_running_requests x (k + k + 1) + 100 slots more
(`draft_runner_cache_size`: a full batch's draft and verify slots) and the drafter a pool of that
size, both out of the 1 - mem_fraction_static reserve (its default fraction reserves 2 GiB more with
EAGLE: server_args.py `_handle_gpu_memory_settings`); counted in the budget, that headroom is no
extra room. The drafters are drafters.py's: EAGLE's head; DeepSeek-V3's MTP
module, which SGLang runs as EAGLE (NEXTN); a separate draft model (SGLang's STANDALONE worker, an
`EAGLEWorker` of the same slots).

The drafter's compute: in a prefill step its extend pass runs over the chunk's tokens
(`forward_draft_extend`); in a decode step over each request's kept tokens, plus its k - 1
one-token passes (`draft_forward`), each priced on the drafter alone as spec_decode.py does.

Not modelled: EAGLE's bigram keys in SGLang's radix tree (`is_eagle`: a cached prefix is matched a
token short), topk > 1 (draft trees), the overlap scheduler's spec v2 worker, page sizes above 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kvweb.gpu.cost import CostModel
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.loop.sequence import Seq
from kvweb.serving.memory.host_tier import HostTree
from kvweb.serving.schedulers.radix_scheduler import PrefixTree, RadixConfig, RadixScheduler
from kvweb.serving.schedulers.drafters import drafter_blocks, make_drafter
from kvweb.serving.schedulers.spec_decode import Drafts, Verifying, verify_work


def spec_pool_slots(cost: CostModel, drafts: Drafts) -> int:
    """The token slots of SGLang's pool with drafts: those that fit beside the drafter's weights
    when each also holds the drafter's layers (`drafter_blocks` of one token)."""
    drafter = make_drafter(drafts.drafter, cost.model) if drafts.drafter else None
    return drafter_blocks(cost, 1, drafter)


class RadixSpecScheduler(Verifying, RadixScheduler):
    """`RadixScheduler` whose running requests draft k tokens and verify k + 1 each decode step (see
    the module docstring). Every iteration goes through `_iterate` (requests move on by different
    counts)."""

    def __init__(
        self,
        cost: CostModel,
        tree: PrefixTree,
        config: RadixConfig,
        drafts: Drafts,
        slo: SLO = SLO(),
        give_up_after: int | None = None,
        host: HostTree | None = None,
    ) -> None:
        if config.mixed_chunk:
            raise ValueError("sglang: speculative decoding turns mixed_chunk off (SGLang does with EAGLE)")
        if not drafts.k:
            raise ValueError("sglang: speculative decoding needs draft tokens (spec_tokens > 0)")
        super().__init__(cost, tree, config, slo, give_up_after, host)
        self._init_verifying(cost, drafts)
        self.decode_slots = 2 * drafts.k + 1  # decode_mem_cache_buf_multiplier
        self.draft_slots = 0  # slots taken for drafts (and handed back once drafted), over the run
        self.verify_slots = 0  # slots taken to verify
        self.rejected_slots = 0  # of them, freed in the same step (rejected drafts, or past a request's end)
        self.step_slots = (0, 0, 0)  # the last decode step's: drafts, verify, rejected
        self.changes: list[tuple[float, int, int, int]] = [(0.0, 0, 0, 0)]  # (start, *step_slots) of each decode step
        self.peak = 0  # the most slots held at once: KV, cache and a step's verify slots

    def may_be_quiet(self) -> bool:
        return False

    def never_fits(self, final_kv: int) -> str | None:
        # its last step verifies k + 1 tokens from where it stands: k slots past its final KV
        return super().never_fits(final_kv + self.drafts.k)

    def _iterate(self) -> tuple[float, int, list[Seq], int, int, int]:
        self._start_drafts()
        out = super()._iterate()
        # a decode step's drafter runs its extend pass and k - 1 more; a prefill step's its extend pass
        return (out[0] + self._drafts_seconds(self.drafts.k if self.decoded else 1), *out[1:])

    def _chunk_work(self, n: int, cached: int) -> tuple[float, float]:
        if self.drafting:
            self._draft_over(n, cached)
        return super()._chunk_work(n, cached)

    def _retract_order(self) -> list[Seq]:
        """The batch's order: the last admitted is retracted first (`filter_batch` drops from the back)."""
        return list(self.running.values())

    def _decode(self, flops: float, nbytes: float) -> tuple[float, float, int]:
        """Every running request takes k slots for drafts (handed back once drafted) and k + 1 to
        verify, keeps 1 + accepted of them (counted, taken later as without drafts) and frees the
        rest in the same step."""
        k, step, coef = self.drafts.k, self.dstep, self.coef
        n = len(self.running)
        self.peak = max(self.peak, self.pool.used + self.pending + n * (k + 1))
        kept_all = 0
        for seq in self.running.values():
            kv = seq.kv(step)
            kept = self._keep(seq, 1 + k, step)
            kept_all += kept
            f, b = verify_work(coef, 1 + k, kv)
            flops, nbytes = flops + f, nbytes + b
            if self.drafting:
                self._draft_over(kept, kv)  # the drafter's extend pass over the kept tokens
        self.pending += kept_all
        self.step_slots = (n * k, n * (k + 1), n * (k + 1) - kept_all)
        self.changes.append((self.now, *self.step_slots))
        self.draft_slots += n * k
        self.verify_slots += n * (k + 1)
        self.rejected_slots += n * (k + 1) - kept_all
        self.dstep += 1
        self.decoded = n
        return flops, nbytes, n

    def figures(self, sim_time: float) -> dict[str, Any]:
        """What the drafts did (spec_decode.py's counts), the slots they took and freed in the step
        they were taken, and the pool's slots (with the drafter's layers in them); nothing is held
        ahead of a request's KV."""
        return {
            **self._drafts_figures(),
            "kv_slots": self.pool.size,
            "draft_slots": self.draft_slots,
            "verify_slots": self.verify_slots,
            "rejected_slots": self.rejected_slots,
            "ahead_frac": 0.0,
        }

    def slots_at(self, times: Sequence[float]) -> dict[str, list[int]]:
        """At each of `times`, the last decode step's slots: taken for drafts (handed back once
        drafted), taken to verify, and of them freed in that step (rejected)."""
        changes = np.array(self.changes)
        at = changes[np.searchsorted(changes[:, 0], np.asarray(times, dtype=float), side="right") - 1]
        return {key: at[:, i].astype(int).tolist() for i, key in enumerate(("drafts", "verify", "rejected"), 1)}
