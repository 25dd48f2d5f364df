"""Record vLLM's real V1 scheduler, step by step, on the workloads of `workloads.py`.

Runs in the parity venv (`bash scripts/parity/setup-vllm.sh`; `bash scripts/parity/record.sh` does
both). No GPU, no model download: the scheduler is built from SchedulerConfig / ModelConfig /
CacheConfig / VllmConfig with a tiny local model config (written to a temporary folder), a
KVCacheConfig of exactly `num_gpu_blocks` blocks with one full-attention group, and a stand-in
model runner that samples each request's fixed output tokens.

Variants (the keys of each workload's `runs`):
- `default`: `Scheduler` driven as `EngineCore.step` drives it (schedule, execute, update_from_output
  in the same step); vLLM's config defaults otherwise (scheduler_reserve_full_isl=True).
- `no_full_isl`: the same with `SchedulerConfig.scheduler_reserve_full_isl=False` (admission then
  only checks that the first chunk fits).
- `async`: `AsyncScheduler` with `async_scheduling=True`, driven as
  `EngineCore.step_with_batch_queue` drives it with a batch queue of 2
  (`VllmConfig.max_concurrent_batches`): each step schedules the next batch before the previous
  batch's output is processed.

One step = one call of the engine-core step function = one `schedule()` call (in `async`, the
steps where the scheduler has no requests left only drain the batch queue). Requests whose
`arrival_step` is s are added before step s's schedule(). A step record (keys omitted when empty):
  tokens    {req_id: num_scheduled_tokens}
  admitted  {req_id: num_computed_tokens at admission (the prefix-cache hit, 0 if none)}; a
            preempted request admitted again counts as admitted again
  preempted [req_id]: preempted by this step's schedule()
  finished  [req_id]: reported finished by the update_from_output of this step (its blocks are
            freed then); in `default` that is the step that computed its last token, in `async`
            the step after it
  arrived   [req_id]: added before this step's schedule()
  free      number of free blocks in vLLM's block pool after the step (free queue length: blocks no
            request holds, cached ones included; the null block is never free)
A run ends with the step in which its last request is reported finished.

Speculative decoding (the workloads of `SPEC_WORKLOADS`, under `spec_workloads`, run `default`
only): `SpeculativeConfig(method, num_speculative_tokens=k)` (EAGLE's head and a draft model are the
same tiny config), and a stand-in drafter: after each step that computed something, every scheduled request
gets k draft tokens (`Scheduler.update_draft_token_ids`, as `EngineCore.post_step` does; vLLM
ignores them for a prefill chunk); a request verifying drafts samples 1 + accepted tokens, the
accepted count drawn per request in scheduled order with `random.Random(seed)` and
`workloads.accepted_drafts` (placeholder drafts of a padded admission, -1, are never accepted).
Its step records also have:
  spec      {req_id: draft tokens scheduled (len(scheduled_spec_decode_tokens[req_id]))}
  accepted  {req_id: of them, accepted}: the replay feeds these counts to kvweb
  blocks    {req_id: blocks the request holds after schedule()}, for every scheduled request

LoRA adapters (`LORA_WORKLOADS`, under `lora_workloads`, every variant): `LoRAConfig(max_loras,
max_lora_rank=16)` in the VllmConfig (of it `Scheduler.schedule` reads only `max_loras`: the
`scheduled_loras` check); a request with adapter i carries `LoRARequest(f"lora-{i}", i,
f"/lora/{i}")`, whose name and path the engine's block hasher puts in every block's hash. The KV
cache is `num_gpu_blocks` as given: the adapters' GPU slots are not part of the scheduler's
decisions (vLLM takes them from the memory before sizing the KV cache). Their step records also
have `blocks` (as above) and
  loras     the adapters of the running requests after schedule() (`scheduled_loras`), sorted

Images (`MM_WORKLOADS`, under `mm_workloads`, every variant): each image is a
`MultiModalFeatureSpec(data=None, modality="image", identifier=f"img-{h}",
mm_position=PlaceholderRange(offset, length))`. The tiny model is text-only, so `Scheduler.__init__`
sizes no encoder budget or cache (`model_config.supports_multimodal_inputs` is False: no
`MultiModalBudget`, `max_num_encoder_input_tokens` 0, an `EncoderCacheManager` of 0); the recorder
sets `sched.max_num_encoder_input_tokens = encoder_budget` and `sched.encoder_cache_manager =
EncoderCacheManager(encoder_cache)` right after construction, the two values
`compute_mm_encoder_budget` would give a model whose largest image fits both. The stand-in
model runner computes no embeddings: the scheduler frees a request's encoder inputs itself in
`update_from_output` (`_free_encoder_inputs`) and the model runner reports nothing about them.
Their step records also have `blocks` (as above) and
  encoder   {req_id: [mm hash of each image the encoder computes for it in this step]}
  held      embeddings the encoder cache holds after the step (its size less its free slots:
            unreferenced images not yet evicted count)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import time
from collections import deque

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads as W  # noqa: E402

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.lora.request import LoRARequest  # noqa: E402
from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core.encoder_cache_manager import EncoderCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec  # noqa: E402
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

VERSION = "0.33.0"
TINY_MODEL = {  # a config only: no weights are read
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 2,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-5,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": 2,
}
VARIANTS = ("default", "no_full_isl", "async")
MAX_STEPS = 50_000
FILLER = 3  # the token a stand-in draft or sample holds past a request's fixed output (vLLM trims it)


def speculative(spec: dict, mc: ModelConfig, model_dir: str) -> SpeculativeConfig:
    """As few settings as the scheduler reads: the method and k (EAGLE's head needs a draft model
    config: the target's tiny one; n-gram its prompt-lookup window)."""
    extra = (
        {"model": model_dir}
        if spec["method"] in ("eagle", "draft_model")
        else {"prompt_lookup_max": 3, "prompt_lookup_min": 1}
    )
    return SpeculativeConfig(
        method=spec["method"],
        num_speculative_tokens=spec["spec_tokens"],
        target_model_config=mc,
        target_parallel_config=ParallelConfig(),
        **extra,
    )


def build(cfg: dict, variant: str, model_dir: str, spec: dict | None = None) -> Scheduler:
    mc = ModelConfig(model=model_dir, skip_tokenizer_init=True, max_model_len=cfg["max_model_len"], dtype="float32")
    sc = SchedulerConfig(
        max_num_seqs=cfg["max_num_seqs"],
        max_num_batched_tokens=cfg["max_num_batched_tokens"],
        max_model_len=cfg["max_model_len"],
        enable_chunked_prefill=True,
        long_prefill_token_threshold=0,
        is_encoder_decoder=False,
        async_scheduling=(variant == "async"),
        scheduler_reserve_full_isl=(variant != "no_full_isl"),
    )
    cc = CacheConfig(block_size=cfg["block_size"], enable_prefix_caching=cfg["enable_prefix_caching"])
    cc.num_gpu_blocks = cfg["num_gpu_blocks"]
    vc = VllmConfig(
        model_config=mc,
        scheduler_config=sc,
        cache_config=cc,
        device_config=DeviceConfig(device="cpu"),
        speculative_config=speculative(spec, mc, model_dir) if spec else None,
        lora_config=LoRAConfig(max_loras=cfg["max_loras"], max_lora_rank=16) if "max_loras" in cfg else None,
    )
    assert vc.scheduler_config.async_scheduling == (variant == "async")
    assert vc.scheduler_config.scheduler_reserve_full_isl == (variant != "no_full_isl")
    assert (vc.speculative_config is None) == (spec is None) and vc.kv_transfer_config is None
    kv = KVCacheConfig(
        num_blocks=cfg["num_gpu_blocks"],
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                ["layer.0"],
                FullAttentionSpec(block_size=cfg["block_size"], num_kv_heads=1, head_size=16, dtype=torch.float32),
            )
        ],
    )
    cls = AsyncScheduler if variant == "async" else Scheduler
    sched = cls(
        vllm_config=vc,
        kv_cache_config=kv,
        structured_output_manager=StructuredOutputManager(vc),
        block_size=cfg["block_size"],
        log_stats=False,
    )
    assert sched.kv_cache_manager.block_pool.num_gpu_blocks == cfg["num_gpu_blocks"]
    assert (sched.lora_config is None) == ("max_loras" not in cfg)
    # a text-only model: no encoder budget, an empty encoder cache; a multimodal model's, set here
    assert sched.max_num_encoder_input_tokens == 0 and sched.encoder_cache_manager.cache_size == 0
    if "encoder_budget" in cfg:
        sched.max_num_encoder_input_tokens = cfg["encoder_budget"]
        sched.encoder_cache_manager = EncoderCacheManager(cfg["encoder_cache"])
    if spec:
        eagle = spec["method"] == "eagle"
        ahead = spec["method"] in ("eagle", "draft_model")  # the drafters with lookahead slots
        assert sched.num_spec_tokens == spec["spec_tokens"]
        assert sched.num_lookahead_tokens == (spec["spec_tokens"] if ahead else 0)
        # vLLM's model runner V2 (its default here) drafts nothing in a step whose drafts would all
        # go unused (`SchedulerOutput.skip_drafts`); only drafters with lookahead slots skip
        assert sched.can_skip_drafts == (ahead and sched.use_v2_model_runner)
        # EAGLE with prefix caching: each block's hash also covers the token after it (its drafter
        # KV reads it), instead of dropping a hit's last block; without caching nothing is hit. A
        # draft model's KV at a position reads no later token: its blocks are hashed as without drafts
        lookahead_hashes = eagle and cfg["enable_prefix_caching"]
        assert vc.num_hash_lookahead_tokens == int(lookahead_hashes) and sched.use_eagle == eagle
        assert sched.use_eagle_block_drop == (eagle and not lookahead_hashes)
        assert sched.max_num_scheduled_tokens == cfg["max_num_batched_tokens"]
        # a draft model's input keeps one token more a request: one more of the budget (kvweb's `draft_slots`)
        assert vc.speculative_config.max_num_new_slots_for_drafting == int(spec["method"] == "draft_model")
    return sched


