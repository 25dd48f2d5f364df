"""Lab `schedulers`: the papers' engine beside vLLM V1-style and SGLang-style scheduling, on the
same requests, the same paper GPU and the same SLO.

`paper` is the engine of the lab `engine` (vLLM 2023: paged memory, whole prefills, preemption by
recompute or swap, no prefix caching). `vllm-v1` is serving/v1_scheduler.py (token budget,
chunked prefill, automatic prefix caching, recompute-only preemption); `sglang` is
serving/radix_scheduler.py on the pools its model needs (prefix/sglang_pools.py: a `RadixCache`, or
for window and linear layers SGLang's two pools). The lab runs every mode of the registry
(prefix/modes.py, which makes each scheduler from the parameters) that can serve the model.
`host_tier_gb` gives vLLM V1 and SGLang a host-memory tier (serving/host_tier.py).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import param

from kvweb.budget import GROUP_PAGES, MAP_CELLS, MAP_SCANS, POOL_SLOTS, Estimate, Unit, work
from kvweb.gpu import MODELS, CostModel
from kvweb.gpu.explain import Explanation, memory
from kvweb.gpu.measured_cost import cost_source
from kvweb.lab import ADVANCED, ParamError, Progress, Text, no_progress
from kvweb.memo import Memo
from kvweb.labs.engine import ServingLab, timeline
from kvweb.labs.max_rate import SEARCH_DOUBLINGS
from kvweb.labs.paper_gpu import PaperGPULab
from kvweb.prefix.modes import MODES, SPEC, SWAP_PRICES, V1_ONLY, Settings
from kvweb.prefix.sglang_pools import sglang_pool_figures
from kvweb.prefix.served_workload import few_shot_traffic, multi_turn_traffic
from kvweb.serving.continuous_batching import CACHED, FREE, SHARED, ContinuousBatching, prefix_figures
from kvweb.serving.engine_setup import Setup
from kvweb.serving.engine_trace import MAX_CELLS, TraceRecorder
from kvweb.serving.hybrid_kv import kv_layout
from kvweb.serving.max_rate import search
from kvweb.serving.metrics import attainment, summarize, throughput
from kvweb.serving.metrics import explain as explain_run
from kvweb.serving.radix_scheduler import DENSE_SLOTS, POLICIES, default_chunk_size
from kvweb.serving.sequence import Run
from kvweb.serving.spec_decode import MAX_SPEC_TOKENS, SpecV1Scheduler, parse_acceptance
from kvweb.serving.v1_scheduler import default_token_budget
from kvweb.serving.workload import SHAPES, Request

PREFIX_WORKLOADS = ("few-shot", "multi-turn")
MAX_WORKLOAD_TOKENS = 2_000_000  # tokens of all few-shot or multi-turn requests together
PAPER = ("SGLang paper (Zheng et al., NeurIPS 2024), Fig. 5: up to 6.4x the throughput of the systems it was "
         "compared with on workloads that share prefixes (few-shot, multi-turn chat, agents), with 50-99 % cache hit "
         "rates; vLLM paper (Kwon et al., SOSP 2023), section 6.4 (Fig. 16): sharing a prefix named by hand gives 1.67x "
         "(1-shot) and 3.58x (5-shot) the throughput of Orca (Oracle). Today's vLLM and SGLang both find shared prefixes "
         "by themselves; this simulator is not expected to match those figures, only to move the same way.")

# What the vllm-v1 mode was checked against (tests/test_parity_vllm.py replays the recording and
# checks these figures).
VLLM_VERSION = "0.33.0"
CHECKED = (f"vllm-v1 checked against vLLM {VLLM_VERSION}'s own scheduler, step by step: 47 recorded workloads, "
           "each synchronous, with the old first-chunk admission check and with async scheduling, 48,886 steps "
           "and 666 preemptions, every decision identical; sglang's radix cache and admission against SGLang 0.5.23's "
           "own RadixCache: 48 workloads, 5,405 operations and 40 admission rounds, identical")

MAX_HOST_TIER_GB = 4096.0  # host memory of a large 8-GPU server
SPEC_REFUSAL = "speculative decoding (spec_tokens > 0) is simulated in vllm-v1 only"
# What the requests do not depend on: how they are served, the SLO and the paper GPU.
SERVING_ONLY = ("model", "block_size", "watermark", "preemption", "allocator", "token_budget", "chunk_size", "policy",
                "mixed_chunk", "prefix_caching", "max_seqs", "search", "target", "ttft_slo_s", "tpot_slo_ms", *V1_ONLY,
                "host_tier_gb", *SPEC)
FEW_SHOT_ONLY, MULTI_TURN_ONLY = ("tasks", "examples_len"), ("turns", "think_s")
# Remembered results, shared by every session (a run is a pure function of its key; results are
# only read): in the app a widget change reruns only the modes that read it, and a search only
# when something it reads changed (not the rate: it scales the requests' arrivals itself).
RUNS_KEPT = 3  # traced runs per mode (about 2.5 MB each)
_RUNS: Memo[tuple[dict[str, Any], list[tuple[int, int]]]] = Memo(RUNS_KEPT * len(MODES))
_SEARCHES: Memo[tuple[float, list[dict]]] = Memo(2 * len(MODES))
_WORKLOADS: Memo[list[Request]] = Memo(4)


def unread_by_workload(workload: str) -> tuple[str, ...]:
    """The parameters a workload's requests do not depend on (besides `SERVING_ONLY`)."""
    if workload == "few-shot":
        return ("prompt_len", "concurrency", *MULTI_TURN_ONLY)
    if workload == "multi-turn":
        return ("prompt_len", "concurrency", *FEW_SHOT_ONLY)
    if workload == "closed-loop":  # each request arrives when one finishes
        return ("rate", *FEW_SHOT_ONLY, *MULTI_TURN_ONLY, "system_len", "question_len")
    return ("concurrency", *FEW_SHOT_ONLY, *MULTI_TURN_ONLY, "system_len", "question_len")


