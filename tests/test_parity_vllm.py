"""kvweb's vLLM V1 scheduler replayed step by step against vLLM's own `Scheduler`.

`tests/data/parity/vllm-<version>.json.gz` holds seeded workloads and, for each, what vLLM's
real scheduler decided in every step (recorded on a CPU by `bash scripts/parity/record-vllm.sh`; CI
never installs vLLM). Here kvweb's `V1Scheduler` serves the same requests with the same number
of blocks, budget and batch limit, one iteration per step vLLM computed something, and must
decide the same: the tokens each request computes, the requests admitted with their prefix-cache
hits, the requests preempted and the requests finished. A failure names the first step that
differs, with both decisions.

Speculative decoding (`spec_workloads`, vLLM's `default` run): kvweb's `SpecV1Scheduler` serves
them with the k and the lookahead vLLM used (EAGLE and a draft model k, n-gram none; a draft model's
input slot in the budget and its blocks hashed without the next token), the drafter's layer not
counted in the blocks (the recording's pool is `num_gpu_blocks`), and takes each verify's
accepted drafts from the recording instead of drawing them. Besides the decisions above it must
schedule the same draft tokens per request, leave each scheduled request holding the same
number of blocks, and leave the same number of blocks free after every step.

LoRA adapters (`lora_workloads`) and images (`mm_workloads`), every run: kvweb's `V1Scheduler` with
vLLM's `max_loras` (`LoraConfig`; the pool is still `num_gpu_blocks`: the slots' bytes are added
to the GPU's memory) or the recorded encoder budget and cache (`EncoderConfig`), each request with
its adapter or images. Besides the decisions above it must leave each scheduled request holding
the same number of blocks and the same number of blocks free after every step, and keep the same
adapters among the running requests (LoRA) or have the encoder compute the same images for the same
requests and leave the encoder cache holding as many embeddings (images).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.labs.schedulers import CHECKED, VLLM_VERSION
from kvweb.serving.loop.sequence import Seq
from kvweb.serving.schedulers.spec_decode import Drafts, SpecV1Scheduler
from kvweb.serving.memory.encoder_cache import EncoderConfig
from kvweb.serving.memory.lora import LoraConfig
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler
from kvweb.serving.load.workload import Image, Request

DATA = Path(__file__).parent / "data" / "parity" / f"vllm-{VLLM_VERSION}.json.gz"
RECORDED = json.loads(gzip.decompress(DATA.read_bytes()))
# Each run's scheduler settings besides the workload's: vLLM's defaults, the full-prompt check off,
# async scheduling.
RUNS = {"default": {}, "no_full_isl": {"full_prompt_check": False}, "async": {"async_scheduling": True}}
BASE = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])


def segment_tokens(segments: list[list[int]]) -> list[int]:
    """Token ids of a list of [seed, length] segments (the recorder's formula, `token_formula`)."""
    out: list[int] = []
    for seed, length in segments:
        out += [1 + (seed * 1_000_003 + i * 7_919) % 30_000 for i in range(length)]
    return out


def cost_with_blocks(blocks: int, block_size: int, lora: LoraConfig | None = None):  # noqa: ANN201
    """The paper GPU with exactly `blocks` blocks of KV, as vLLM's `num_gpu_blocks` (beside the
    adapters' slots, if any)."""
    kv = BASE.model.kv_bytes_per_token
    tokens = blocks * block_size
    slots = lora.max_loras * lora.slot_bytes(BASE) if lora else 0
    cost = replace(BASE, mem_util=(BASE.model.weight_bytes + slots + tokens * kv + kv / 2) / BASE.gpu.hbm_bytes)
    assert (lora.kv_blocks(cost, block_size) if lora else cost.kv_capacity_blocks(block_size)) == blocks
    return cost


def requests_of(workload: dict[str, Any], run: str) -> list[tuple[int, Request]]:
    """(arrival step, request) for each recorded request, in arrival order. A chat turn arrived
    some steps after the turn it follows finished: in each run at the step recorded for it."""
    out = []
    arrived = workload.get("arrivals", {}).get(run, {})
    for r in workload["requests"]:
        prompt, output = segment_tokens(r["prompt"]), segment_tokens(r["output"])
        tokens = np.array(prompt + output, dtype=np.int64)
        step = arrived.get(str(r["id"]), r["arrival_step"])
        images = tuple(Image(*image) for image in r.get("images", ()))
        adapter = r.get("adapter", 0)
        out.append(
            (step, Request(r["id"], float(step), len(prompt), len(output), tokens, adapter=adapter, images=images))
        )
    return sorted(out, key=lambda x: (x[0], x[1].id))


class Drawn:
    """A stand-in for the scheduler's random draws: always `u`."""

    def __init__(self, u: float) -> None:
        self.u = u

    def random(self) -> float:
        return self.u


class SpecReplay(SpecV1Scheduler):
    """kvweb's speculative decoding with the recorded acceptances, noting what each request was
    scheduled: a decode's 1 + drafts (`_keep`), an admission's first chunk (`_first_chunk`, padded
    to 1 + k with placeholder drafts beside decodes)."""

    def __init__(self, cost: CostModel, config: V1Config, drafts: Drafts, method: str) -> None:
        super().__init__(cost, config, drafts)
        # vLLM's method as kvweb's drafter sets it (drafters.py; none priced here): EAGLE's and a draft
        # model's k lookahead slots, n-gram's none; a draft model's input slot and plain block hashes
        self.lookahead = 0 if method == "ngram" else drafts.k
        if method == "draft_model":
            self.draft_slots, self.next_token_hashes = 1, False
        self.recorded: dict[str, int] = {}  # this step's accepted drafts, from the recording
        self.scheduled: dict[int, int] = {}  # this step's tokens of decodes and admissions
        self._chunk = 0

    def _keep(self, seq: Seq, n: int, step: int) -> None:
        if n:
            self.scheduled[seq.id] = n
            accepted = self.recorded.get(str(seq.id), 0)
            # the draw that accepts exactly the recorded count (kvweb accepts position j while u is
            # below P(at least j + 1 accepted)); a count beyond kvweb's drafts shows as a difference
            at_least = self._at_least[: n - 1]
            self._random = Drawn(at_least[accepted] if accepted < len(at_least) else 0.0)
        super()._keep(seq, n, step)

    def _first_chunk(self, uncached: int, hit: int, budget: int, running: bool, chunked: bool) -> int:
        self._chunk = super()._first_chunk(uncached, hit, budget, running, chunked)
        return self._chunk

    def _admitted(self, seq: Seq, hit: int) -> None:
        self.scheduled[seq.id] = self._chunk
        super()._admitted(seq, hit)


class Replay(V1Scheduler):
    """kvweb's V1 scheduler noting the images the encoder computes for each request in a step and
    the adapters of the requests that leave once it is scheduled (async scheduling: vLLM's
    `running` still holds them when it records the adapters)."""

    def __init__(self, cost: CostModel, config: V1Config) -> None:
        super().__init__(cost, config)
        self.encoded: dict[str, list[int]] = {}
        self.left: set[int] = set()

    def _leave(self) -> None:
        self.left |= {seq.req.adapter for seq in self.leaving if seq.req.adapter}
        super()._leave()

    def _encode(self, seq: Seq, images: list, found: list) -> list[int]:
        if images:
            self.encoded[str(seq.id)] = [image.mm_hash for image in images]
        return super()._encode(seq, images, found)


def decisions(sched: V1Scheduler, before: dict[int, int], waiting: set[int]) -> dict[str, Any]:
    """One iteration's decisions in the recorder's form, read from the scheduler's state right after
    it. `before`: each running request's computed tokens before it (-1: decoding); `waiting`: the
    waiting requests' ids before it. With drafts, also each scheduled request's draft tokens (a
    decode's beyond its one, an admission's placeholders beyond its prompt) and blocks."""
    tokens: dict[str, int] = {}
    admitted: dict[str, int] = {}
    spec: dict[str, int] = {}
    scheduled = sched.scheduled if isinstance(sched, SpecReplay) else None
    for seq in [*sched.running.values(), *sched.prefilling]:
        rid = str(seq.id)
        if before.get(seq.id) == -1:  # a decode: one token, with drafts 1 + its drafts (or none)
            tokens[rid], known = (1, 1) if scheduled is None else (scheduled.get(seq.id, 0), 1)
        elif seq.id in before:
            tokens[rid] = known = seq.computed - before[seq.id]  # the next chunk
        elif seq.id in waiting:
            admitted[rid] = seq.hit
            known = seq.computed - seq.hit
            tokens[rid] = known if scheduled is None else scheduled[seq.id]
        else:
            continue
        if not tokens[rid]:
            del tokens[rid]
        elif tokens[rid] > known:
            spec[rid] = tokens[rid] - known
    now_waiting = {s.id for s in sched.waiting}
    out: dict[str, Any] = {"tokens": tokens}
    if admitted:
        out["admitted"] = admitted
    preempted = [str(i) for i in sorted(before) if i in now_waiting]
    if preempted:
        out["preempted"] = preempted
    if scheduled is not None or sched.adapters or sched.encoder:
        held = {str(s.id): len(s.blocks) for s in [*sched.running.values(), *sched.prefilling]}
        out["blocks"] = {rid: held[rid] for rid in tokens}
        if spec:
            out["spec"] = spec
    if sched.adapters and (sched.adapters.users or sched.left):
        out["loras"] = sorted(set(sched.adapters.users) | sched.left)
    if isinstance(sched, Replay) and sched.encoded:
        out["encoder"] = sched.encoded
    return out


def scheduler_for(workload: dict[str, Any], run: str) -> V1Scheduler:
    """kvweb's scheduler with the recorded run's settings (and drafts, for a spec workload)."""
    c = workload["config"]
    lora = LoraConfig(max_loras=c["max_loras"]) if "max_loras" in c else None
    config = V1Config(
        c["max_model_len"],
        c["block_size"],
        c["max_num_seqs"],
        c["max_num_batched_tokens"],
        c["enable_prefix_caching"],
        lora=lora,
        encoder=EncoderConfig(c["encoder_budget"], c["encoder_cache"]) if "encoder_budget" in c else None,
        **RUNS[run],
    )
    cost = cost_with_blocks(c["num_gpu_blocks"], c["block_size"], lora)
    if lora or config.encoder:
        return Replay(cost, config)
    if "spec" not in workload:
        return V1Scheduler(cost, config)
    spec = workload["spec"]
    k = spec["spec_tokens"]
    drafts = Drafts(k, tuple(spec["acceptance"]), spec["seed"], drafter="")
    return SpecReplay(cost, config, drafts, spec["method"])


def first_divergence(workload: dict[str, Any], run: str) -> str | None:
    """Replay a recorded run on kvweb; None if every step agrees, else where and how they differ."""
    sched = scheduler_for(workload, run)
    c = workload["config"]
    compared = (
        "tokens",
        "admitted",
        "preempted",
        "finished",
        *(("spec", "blocks", "free") if "spec" in workload else ()),
        *(("blocks", "free", "loras") if "max_loras" in c else ()),
        *(("blocks", "free", "encoder", "held") if "encoder_budget" in c else ()),
    )
    arrivals = requests_of(workload, run)
    steps = workload["runs"][run]
    late = RUNS[run].get("async_scheduling", False)  # the engine reads a step's output one step later
    finished: list[str] = []  # kvweb's, as the engine reports them at the current step
    for index, expected in enumerate(steps):
        # (the adapters are compared where vLLM computed something: kvweb decides nothing else)
        kept = [k for k in compared if k != "loras" or expected.get("tokens")]
        want = {k: sorted(v, key=int) if isinstance(v, list) else v for k, v in expected.items() if k in kept}
        got: dict[str, Any] = {}
        if expected.get("tokens"):  # else vLLM computed nothing (idle, or waiting for blocks to be freed)
            while arrivals and arrivals[0][0] <= index:
                sched._submit(arrivals.pop(0)[1])
            before = {i: -1 for i in sched.running} | {s.id: s.computed for s in sched.prefilling}
            waiting = {s.id for s in sched.waiting}
            if isinstance(sched, SpecReplay):
                sched.recorded, sched.scheduled = expected.get("accepted", {}), {}
            if isinstance(sched, Replay):
                sched.encoded, sched.left = {}, set()
            sched.step += 1
            sched._iterate()
            got = decisions(sched, before, waiting)
            leaving = sched.finish_at.pop(sched.dstep, [])
            for seq in leaving:
                sched._finish(seq)
            if not late:
                finished += [str(i) for i in sorted(seq.id for seq in leaving)]
        else:
            sched._idle()  # the engine reads the last step's output (async scheduling: its finished requests leave)
        if finished:
            got["finished"] = finished
        if "free" in compared:
            got["free"] = len(sched.pool.free)
        if "held" in compared:
            got["held"] = sched.encoder.held
        if got != want:
            context = json.dumps(steps[max(0, index - 2) : index], separators=(",", ":"))[:600]
            return (
                f"{workload['name']} ({run}): step {index} differs\n  vLLM:  {want}\n  kvweb: {got}\n"
                f"  vLLM's two steps before: {context}"
            )
        finished = [str(i) for i in sorted(seq.id for seq in leaving)] if late and expected.get("tokens") else []
    left = [r.id for _, r in arrivals] + [s.id for s in [*sched.running.values(), *sched.prefilling, *sched.waiting]]
    if left:
        return f"{workload['name']} ({run}): vLLM finished everything; kvweb still has {left[:10]}"
    return None


ALL = RECORDED["workloads"] + RECORDED["spec_workloads"] + RECORDED["lora_workloads"] + RECORDED["mm_workloads"]
CASES = [(w["name"], run) for w in ALL for run in w["runs"] if run in RUNS]
WORKLOADS = {w["name"]: w for w in ALL}


@pytest.mark.parametrize(("name", "run"), CASES, ids=[f"{n}-{r}" for n, r in CASES])
def test_kvweb_decides_as_vllm_step_by_step(name, run):
    why = first_divergence(WORKLOADS[name], run)
    assert why is None, why


def test_the_recording_covers_what_the_issue_asks():
    categories = {w["category"] for w in RECORDED["workloads"]}
    assert len(RECORDED["workloads"]) >= 40
    assert {
        "random",
        "tight",
        "staggered",
        "few_shot",
        "multi_turn",
        "long_prompt",
        "max_num_seqs",
        "token_budget",
        "prefix_caching",
        "copies",
    } <= categories
    assert sum(len(s) for w in RECORDED["workloads"] for s in w["runs"].values()) > 1000


def test_the_lab_says_what_was_checked():
    runs = [s for w in RECORDED["workloads"] for s in w["runs"].values()]
    computed = sum(1 for run in runs for step in run if step.get("tokens"))
    preempted = sum(len(step.get("preempted", ())) for run in runs for step in run)
    assert RECORDED["version"] == VLLM_VERSION and {r for w in RECORDED["workloads"] for r in w["runs"]} == set(RUNS)
    assert f"{len(RECORDED['workloads'])} recorded workloads" in CHECKED
    assert f"{computed:,} steps" in CHECKED and f"{preempted:,} preemptions" in CHECKED
    spec = [s for w in RECORDED["spec_workloads"] for s in w["runs"].values()]
    spec_computed = sum(1 for run in spec for step in run if step.get("tokens"))
    spec_preempted = sum(len(step.get("preempted", ())) for run in spec for step in run)
    assert (
        f"{len(RECORDED['spec_workloads'])} more with speculative decoding, {spec_computed:,} steps and "
        f"{spec_preempted:,} preemptions" in CHECKED
    )
    for key, what in (("lora_workloads", "LoRA adapters"), ("mm_workloads", "images")):
        runs = [s for w in RECORDED[key] for s in w["runs"].values()]
        computed = sum(1 for run in runs for step in run if step.get("tokens"))
        preempted = sum(len(step.get("preempted", ())) for run in runs for step in run)
        assert {r for w in RECORDED[key] for r in w["runs"]} == set(RUNS)
        assert f"{len(RECORDED[key])} with {what}, {computed:,} steps and {preempted:,} preemptions" in CHECKED


def test_the_spec_recording_covers_what_the_issue_asks():
    """At least 12 seeded workloads with drafts: k from 1 to 4, EAGLE and a draft model (lookahead slots)
    and n-gram (none), prefix caching on and off, memory that preempts, budgets that cut a request's drafts or
    leave it out, and one-token admissions padded to 1 + k; every acceptance in [0, 1]."""
    spec = RECORDED["spec_workloads"]
    steps = [(w, s) for w in spec for s in w["runs"]["default"]]
    assert len(spec) >= 12 and all(set(w["runs"]) == {"default"} for w in spec)
    assert {w["spec"]["spec_tokens"] for w in spec} == {1, 2, 3, 4}
    assert {w["spec"]["method"] for w in spec} == {"eagle", "ngram", "draft_model"}
    assert {w["config"]["enable_prefix_caching"] for w in spec} == {True, False}
    assert all(len(w["spec"]["acceptance"]) == w["spec"]["spec_tokens"] for w in spec)
    assert {r for w in spec for r in w["spec"]["acceptance"]} >= {0.0, 1.0}
    assert sum(len(s.get("preempted", ())) for _, s in steps) > 0
    cut = [n for w, s in steps for n in s.get("spec", {}).values() if n < w["spec"]["spec_tokens"]]
    padded = [r for _, s in steps for r in s.get("spec", {}) if r in s.get("admitted", {})]
    assert cut and padded
    assert all(0 <= s["accepted"][r] <= n for _, s in steps for r, n in s.get("spec", {}).items())


def waiting_passed_over(workload: dict[str, Any], steps: list[dict[str, Any]]) -> int:
    """Admissions of a request while one that arrived before it (and was not preempted) still waits:
    under first come first served only a skip (vLLM's `skip_request`) lets one through."""
    waiting: list[str] = []
    passed = 0
    for step in steps:
        for rid in step.get("preempted", ()):
            waiting.insert(0, rid)
        waiting += step.get("arrived", [])
        admitted = step.get("admitted", {})
        passed += sum(1 for rid in admitted if any(w not in admitted for w in waiting[: waiting.index(rid)]))
        waiting = [w for w in waiting if w not in admitted]
    return passed


def test_the_lora_recording_covers_what_the_issue_asks():
    """At least 6 seeded workloads with adapters: max_loras 1, 2 and 4, several adapters beside
    base-model requests, a prefix shared under two adapters (each finds only its own copy), memory
    that preempts, and waiting requests skipped for want of an adapter slot while later ones run."""
    lora = RECORDED["lora_workloads"]
    assert len(lora) >= 6 and all(set(w["runs"]) == set(RUNS) for w in lora)
    assert {w["config"]["max_loras"] for w in lora} == {1, 2, 4}
    adapters = [q.get("adapter", 0) for w in lora for q in w["requests"]]
    assert 0 in adapters and len(set(adapters)) >= 6
    assert sum(len(s.get("preempted", ())) for w in lora for s in w["runs"]["default"]) > 0
    assert all(waiting_passed_over(w, w["runs"]["default"]) for w in lora if w["config"]["max_loras"] == 1)
    assert all(len(s.get("loras", ())) <= w["config"]["max_loras"] for w in lora for s in w["runs"]["default"])
    shared = next(w for w in lora if w["name"] == "lora-shared-prefix")
    adapter = {str(q["id"]): q["adapter"] for q in shared["requests"]}
    hits = [(adapter[r], h) for s in shared["runs"]["default"] for r, h in s.get("admitted", {}).items()]
    # the first request of each adapter finds nothing, the later ones its adapter's prefix (320 tokens)
    for a in (1, 2):
        first, *later = [h for b, h in hits if b == a]
        assert first == 0 and later and all(h >= 320 for h in later)


def test_the_image_recording_covers_what_the_issue_asks():
    """At least 6 seeded workloads with images: images hitting the encoder cache, images computed
    again after eviction, chunks cut just before an image (encoder budget), prefix hits that stop
    inside an image, text-only requests admitted past a request waiting for the encoder, memory
    that preempts, prefix caching on and off."""
    mm = RECORDED["mm_workloads"]
    assert len(mm) >= 6 and all(set(w["runs"]) == set(RUNS) for w in mm)
    assert {w["config"]["enable_prefix_caching"] for w in mm} == {True, False}
    scheduled = needed = again = cut = inside = 0
    for w in mm:
        c, steps = w["config"], w["runs"]["default"]
        images = {str(q["id"]): q["images"] for q in w["requests"]}
        prompt = {str(q["id"]): sum(n for _, n in q["prompt"]) for q in w["requests"]}
        computed: dict[str, int] = {}
        seen: set[int] = set()
        for s in steps:
            for rid in s.get("preempted", ()):
                del computed[rid]
            for rid, hit in s.get("admitted", {}).items():
                computed[rid] = hit
                inside += any(o < hit < o + n for o, n, _ in images[rid])
            full = sum(s.get("tokens", {}).values()) == c["max_num_batched_tokens"]
            for rid, n in s.get("tokens", {}).items():
                computed[rid] += n
                short = computed[rid] < prompt[rid] and not full
                cut += short and any(o == computed[rid] for o, _, _ in images[rid])
            for rid, hashes in s.get("encoder", {}).items():
                again += len(seen.intersection(hashes))
                seen.update(hashes)
                scheduled += len(hashes)
            assert s.get("held", 0) <= c["encoder_cache"]
        needed += len({h for q in w["requests"] for _, _, h in q["images"]})
        if w["name"] == "mm-skip":
            assert waiting_passed_over(w, steps)
    assert scheduled > needed  # evicted images computed again
    assert again and cut and inside
    assert sum(len(s.get("preempted", ())) for w in mm for s in w["runs"]["default"]) > 0