class Run:
    """One workload under one variant."""

    def __init__(self, wl: dict, variant: str, model_dir: str) -> None:
        self.wl, self.variant = wl, variant
        cfg = wl["config"]
        self.spec = wl.get("spec")
        self.sched = build(cfg, variant, model_dir, self.spec)
        self.draws = random.Random(self.spec["seed"]) if self.spec else None
        self.hasher = None
        if cfg["enable_prefix_caching"]:  # as EngineCore.__init__ does
            hash_fn = get_hash_fn_by_name(self.sched.cache_config.prefix_caching_hash_algo)
            init_none_hash(hash_fn)
            lookahead = self.sched.vllm_config.num_hash_lookahead_tokens
            self.hasher = get_request_block_hasher(cfg["block_size"], hash_fn, lookahead)
        self.reqs = {str(q["id"]): q for q in wl["requests"]}
        self.prompt = {rid: W.tokens(q["prompt"]) for rid, q in self.reqs.items()}
        self.output = {rid: W.tokens(q["output"]) for rid, q in self.reqs.items()}
        self.arrival = {rid: q["arrival_step"] for rid, q in self.reqs.items() if q["arrival_step"] is not None}
        self.followers: dict[str, list[tuple[str, int]]] = {}
        for rid, q in self.reqs.items():
            if "after" in q:
                prev, delay = q["after"]
                self.followers.setdefault(str(prev), []).append((rid, delay))
        self.pending: dict[int, list[str]] = {}
        for rid, s in self.arrival.items():
            self.pending.setdefault(s, []).append(rid)
        self.added = 0
        self.objs: dict[str, Request] = {}
        self.finished: set[str] = set()
        self.steps: list[dict] = []

    # -- the stand-in model runner -------------------------------------------------
    def execute(self, so, rec: dict) -> ModelRunnerOutput:
        """Right after schedule(): a request whose scheduled tokens reach the end of its known
        tokens samples the output token at the position after them; a partial prefill chunk
        samples nothing. A request verifying drafts samples 1 + accepted tokens from there."""
        req_ids, sampled = [], []
        for rid in so.num_scheduled_tokens:
            req = self.sched.requests[rid]
            req_ids.append(rid)
            if req.is_prefill_chunk:
                sampled.append([])
            else:
                # num_computed_tokens already counts this step (and, in async, the positions of
                # tokens not yet sampled, and the drafts): the token sampled now sits at that
                # position less the drafts.
                drafts = so.scheduled_spec_decode_tokens.get(rid, [])
                k = req.num_computed_tokens - len(drafts) - req.num_prompt_tokens
                accepted = self.accept(rid, drafts, rec)
                sampled.append(self.fixed(rid, k, 1 + accepted))
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=sampled,
            logprobs=None,
            prompt_logprobs_dict={},
            pooler_output=[],
        )

    def fixed(self, rid: str, start: int, n: int) -> list[int]:
        """n tokens of the request's fixed output from index `start` (FILLER past its end)."""
        return (self.output[rid][start : start + n] + [FILLER] * n)[:n]

    def accept(self, rid: str, drafts: list[int], rec: dict) -> int:
        """Drafts accepted, drawn (one draw per request verifying real drafts, in scheduled order)
        and noted in the step record; padding's placeholder drafts (-1) are all rejected."""
        if not drafts:
            return 0
        accepted = 0
        if drafts[0] != -1:
            accepted = W.accepted_drafts(self.draws.random(), self.spec["acceptance"], len(drafts))
        rec.setdefault("spec", {})[rid] = len(drafts)
        rec.setdefault("accepted", {})[rid] = accepted
        return accepted

    def propose(self, so) -> None:
        """The stand-in drafter, after the step (EngineCore.post_step): k drafts for every request
        scheduled, the true next tokens of its fixed output; none when `skip_drafts` (each would go
        unused: a prefill chunk's, or a request's that samples its last token)."""
        k, req_ids, drafts = self.spec["spec_tokens"], [], []
        for rid in () if so.skip_drafts else so.num_scheduled_tokens:
            req = self.sched.requests.get(rid)
            if req is not None:
                req_ids.append(rid)
                drafts.append(self.fixed(rid, len(req.output_token_ids), k))
        self.sched.update_draft_token_ids(DraftTokenIds(req_ids, drafts))

    # -- arrivals -------------------------------------------------------------------
    def add_arrivals(self, step: int, rec: dict) -> None:
        for rid in self.pending.pop(step, []):
            q = self.reqs[rid]
            self.arrival[rid] = step
            req = Request(
                request_id=rid,
                prompt_token_ids=list(self.prompt[rid]),
                sampling_params=SamplingParams(max_tokens=len(self.output[rid]), ignore_eos=True),
                pooling_params=None,
                arrival_time=float(step),
                block_hasher=self.hasher,
                lora_request=LoRARequest(f"lora-{a}", a, f"/lora/{a}") if (a := q.get("adapter")) else None,
                mm_features=[
                    MultiModalFeatureSpec(
                        data=None,
                        modality="image",
                        identifier=f"img-{h}",
                        mm_position=PlaceholderRange(offset=offset, length=length),
                    )
                    for offset, length, h in q.get("images", ())
                ],
            )
            self.sched.add_request(req)
            self.objs[rid] = req
            self.added += 1
            rec.setdefault("arrived", []).append(rid)
            assert q["id"] == int(rid)

    def schedule(self, rec: dict):
        sched = self.sched
        running_before = {r.request_id for r in sched.running}
        so = sched.schedule()
        if so.num_scheduled_tokens:
            rec["tokens"] = dict(so.num_scheduled_tokens)
        admitted = {}
        for rid, n in so.num_scheduled_tokens.items():
            if rid not in running_before:
                admitted[rid] = sched.requests[rid].num_computed_tokens - n
        if admitted:
            rec["admitted"] = admitted
        if so.preempted_req_ids:
            rec["preempted"] = sorted(so.preempted_req_ids, key=int)
        cfg = self.wl["config"]
        extended = self.spec or "max_loras" in cfg or "encoder_budget" in cfg
        if extended and so.num_scheduled_tokens:
            held = sched.kv_cache_manager.coordinator.single_type_managers[0].req_to_blocks
            rec["blocks"] = {rid: len(held[rid]) for rid in so.num_scheduled_tokens}
        if "max_loras" in cfg:
            loras = sorted({r.lora_request.lora_int_id for r in sched.running if r.lora_request})
            if loras:
                rec["loras"] = loras
        if so.scheduled_encoder_inputs:
            rec["encoder"] = {
                rid: [int(sched.requests[rid].mm_features[i].identifier[4:]) for i in inputs]
                for rid, inputs in so.scheduled_encoder_inputs.items()
            }
        return so

    def update(self, so, mro, step: int, rec: dict) -> None:
        sched = self.sched
        sched.update_from_output(so, mro)
        done = sorted(sched.finished_req_ids, key=int)  # freed by this update (cleared by schedule())
        done = [r for r in done if r not in self.finished]
        for rid in done:
            req = self.objs[rid]
            assert rid not in sched.requests, rid  # freed
            assert list(req.output_token_ids) == self.output[rid], (self.wl["name"], rid)
            self.finished.add(rid)
            for follower, delay in self.followers.get(rid, ()):
                self.pending.setdefault(step + delay, []).append(follower)
        if done:
            rec.setdefault("finished", []).extend(done)

    def all_done(self) -> bool:
        return len(self.finished) == len(self.reqs)

    # -- drivers ----------------------------------------------------------------------
    def run(self) -> list[dict]:
        if self.variant == "async":
            self._run_async()
        else:
            self._run_sync()
        self._check()
        return self.steps

    def _end_step(self, rec: dict) -> None:
        rec["free"] = self.sched.kv_cache_manager.block_pool.get_num_free_blocks()
        if "encoder_budget" in self.wl["config"]:
            cache = self.sched.encoder_cache_manager
            rec["held"] = cache.cache_size - cache.num_free_slots
        self.steps.append(rec)
        if len(self.steps) > MAX_STEPS:
            raise RuntimeError(f"{self.wl['name']}/{self.variant}: no end after {MAX_STEPS} steps")

    def _run_sync(self) -> None:
        """EngineCore.step: schedule, execute, update_from_output."""
        step = 0
        while not self.all_done():
            rec: dict = {}
            self.add_arrivals(step, rec)
            so = self.schedule(rec)
            self.update(so, self.execute(so, rec), step, rec)
            if self.spec and so.total_num_scheduled_tokens > 0:
                self.propose(so)
            self._end_step(rec)
            step += 1

    def _run_async(self) -> None:
        """EngineCore.step_with_batch_queue with batch_queue_size 2 (async scheduling, no PP):
        if the scheduler has requests, schedule and launch a batch; return without processing
        any output if the queue is not full (and the batch ran or requests remain); otherwise
        process the oldest batch's output (update_from_output)."""
        sched, size = self.sched, 2
        queue: deque = deque()
        step = 0
        while not self.all_done():  # (what is left in the queue then has no tokens)
            rec: dict = {}
            self.add_arrivals(step, rec)
            pop = True
            if sched.has_requests():
                so = self.schedule(rec)
                executed = so.total_num_scheduled_tokens > 0
                queue.appendleft((so, self.execute(so, rec)))
                if len(queue) < size and (executed or sched.has_requests()):
                    pop = False
            elif not queue:
                pop = False  # idle: nothing scheduled, nothing in flight
            if pop:
                so, mro = queue.pop()
                self.update(so, mro, step, rec)
            self._end_step(rec)
            step += 1
        assert all(not so.num_scheduled_tokens for so, _ in queue)

    def _check(self) -> None:
        sched = self.sched
        assert not sched.requests and not sched.running and not sched.waiting, self.wl["name"]
        pool = sched.kv_cache_manager.block_pool
        assert pool.get_num_free_blocks() == pool.num_gpu_blocks - 1  # all but the null block
        assert not any(sched.encoder_cache_manager.cached.values())  # every image unreferenced
        assert not self.pending
        # the records tell each request's story: admitted with its hit, computes its scheduled
        # tokens less its rejected drafts, loses them when preempted, ends with prompt + output - 1
        # computed (plus, with drafts, those accepted past its last token: vLLM trims their output)
        computed: dict[str, int | None] = {}
        excess = range(self.spec["spec_tokens"] + 1 if self.spec else 1)
        for rec in self.steps:
            for rid in rec.get("arrived", ()):
                computed[rid] = None
            for rid in rec.get("preempted", ()):
                assert computed[rid] is not None
                computed[rid] = None
            for rid, hit in rec.get("admitted", {}).items():
                assert computed[rid] is None and hit % self.wl["config"]["block_size"] == 0
                computed[rid] = hit
            for rid, n in rec.get("tokens", {}).items():
                computed[rid] += n - rec.get("spec", {}).get(rid, 0) + rec.get("accepted", {}).get(rid, 0)
            for rid in rec.get("finished", ()):
                assert computed.pop(rid) - (len(self.prompt[rid]) + len(self.output[rid]) - 1) in excess, rid
        assert not computed