# Smaller SGLang chunks make a run quadratic in a prompt's chunks (`check`): in CPython, scenario
# A's long-context traffic takes 1.0 s at the default, 1.2 s in chunks of 256, 2.5 s of 64, 12 s of
# 16, and the app would hang for minutes. vLLM's budget has a like floor (max_seqs, 256 by default).
MIN_CHUNK = 256


class SchedulersLab(ServingLab):
    lab_name = "schedulers"
    title = "Today's schedulers: vLLM V1 and SGLang beside the papers' engine"
    summary = ("The same requests on the same paper GPU, three ways: the papers' engine (whole prefills, no prefix "
               "cache), vLLM V1 (one token budget per step shared by decodes and prefill chunks, automatic prefix "
               "caching of full blocks, recompute-only preemption) and SGLang (a radix cache in the same pool as running "
               "requests, longest prefix match first, chunked prefill). Memory maps show what is running, what is "
               "cached and reusable, and what is free.")

    model = param.Selector(objects=["scenario", *MODELS], default="scenario",
                           doc="the model served: the scenario's, or any other (today's models mix sliding-window, "
                               "linear and latent layers: vLLM V1 keeps each kind in its own KV cache groups, SGLang "
                               "window layers in a pool of their own; the papers' engine serves only models whose "
                               "layers are all full or latent, and SGLang here none with linear layers)")
    workload = param.Selector(objects=["scenario", *SHAPES, *PREFIX_WORKLOADS, "closed-loop", "trace"],
                              default="multi-turn",
                              doc="requests: the scenario's lengths, a named length shape, few-shot tasks or multi-turn "
                                  "chat sessions sharing prefixes, closed-loop clients (`concurrency` of them, each "
                                  "sending its next request of prompt_len in, output_len out the moment its last one "
                                  "finishes, as vllm bench serve --max-concurrency: no arrival rate), or the uploaded "
                                  "trace")
    requests = param.Integer(300, bounds=(1, 5000), doc="requests to serve (a trace brings its own)")
    rate = param.Number(2.0, bounds=(0.01, 1000.0),
                        doc="Poisson arrival rate, requests per second; multi-turn: chat sessions start at rate / "
                            "turns per second, and each later turn waits for the answer before it (plus think_s), "
                            "so requests come more slowly (arrival_rate_per_s says how fast)")
    prefix_caching = param.Boolean(True, doc="vLLM V1's automatic prefix caching and SGLang's radix cache; off: a "
                                             "finished request's KV is freed")
    full_prompt_check = param.Boolean(True, doc="vLLM V1: admit a waiting request only if its whole uncached prompt fits "
                                                "in free blocks (scheduler_reserve_full_isl, vLLM's default since PR "
                                                "#37307); off: only its first chunk must fit, as older vLLM did, which "
                                                "preempts over and over when long prompts fill the memory")
    async_scheduling = param.Boolean(False, precedence=ADVANCED,
                                     doc="vLLM V1: schedule the next step before the last one's tokens are known "
                                         "(on by default in vLLM 0.33.0): a finished request keeps its blocks and batch slot "
                                         "one step longer; the paper GPU prices no CPU time, so nothing is hidden")
    host_tier_gb = param.Number(0.0, bounds=(0.0, MAX_HOST_TIER_GB),
                                doc="vLLM V1 and SGLang: a host-memory tier for the prefix cache, in GB (vLLM's "
                                    "OffloadingConnector with CPU blocks, SGLang's HiCache): what the GPU caches is also "
                                    "written to host memory, least recently used dropped first, and a prefix found there "
                                    "is loaded back over the host link before the request runs; 0: off. Needs "
                                    "prefix_caching")
    token_budget = param.Integer(0, bounds=(0, 65536),
                                 doc="vLLM V1: max_num_batched_tokens, the tokens one step computes for decodes and "
                                     "prefill chunks together; 0: vLLM's default for the GPU (2048 on A100, 8192 on "
                                     "H100 and H200)")
    chunk_size = param.Integer(0, bounds=(0, 65536), precedence=ADVANCED,
                               doc="SGLang: chunked_prefill_size, the prefill tokens of one batch; 0: SGLang's default "
                                   f"for the GPU (8192 on every GPU here); else at least {MIN_CHUNK}")
    policy = param.Selector(objects=list(POLICIES), default="lpm", precedence=ADVANCED,
                            doc="SGLang: waiting-queue order, longest prefix match first (lpm) or first come first served")
    mixed_chunk = param.Boolean(False, precedence=ADVANCED,
                                doc="SGLang: running requests decode in prefill batches too (--enable-mixed-chunk); off: "
                                    "a prefill batch runs alone")
    max_seqs = param.Integer(256, bounds=(1, 1024), precedence=ADVANCED,
                             doc="running requests at most (vLLM's max_num_seqs, SGLang's max_running_requests)")
    spec_tokens = param.Integer(0, bounds=(0, MAX_SPEC_TOKENS),
                                doc="vLLM V1: speculative decoding's draft tokens per step (EAGLE-style: each decoding "
                                    "request verifies 1 + spec_tokens tokens a step, all in the token budget, and holds "
                                    "KV slots for them and as many lookahead slots); 0: off. The other modes do not "
                                    "model it and are not run")
    acceptance = Text("0.8", max_length=120,
                      doc="spec_tokens: the chance each draft token is accepted, given the ones before it were: one "
                          "rate in [0, 1], or one per draft position separated by commas (0.9,0.7,0.5); drawn with "
                          "the seed")
    search = param.Boolean(False, doc="also search each mode's highest rate within the SLO (about ten runs per mode)")
    target = param.Number(0.9, bounds=(0.5, 0.999), precedence=ADVANCED,
                          doc="search: SLO attainment the rate must keep")
    output_len = param.Integer(128, bounds=(1, 8191), precedence=ADVANCED,
                               doc="fixed: output tokens; uniform: the largest output; few-shot, multi-turn: each answer")
    tasks = param.Integer(8, bounds=(1, 64), precedence=ADVANCED, doc="few-shot: tasks (each with its own examples)")
    examples_len = param.Integer(600, bounds=(0, 8192), precedence=ADVANCED, doc="few-shot: tokens of each task's examples")
    turns = param.Integer(6, bounds=(1, 32), precedence=ADVANCED, doc="multi-turn: turns per chat session")
    think_s = param.Number(5.0, bounds=(0.0, 600.0), precedence=ADVANCED,
                           doc="multi-turn: seconds between an answer and the user's next turn")
    system_len = param.Integer(200, bounds=(0, 8192), precedence=ADVANCED,
                               doc="few-shot, multi-turn: tokens of the system prompt every request shares")
    question_len = param.Integer(50, bounds=(1, 8192), precedence=ADVANCED,
                                 doc="few-shot, multi-turn: tokens of each new question")

    def check(self) -> None:
        super().check()
        if self.cost_model == "measured":
            for mode in self.priced_modes():
                self.scheduler_cost(mode)  # each engine's kernels, or a ParamError naming what is missing
        max_len = self.setup().spec.max_len
        longest = {"few-shot": self.system_len + self.examples_len + self.question_len + self.output_len,
                   "multi-turn": self.system_len + self.turns * (self.question_len + self.output_len)}
        if self.workload in longest and longest[self.workload] > max_len:
            sizes = ("system_len + examples_len + question_len + output_len" if self.workload == "few-shot"
                     else "system_len + turns x (question_len + output_len)")
            raise ParamError(f"{sizes}: {longest[self.workload]} tokens in the longest request is not allowed; "
                             f"scenario {self.scenario} allows at most {max_len}")
        if self.workload in longest and self.requests * longest[self.workload] > MAX_WORKLOAD_TOKENS:
            raise ParamError(f"requests: {self.requests} requests of up to {longest[self.workload]} tokens is not allowed; "
                             f"the workload may hold at most {MAX_WORKLOAD_TOKENS:,} tokens")
        if self.budget() < self.max_seqs:
            raise ParamError(f"token_budget: {self.budget()} is not allowed; vLLM needs at least max_seqs ({self.max_seqs})")
        if 0 < self.chunk_size < MIN_CHUNK:
            raise ParamError(f"chunk_size: {self.chunk_size} is not allowed; use 0 (SGLang's default for the GPU) or "
                             f"{MIN_CHUNK} to 65536: SGLang matches a chunked request in the radix tree again after "
                             f"every chunk, so a prompt of n chunks walks about n²/2 tree nodes (minutes here)")
        if self.host_tier_gb and not self.prefix_caching:
            raise ParamError(f"host_tier_gb: {self.host_tier_gb:g} is not allowed with prefix_caching false; the host "
                             "tier keeps prefix-cache blocks (use 0)")
        if self.host_tier_gb and kv_layout(self.setup().cost_model(), self.block_size).hybrid:
            raise ParamError(f"host_tier_gb: {self.host_tier_gb:g} is not allowed with model {self.model}; its layers "
                             "mix kinds (vLLM's KV cache groups), and the host tier is simulated for models whose "
                             "layers are all alike only (use 0)")
        if self.host_tier_gb and not self.host_blocks():
            block = self.block_size * self.setup().cost_model().kv_bytes_per_token
            raise ParamError(f"host_tier_gb: {self.host_tier_gb:g} holds no KV block of {block:,} bytes; use 0 (off) "
                             f"or at least {block / 1e9:.3g}")
        if self.spec_tokens:
            self.check_spec()
        if self.search and self.workload in ("trace", "closed-loop"):
            raise ParamError(f"search: true is not allowed with workload {self.workload}; a rate search needs Poisson "
                             "arrivals")

    def ignored(self) -> tuple[str, ...]:
        """The engine labs' unread parameters, and `acceptance` while no draft tokens are proposed."""
        return (*super().ignored(), *(() if self.spec_tokens else ("acceptance",)))

    def check_spec(self) -> None:
        """Speculative decoding: in a mode that models it, with rates it can read, on what it simulates."""
        if not any(MODES[m].speculative for m in self.priced_modes()):
            raise ParamError(f"spec_tokens: {self.spec_tokens} is not allowed with mode {self.priced_modes()[0]}; "
                             f"{SPEC_REFUSAL} (use 0)")
        try:
            parse_acceptance(self.acceptance, self.spec_tokens)
        except ValueError as e:
            raise ParamError(str(e)) from None
        if self.async_scheduling:
            raise ParamError(f"spec_tokens: {self.spec_tokens} is not allowed with async_scheduling true; speculative "
                             "decoding is simulated with synchronous scheduling only (use 0)")
        if kv_layout(self.setup().cost_model(), self.block_size).hybrid:
            raise ParamError(f"spec_tokens: {self.spec_tokens} is not allowed with model {self.model}; its layers mix "
                             "kinds (vLLM's KV cache groups), and speculative decoding is simulated for models whose "
                             "layers are all alike only (use 0)")

    def setup(self, memory: str = "paged") -> Setup:
        return super().setup(memory).with_(model="" if self.model == "scenario" else self.model)

    def refusal(self, mode: str) -> str | None:
        """Why a mode cannot serve the model (or these parameters), or None."""
        if self.spec_tokens and not MODES[mode].speculative:
            return f"{mode}: {SPEC_REFUSAL}"
        return MODES[mode].refusal(self.setup().cost_model().model)

    def scenario_info(self) -> dict[str, Any]:
        info = super().scenario_info()
        if self.model != "scenario":
            info["model"] = self.model
            info["about"] = f"{self.model} on {info['gpu']}, the requests of scenario {self.scenario}"
        return info

    def kv_groups(self) -> list[dict[str, Any]] | None:
        """vLLM V1's KV cache groups for a model whose layers are not all alike (None otherwise):
        each group's kind, layers and the blocks one request decoding at the maximum length holds in it."""
        cost = self.setup().cost_model()
        layout = kv_layout(cost, self.block_size)
        if not layout.hybrid:
            return None
        bs, max_len = layout.block_size, self.setup().spec.max_len
        whole = -(-max_len // bs)
        # a window group holds the blocks its last `kept` tokens span (vLLM's start-up line counts a
        # window group's blocks for a whole prefill chunk, more)
        return [{"kind": g.kind, "layers": g.layers, "window": g.kept + 1 if g.kind == "sliding" else 0,
                 "block_size": bs,
                 "blocks_per_max_request": min(whole, -(-(g.kept - 1) // bs) + 1) if g.windowed else whole}
                for g in layout.groups]

    def budget(self) -> int:
        return self.token_budget or default_token_budget(self.setup().cost_model().gpu)

    def chunk(self) -> int:
        return self.chunk_size or default_chunk_size(self.setup().cost_model().gpu)

    def workload_at(self, rate: float) -> list[Request]:
        if self.workload == "few-shot":
            return few_shot_traffic(self.requests, rate, self.seed, self.tasks, self.system_len, self.examples_len,
                                    self.question_len, self.output_len)
        if self.workload == "multi-turn":
            return multi_turn_traffic(self.requests, rate, self.seed, self.turns, self.system_len, self.question_len,
                                      self.output_len, self.think_s)
        return super().workload_at(rate)

    def mode_setup(self, mode: str) -> Setup:
        """The setup a mode runs with: a measured model prices SGLang's steps with SGLang's kernels."""
        return self.setup().with_(kernels=MODES[mode].engine)

    def explain(self, result: dict[str, Any]) -> dict[str, dict[str, Explanation]]:
        """The headline figures of each mode's run with their formulas and values (figure key ->
        mode -> explanation): throughput, the mean step, TTFT and TPOT p50, the prefix hit rate, and
        the KV capacity the run had."""
        out: dict[str, dict[str, Explanation]] = {}
        for m in result["modes"]:
            cost = self.scheduler_cost(m["mode"])
            explained = {**explain_run(m, cost_source(cost)), "kv_capacity_tokens": memory(cost)["kv_capacity_tokens"]}
            for key, e in explained.items():
                out.setdefault(key, {})[m["mode"]] = e
        return out

    def priced_modes(self) -> tuple[str, ...]:
        """The modes a run prices steps for."""
        return tuple(MODES)

    def scheduler_cost(self, mode: str) -> CostModel:
        return self.mode_setup(mode).cost_model()

    def scheduler(self, mode: str, give_up_after: int | None = None) -> ContinuousBatching:
        """The mode's scheduler, configured from the parameters."""
        setup = self.mode_setup(mode)
        return MODES[mode].make(Settings(
            setup.cost_model(), setup.spec.max_len, setup.slo, give_up_after, block_size=self.block_size,
            max_seqs=self.max_seqs, watermark=self.watermark, preemption=self.preemption, token_budget=self.budget(),
            full_prompt_check=self.full_prompt_check, async_scheduling=self.async_scheduling, chunk_size=self.chunk(),
            policy=self.policy, mixed_chunk=self.mixed_chunk, prefix_caching=self.prefix_caching,
            host_tokens=self.host_tokens(), spec_tokens=self.spec_tokens,
            acceptance=parse_acceptance(self.acceptance, self.spec_tokens) if self.spec_tokens else (), seed=self.seed))

    def host_tokens(self) -> int:
        """The host tier's size in tokens of KV (0: off; prefix caching off: no tier either)."""
        if not self.prefix_caching:
            return 0
        return int(self.host_tier_gb * 1e9 // self.setup().cost_model().kv_bytes_per_token)

    def host_blocks(self) -> int:
        """vLLM V1's host tier in whole KV blocks."""
        return self.host_tokens() // self.block_size

    def unread(self, mode: str) -> tuple[str, ...]:
        """The mode's `unread`: with a host tier a tiered mode reads the host link's prices too."""
        unread = MODES[mode].unread
        if not self.spec_tokens:  # no drafts: their rates are not read
            unread = (*unread, "acceptance")
        if MODES[mode].tiered and self.host_blocks():
            return tuple(n for n in unread if n not in SWAP_PRICES)
        return unread

    def run_mode(self, mode: str, requests: list[Request], progress: Progress, trace: bool = False,
                 give_up_after: int | None = None) -> Run:
        """One mode's run; with a host tier, a tiered mode's carries its figures as `host_tier`."""
        recorder = None
        if trace:
            horizon = max((r.arrival for r in requests), default=0.0) or 1.0
            curves = ("cached", "hit_rate") if MODES[mode].prefix_cache else ()
            recorder = TraceRecorder(horizon / 200, extra_curves=curves)
        scheduler = self.scheduler(mode, give_up_after)
        run = scheduler.run(requests, progress, trace=recorder)
        if isinstance(scheduler, SpecV1Scheduler):
            run.spec = scheduler.figures(run.sim_time)
        tier = getattr(scheduler, "tier", None)
        if tier is not None:
            times = run.trace["curves"]["t"] if trace else []
            run.host_tier = {"size_gb": self.host_tier_gb, "host_hit_tokens": scheduler.host_hit_tokens,
                             **tier.figures(times)}
        return run

    def figures(self, run: Run) -> dict[str, Any]:
        out = {**summarize(run, self.setup().slo), **prefix_figures(run), "max_batch": run.max_batch}
        if hasattr(run, "spec"):
            out["spec"] = run.spec
        tier = getattr(run, "host_tier", None)
        if tier is not None:  # hits by tier: what the prompt tokens of first admissions came from
            host = tier["host_hit_tokens"]
            out["host_tier"] = {**tier, "gpu_hit_tokens": out["hit_tokens"] - host,
                                "computed_tokens": out["prompt_tokens"] - out["hit_tokens"]}
        return out

    def max_concurrency(self) -> float:
        """What vLLM logs at start-up as "Maximum concurrency for max_len tokens per request": the
        GPU's KV blocks over the blocks one request of the model's maximum length takes. Requests
        are shorter and take blocks only as they grow, so more of them run at once (`max_batch`)."""
        setup = self.setup()
        groups = self.kv_groups()
        if groups:  # every group's blocks, of the one pool
            return self.kv_blocks() / sum(g["blocks_per_max_request"] for g in groups)
        per_request = -(-setup.spec.max_len // self.block_size)
        return setup.cost_model().kv_capacity_blocks(self.block_size) / per_request

    def kv_blocks(self) -> int:
        """The GPU's KV blocks (vLLM's, of every group's layers for a hybrid model)."""
        cost = self.setup().cost_model()
        layout = kv_layout(cost, self.block_size)
        return layout.blocks(cost) if layout.hybrid else cost.kv_capacity_blocks(self.block_size)

    def key(self, left_out: Iterable[str] = (), **extra: Any) -> str:
        """`Lab.key`, leaving out the parameters the workload does not read too."""
        return super().key((*left_out, *unread_by_workload(self.workload)), **extra)

    def requests_at(self, rate: float) -> list[Request]:
        """`workload_at`, remembered (shared: runs only read requests)."""
        unread = ("rate", *SERVING_ONLY, *(n for n in PaperGPULab.param if n != "name"))
        return _WORKLOADS.get(self.key(unread, rate=rate), lambda: self.workload_at(rate))

    def served_once(self, mode: str, progress: Progress) -> tuple[dict[str, Any], list[tuple[int, int]]]:
        """One mode's summarized, traced run, remembered by what it reads, and each frame's count
        of cells reused and held (for `opening_step`)."""
        def serve() -> tuple[dict[str, Any], list[tuple[int, int]]]:
            run = self.run_mode(mode, self.requests_at(self.rate), progress, trace=True)
            priced = {"step_cost": cost_source(self.scheduler_cost(mode))} if self.cost_model == "measured" else {}
            return {"mode": mode, **self.figures(run), **priced, "trace": run.trace}, frame_counts(run.trace["frames"])

        return _RUNS.get(self.key(("search", "target", *self.unread(mode)), mode=mode), serve)

    def estimate(self) -> Estimate:
        """Each mode's traced run and, with `search`, its search's runs (`MaxRateLab.estimate`)."""
        requests, cost = self.requests_at(self.rate), self.setup().cost_model()
        hybrid, tokens = kv_layout(cost, self.block_size).hybrid, self.distinct_tokens(requests)
        modes = {m: self.map_work(m, cost, hybrid, tokens) for m in MODES if not self.refusal(m)}
        runs = [self.served_work(requests, block, cells, stepwise=stepwise, max_seqs=self.max_seqs, frame_work=maps)
                for block, cells, maps, stepwise in modes.values()]
        if self.host_blocks():  # the tiered modes without the tier too
            runs += [self.served_work(requests, block, cells, stepwise=stepwise, max_seqs=self.max_seqs)
                     for m, (block, cells, _, stepwise) in modes.items() if MODES[m].tiered]
        if self.search:
            searches = SEARCH_DOUBLINGS + math.ceil(math.log2(math.log(2) / math.log1p(0.02)))
            base = self.requests_at(1.0)
            runs += [[(n * searches, unit) for n, unit in self.served_work(base, block, stepwise=stepwise)]
                     for block, _, _, stepwise in modes.values()]
        knobs = self.work_knobs()
        return work(*(part for run in runs for part in run), lower=(*knobs["lower"], *self.workload_lengths()),
                    higher=knobs["higher"] + (("token_budget",) if self.workload == "long-context" else ()))

    def map_work(self, mode: str, cost: CostModel, hybrid: bool, tokens: int
                 ) -> tuple[int, int, tuple[tuple[float, Unit], ...], bool]:
        """(block size, map cells, other map work a frame, stepwise) of a mode's run. A mode on token
        slots: a map cell per slot, its slots taken in runs of about 16 tokens of work each. A model
        whose layers are not all alike draws each group's or pool's map too, costed by what it reads
        (`group_map_work`), where the mode keeps its kinds of layer apart."""
        m = MODES[mode]
        block = self.block_size if m.cell == "block" else 16
        if hybrid and m.layers_apart:
            return block, 0, self.group_map_work(mode, tokens), m.stepwise
        cells = cost.kv_capacity_blocks(self.block_size) if m.cell == "block" else cost.kv_capacity_tokens
        return block, cells, (), m.stepwise

    def distinct_tokens(self, requests: list[Request]) -> int:
        """The most KV the requests can leave in memory: each request's tokens, a prefix workload's
        system prompt, examples and earlier turns once (later turns and questions reuse them)."""
        answers = len(requests) * (self.question_len + self.output_len)
        if self.workload == "multi-turn":
            return self.system_len + answers
        if self.workload == "few-shot":
            return self.system_len + self.tasks * self.examples_len + answers
        return sum(r.prompt + r.output for r in requests)

    def group_map_work(self, mode: str, tokens: int) -> tuple[tuple[float, Unit], ...]:
        """What one frame's maps cost a mode on a model whose layers are not all alike, `tokens` being
        the requests' `distinct_tokens` (bench/hybrid_maps.py measures it). vLLM V1: its one pool of pages
        scanned twice (the pool's map and the groups'), and the pages requests hold or the cache keeps
        drawn one by one, twice. SGLang: each pool drawn twice (in the map over all of them and in its
        own), slot by slot where it has at most DENSE_SLOTS (scanned), else only where slots are held.
        What is held grows as the requests come, up to the pool: a frame's is counted as their mean.
        Either draws about three maps' cells: the one over all its memory, and the groups' or pools'."""
        cost = self.setup().cost_model()
        cells = (3 * MAX_CELLS, MAP_CELLS)
        if MODES[mode].layers_apart == "groups":
            layout = kv_layout(cost, self.block_size)
            pages = layout.blocks(cost)
            held = mean_held(pages, -(-tokens // layout.block_size) * len(layout.groups))
            return cells, (2 * pages, MAP_SCANS), (2 * held, GROUP_PAGES)
        pools = sglang_pool_figures(cost) or {}
        sizes = [pools["full_tokens"], pools.get("swa_tokens", pools.get("states", 0))]
        whole = sizes[0] + (sizes[1] if "swa_tokens" in pools else 0)  # the map over all of them (a state pool: not in it)
        scanned = sum(n for n in (whole, *sizes) if n <= DENSE_SLOTS)
        return cells, (scanned, MAP_SCANS), (2 * sum(mean_held(n, tokens) for n in sizes), POOL_SLOTS)

    def workload_lengths(self) -> tuple[str, ...]:
        """The lengths of a prefix workload's requests (the parameters its work grows with)."""
        if self.workload == "few-shot":
            return ("examples_len", "question_len", "output_len")
        if self.workload == "multi-turn":
            return ("turns", "question_len", "output_len")
        return ()

    def serve(self, progress: Progress) -> dict[str, Any]:
        requests = self.requests_at(self.rate)
        steps = len(MODES) * (2 if self.search else 1)
        modes, counts, refused = [], [], {}
        for i, mode in enumerate(MODES):
            why = self.refusal(mode)
            if why:
                refused[mode] = why
                continue

            def part(fraction: float, message: str, i: int = i, mode: str = mode) -> None:
                progress((i + fraction) / steps, f"{mode}: {message}")
            row, frame_count = self.served_once(mode, part)
            modes.append(dict(row))
            counts.append(frame_count)
        if self.host_blocks():
            for row in modes:
                if MODES[row["mode"]].tiered:
                    self._without_tier(row, progress)
        if self.search:
            self._search(modes, progress)
        clock = timeline([m["trace"]["frames"] for m in modes])
        groups = self.kv_groups()
        hybrid = {"kv_groups": groups, "refused": refused} if groups or refused else {}
        for m in modes:  # each mode's own pools (SGLang's, for window or linear layers)
            hybrid.update(MODES[m["mode"]].pool_figures(self.setup().cost_model()))
        return {
            "modes": modes, "timeline": clock, "opening_step": opening_step_of(counts, clock),
            **({"step_cost": {m["mode"]: m["step_cost"] for m in modes}} if self.cost_model == "measured" else {}),
            "submitted": len(requests),
            "token_budget": self.budget(), "chunk_size": self.chunk(),
            "block_size": groups[0]["block_size"] if groups else self.block_size,
            "max_len": self.setup().spec.max_len, "kv_blocks": self.kv_blocks(),
            "max_concurrency": self.max_concurrency(),
            "shared_prefixes": self.workload in PREFIX_WORKLOADS, "paper": PAPER, "checked": CHECKED, **hybrid,
        }

    def _without_tier(self, row: dict[str, Any], progress: Progress) -> None:
        """A mode's TTFT on the same requests without the host tier (a remembered run of its own)."""
        off, mode = type(self)(**{**self.values(), "host_tier_gb": 0.0}), row["mode"]
        plain, _ = off.served_once(mode, lambda f, m: progress(1.0, f"{mode} without the host tier: {m}"))
        row["host_tier"] = {**row["host_tier"], "ttft_s_without": plain["ttft_s"],
                            "prefix_hit_rate_without": plain["prefix_hit_rate"]}

    def _search(self, modes: list[dict[str, Any]], progress: Progress) -> None:
        """Each mode's highest rate within the SLO, on the same requests arriving faster or slower
        (remembered by what it reads: not the rate, which it scales itself)."""
        for row in modes:
            mode = row["mode"]
            i = list(MODES).index(mode)
            key = self.key(("rate", "search", *self.unread(mode)), mode=mode)
            row["max_rate"], row["trials"] = _SEARCHES.get(key, lambda i=i, mode=mode: self._search_mode(i, mode, progress))

    def _search_mode(self, i: int, mode: str, progress: Progress) -> tuple[float, list[dict]]:
        base, count, slo = self.requests_at(1.0), [0], self.setup().slo

        def serve(rate: float, give_up_after: int) -> dict[str, Any]:
            requests = [r.arriving(r.arrival / rate) for r in base]
            run = self.run_mode(mode, requests, no_progress, give_up_after=give_up_after)
            # the figures `search` reads, as `summarize` computes them (its distributions are not needed)
            return {"stopped_early": run.stopped_early, "slo_attainment": attainment(run, slo),
                    "throughput_tok_s": throughput(run)}

        def tried(rate: float) -> None:
            count[0] += 1
            progress((len(MODES) + i + min(count[0], 12) / 13) / (2 * len(MODES)), f"{mode}: tried {rate:.3g} req/s")

        return search(serve, self.target, len(base), 0.02, tried)


def mean_held(size: int, units: int) -> float:
    """The mean a pool of `size` units holds over a run whose requests bring `units` in all, evenly
    over time, none freed (the cache keeps them) until the pool is full."""
    full = min(size, units)
    return full * (1 - full / (2 * units)) if units else 0.0


def frame_counts(frames: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Each frame's cells reused (cached-and-reusable, or shared by running requests) and held (not free)."""
    return [(f["owner"].count(CACHED) + f["owner"].count(SHARED), len(f["owner"]) - f["owner"].count(FREE)) for f in frames]


def opening_step(frame_lists: list[list[dict[str, Any]]], clock: dict[str, list]) -> int:
    """The step the lab opens on: the first where the memory maps show the most prefix reuse
    (cells cached-and-reusable or shared by running requests, all modes together), or, on a
    workload where nothing is reused, the one with the most memory held."""
    return opening_step_of([frame_counts(frames) for frames in frame_lists], clock)


def opening_step_of(counts: list[list[tuple[int, int]]], clock: dict[str, list]) -> int:
    """`opening_step` from each mode's `frame_counts`."""
    for k in (0, 1):  # reused, then held
        shown = [sum(c[at[i]][k] for c, at in zip(counts, clock["frames"])) for i in range(len(clock["t"]))]
        if any(shown):
            return shown.index(max(shown))
    return 0