def record(names: set[str] | None, variants: tuple[str, ...], out: str) -> dict:
    model_dir = tempfile.mkdtemp(prefix="kvweb-parity-model-")
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(TINY_MODEL, f)
    data = {
        "engine": "vllm",
        "version": vllm.__version__,
        "token_formula": W.TOKEN_FORMULA,
        "format": "Variants" + __doc__.split("Variants", 1)[1].rstrip(),
        "workloads": [],
    }
    assert vllm.__version__ == VERSION, vllm.__version__
    t0 = time.time()
    spec_variants = tuple(v for v in variants if v == "default")  # kvweb simulates drafts synchronously only
    for key, workloads, wl_variants in (
        ("workloads", W.WORKLOADS, variants),
        ("spec_workloads", W.SPEC_WORKLOADS, spec_variants),
        ("lora_workloads", W.LORA_WORKLOADS, variants),
        ("mm_workloads", W.MM_WORKLOADS, variants),
    ):
        entries = data.setdefault(key, [])
        for wl in workloads:
            if names and wl["name"] not in names or not wl_variants:
                continue
            entry = {k: wl[k] for k in ("name", "category", "config", "spec", "requests") if k in wl}
            entry["runs"], entry["arrivals"] = {}, {}
            for variant in wl_variants:
                t = time.time()
                run = Run(wl, variant, model_dir)
                entry["runs"][variant] = run.run()
                entry["arrivals"][variant] = {rid: s for rid, s in sorted(run.arrival.items(), key=lambda x: int(x[0]))}
                steps = entry["runs"][variant]
                n_pre = sum(len(s.get("preempted", ())) for s in steps)
                print(
                    f"{wl['name']:20} {variant:12} {len(steps):5} steps {n_pre:4} preemptions {time.time() - t:6.1f} s",
                    flush=True,
                )
            # requests: the arrival step of the default run for follow-up turns
            entry["requests"] = [dict(q) for q in wl["requests"]]
            for q in entry["requests"]:
                if q["arrival_step"] is None and "default" in entry["arrivals"]:
                    q["arrival_step"] = entry["arrivals"]["default"][str(q["id"])]
            entries.append(entry)
    print(f"total {time.time() - t0:.1f} s", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    raw = json.dumps(data, separators=(",", ":")).encode()
    with open(out, "wb") as f:  # no file name, no time stamp in the header: reproducible bytes
        f.write(gzip.compress(raw, compresslevel=9, mtime=0))
    print(f"wrote {out}: {os.path.getsize(out)} bytes gzipped ({len(raw)} raw)")
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        default=os.path.join(
            os.path.dirname(__file__), "..", "..", "tests", "data", "parity", f"vllm-{VERSION}.json.gz"
        ),
    )
    ap.add_argument("--only", nargs="*", help="workload names (default: all)")
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    a = ap.parse_args()
    record(set(a.only) if a.only else None, tuple(a.variants), os.path.normpath(a.out))


if __name__ == "__main__":
    main()
