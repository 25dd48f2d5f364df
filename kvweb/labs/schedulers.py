"""Lab `schedulers`: the papers' engine beside vLLM V1-style and SGLang-style scheduling, on the
same requests, the same paper GPU and the same SLO.

`paper` is the engine of the lab `engine` (vLLM 2023: paged memory, whole prefills, preemption by
recompute or swap, no prefix caching). `vllm-v1` is serving/schedulers/v1_scheduler.py (token budget,
chunked prefill, automatic prefix caching, recompute-only preemption); `sglang` is
serving/schedulers/radix_scheduler.py on the pools its model needs (prefix/sglang_pools.py: a `RadixCache`, or
for window and linear layers SGLang's two pools). The lab runs every mode of the registry
(prefix/modes.py, which makes each scheduler from the parameters) that can serve the model; the
parameters, and each mode's scheduler, run and figures made from them, are `ModesLab`'s
(labs/modes_lab.py), which the fleet lab reads too. `host_tier_gb` gives vLLM V1 and SGLang a
host-memory tier (serving/memory/host_tier.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import param

from kvweb.budget import (
    GROUP_PAGES,
    MAP_CELLS,
    MAP_SCANS,
    PAGED_SETUP,
    POOL_SLOTS,
    SLOT_STEPS,
    V1_POOL_SETUP,
    Estimate,
    Unit,
    work,
)
from kvweb.gpu import CostModel
from kvweb.gpu.explain import Explanation, memory
from kvweb.gpu.measured_cost import cost_source, step_cost
from kvweb.lab import ParamError, Progress, no_progress
from kvweb.memo import Memo
from kvweb.labs.engine import batch_at_most, timeline, trace_held
from kvweb.labs.max_rate import SEARCH_DOUBLINGS
from kvweb.labs.modes_lab import PREFIX_WORKLOADS, ModesLab
from kvweb.labs.paper_gpu import PaperGPULab
from kvweb.prefix.modes import MODES, SPEC, V1_ONLY
from kvweb.prefix.sglang_pools import sglang_pool_figures
from kvweb.prefix.served_workload import few_shot_traffic, multi_turn_traffic
from kvweb.serving.loop.continuous_batching import CACHED, FREE, SHARED
from kvweb.serving.loop.engine_trace import MAX_CELLS
from kvweb.serving.memory.hybrid_kv import kv_layout
from kvweb.serving.memory.kv_capacity import kv_blocks, max_concurrency
from kvweb.serving.loop.max_rate import search
from kvweb.serving.loop.metrics import attainment, throughput
from kvweb.serving.loop.metrics import explain as explain_run
from kvweb.serving.schedulers.radix_scheduler import DENSE_SLOTS
from kvweb.serving.load.workload import Request, with_adapters
from kvweb.serving.schedulers.spec_decode import parse_acceptance

PAPER = (
    "SGLang paper (Zheng et al., NeurIPS 2024), Fig. 5: up to 6.4x the throughput of the systems it was "
    "compared with on workloads that share prefixes (few-shot, multi-turn chat, agents), with 50-99 % cache hit "
    "rates; vLLM paper (Kwon et al., SOSP 2023), section 6.4 (Fig. 16): sharing a prefix named by hand gives 1.67x "
    "(1-shot) and 3.58x (5-shot) the throughput of Orca (Oracle). Today's vLLM and SGLang both find shared prefixes "
    "by themselves; this simulator is not expected to match those figures, only to move the same way."
)

# What the vllm-v1 mode was checked against (tests/test_parity_vllm.py replays the recording and
# checks these figures).
VLLM_VERSION = "0.33.0"
CHECKED = (
    f"vllm-v1 checked against vLLM {VLLM_VERSION}'s own scheduler, step by step: 47 recorded workloads, "
    "each synchronous, with the old first-chunk admission check and with async scheduling, 48,886 steps "
    "and 666 preemptions; 24 more with speculative decoding, 3,019 steps and 68 preemptions; 7 with LoRA "
    "adapters, 7,432 steps and 35 preemptions, and 9 with images, 3,901 steps and 27 preemptions, both run the "
    "same three ways; every decision identical; sglang's radix cache and admission against SGLang 0.5.23's "
    "own RadixCache: 48 workloads, 5,405 operations and 56 admission rounds, 16 of them with LoRA adapters, identical"
)

# What the requests do not depend on: how they are served, the SLO and the paper GPU.
SERVING_ONLY = (
    "model",
    "block_size",
    "watermark",
    "preemption",
    "allocator",
    "token_budget",
    "chunk_size",
    "policy",
    "mixed_chunk",
    "prefix_caching",
    "max_seqs",
    "search",
    "target",
    "ttft_slo_s",
    "tpot_slo_ms",
    *V1_ONLY,
    "host_tier_gb",
    *SPEC,
)
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


class SchedulersLab(ModesLab):
    lab_name = "schedulers"
    title = "Today's schedulers: vLLM V1 and SGLang beside the papers' engine"
    summary = (
        "The same requests on the same paper GPU, three ways: the papers' engine (whole prefills, no prefix "
        "cache), vLLM V1 (one token budget per step shared by decodes and prefill chunks, automatic prefix "
        "caching of full blocks, recompute-only preemption) and SGLang (a radix cache in the same pool as running "
        "requests, longest prefix match first, chunked prefill). Memory maps show what is running, what is "
        "cached and reusable, and what is free."
    )

    spec_sweep = param.Boolean(
        False,
        doc="spec_tokens: also run each speculative mode at every draft length from 0 to spec_tokens, at "
        "the same acceptance (a list's first k rates), and name the one with the lowest TPOT p50: under load "
        "each more draft token costs every request a longer verify step and a drafter pass",
    )

    def workload_at(self, rate: float) -> list[Request]:
        if self.workload == "few-shot":
            return few_shot_traffic(
                self.requests,
                rate,
                self.seed,
                self.tasks,
                self.system_len,
                self.examples_len,
                self.question_len,
                self.output_len,
            )
        if self.workload == "multi-turn":
            return multi_turn_traffic(
                self.requests,
                rate,
                self.seed,
                self.turns,
                self.system_len,
                self.question_len,
                self.output_len,
                self.think_s,
            )
        return super().workload_at(rate)

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
            priced = step_cost(self.scheduler_cost(mode))
            return {"mode": mode, **self.figures(run), **priced, "trace": run.trace}, frame_counts(run.trace["frames"])

        return _RUNS.get(self.key(("search", "target", "spec_sweep", *self.unread(mode)), mode=mode), serve)

    def estimate(self) -> Estimate:
        """Each mode's traced run, with the pool it sets up (a map cell per block), and, with `search`,
        its search's runs (`MaxRateLab.estimate`); with images, each prompt holds their tokens (only
        vLLM V1 runs); with LoRA adapters, the steps their slots add (`slot_steps`)."""
        requests, cost = self.imaged(self.requests_at(self.rate)), self.setup().cost_model()
        hybrid, tokens = kv_layout(cost, self.block_size).hybrid, self.distinct_tokens(requests)
        modes = {m: self.map_work(m, cost, hybrid, tokens) for m in MODES if not self.refusal(m)}
        slots = self.slot_steps(requests, cost) if self.loras else 0.0
        pools = {
            m: [(cells, V1_POOL_SETUP if MODES[m].hashes_blocks else PAGED_SETUP)] if MODES[m].cell == "block" else []
            for m, (_, cells, _, _) in modes.items()
        }
        runs = [
            [
                *self.served_work(requests, block, cells, stepwise=stepwise, max_seqs=self.max_seqs, frame_work=maps),
                *pools[m],
                *([(slots, SLOT_STEPS)] if slots and MODES[m].adapters else []),
            ]
            for m, (block, cells, maps, stepwise) in modes.items()
        ]
        if self.host_blocks():  # the tiered modes without the tier too
            runs += [
                self.served_work(requests, block, cells, stepwise=stepwise, max_seqs=self.max_seqs)
                for m, (block, cells, _, stepwise) in modes.items()
                if MODES[m].tiered
            ]
        if self.spec_sweep:  # every shorter draft length's run too, each about as much work as the longest's
            runs += [run for m, run in zip(modes, list(runs)) if MODES[m].speculative] * self.spec_tokens
        if self.search:
            searches = SEARCH_DOUBLINGS + math.ceil(math.log2(math.log(2) / math.log1p(0.02)))
            base = self.imaged(self.requests_at(1.0))
            runs += [
                [(n * searches, unit) for n, unit in self.served_work(base, block, stepwise=stepwise)]
                for block, _, _, stepwise in modes.values()
            ]
        knobs = self.work_knobs()
        return work(
            *(part for run in runs for part in run),
            *(trace_held(requests) if self.workload == "trace" else ()),
            lower=(*knobs["lower"], *self.workload_lengths()),
            higher=knobs["higher"] + (("token_budget",) if self.workload == "long-context" else ()),
        )

    def slot_steps(self, requests: list[Request], cost: CostModel) -> float:
        """The decode steps LoRA adapters add to a run, about, beyond those of the batches memory allows:
        while requests queue, each adapter's run together (vLLM admits a waiting request whose adapter
        the batch has), in the steps of its outputs over that batch or of its longest output, whichever
        is more, `max_loras` adapters at a time. With 1000 adapters and max_loras 1 this is within 1.3x
        of the steps run (docs/today.md); where requests do not queue it adds little."""
        served = with_adapters(requests, self.loras, self.seed)
        batch = batch_at_most(served, cost.kv_capacity_tokens, self.max_seqs)
        outputs: dict[int, int] = {}
        longest: dict[int, int] = {}
        for r in served:
            outputs[r.adapter] = outputs.get(r.adapter, 0) + r.output
            longest[r.adapter] = max(longest.get(r.adapter, 0), r.output)
        steps = sum(max(n / batch, longest[a]) for a, n in outputs.items()) / self.max_loras
        return max(0.0, steps - sum(outputs.values()) / batch)

    def map_work(
        self, mode: str, cost: CostModel, hybrid: bool, tokens: int
    ) -> tuple[int, int, tuple[tuple[float, Unit], ...], bool]:
        """(block size, map cells, other map work a frame, stepwise) of a mode's run. A mode on token
        slots: a map cell per slot, its slots taken in runs of about 16 tokens of work each. A model
        whose layers are not all alike draws each group's or pool's map too, costed by what it reads
        (`group_map_work`), where the mode keeps its kinds of layer apart."""
        m = MODES[mode]
        block = self.block_size if m.cell == "block" else 16
        if hybrid and m.layers_apart:
            return block, 0, group_map_work(cost, self.block_size, m.layers_apart, tokens), m.stepwise
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
        sweep = {"spec_sweep": self._spec_sweep(modes, progress)} if self.spec_sweep else {}
        clock = timeline([m["trace"]["frames"] for m in modes])
        groups = self.kv_groups()
        hybrid = {"kv_groups": groups, "refused": refused} if groups or refused else {}
        for m in modes:  # each mode's own pools (SGLang's, for window or linear layers)
            hybrid.update(MODES[m["mode"]].pool_figures(self.setup().cost_model()))
        # the modes are priced alike (Setup.alike): every one has a step_cost line, or none does
        step_costs = {m["mode"]: m["step_cost"] for m in modes if "step_cost" in m}
        return {
            "modes": modes,
            "timeline": clock,
            "opening_step": opening_step_of(counts, clock),
            **({"step_cost": step_costs} if step_costs else {}),
            "submitted": len(requests),
            "token_budget": self.budget(),
            "chunk_size": self.chunk(),
            "block_size": groups[0]["block_size"] if groups else self.block_size,
            "max_len": self.setup().spec.max_len,
            "kv_blocks": kv_blocks(self.setup().cost_model(), self.block_size),
            "max_concurrency": max_concurrency(self.setup().cost_model(), self.block_size, self.setup().spec.max_len),
            "shared_prefixes": self.workload in PREFIX_WORKLOADS,
            "paper": PAPER,
            "checked": CHECKED,
            **sweep,
            **hybrid,
        }

    def check(self) -> None:
        super().check()
        if self.spec_sweep and not self.spec_tokens:
            raise ParamError(
                "spec_sweep: true is not allowed with spec_tokens 0; the sweep runs every draft length from 0 "
                "to spec_tokens (set spec_tokens above 0)"
            )

    def _spec_sweep(self, modes: list[dict[str, Any]], progress: Progress) -> dict[str, dict[str, Any]]:
        """Each speculative mode's figures at every draft length k from 0 to spec_tokens (each a
        remembered run of its own, k = spec_tokens the run above), and the k with the lowest TPOT p50."""
        rates = parse_acceptance(self.acceptance, self.spec_tokens)
        out = {}
        for row in (m for m in modes if MODES[m["mode"]].speculative):
            mode, points = row["mode"], []
            same = len(set(rates)) == 1  # one rate for every position: the same text, the same remembered run
            for k in range(self.spec_tokens + 1):
                acceptance = self.acceptance if same or k == 0 else ",".join(f"{r:g}" for r in rates[:k])
                lab = type(self)(**{**self.values(), "spec_tokens": k, "acceptance": acceptance, "spec_sweep": False})
                done = f"{mode} with {k} draft tokens"
                run, _ = lab.served_once(mode, lambda f, m, done=done: progress(1.0, f"{done}: {m}"))
                points.append(
                    {
                        "k": k,
                        "tpot_p50_s": run["tpot_s"]["p50"],
                        "ttft_p50_s": run["ttft_s"]["p50"],
                        "throughput_tok_s": run["throughput_tok_s"],
                        "tokens_per_step": run["spec"]["tokens_per_step"] if k else 1.0,
                    }
                )
            best = min(points, key=lambda p: p["tpot_p50_s"])["k"]
            out[mode] = {"acceptance": list(rates), "points": points, "best_k": best}
        return out

    def _without_tier(self, row: dict[str, Any], progress: Progress) -> None:
        """A mode's TTFT on the same requests without the host tier (a remembered run of its own)."""
        off, mode = type(self)(**{**self.values(), "host_tier_gb": 0.0}), row["mode"]
        plain, _ = off.served_once(mode, lambda f, m: progress(1.0, f"{mode} without the host tier: {m}"))
        row["host_tier"] = {
            **row["host_tier"],
            "ttft_s_without": plain["ttft_s"],
            "prefix_hit_rate_without": plain["prefix_hit_rate"],
        }

    def _search(self, modes: list[dict[str, Any]], progress: Progress) -> None:
        """Each mode's highest rate within the SLO, on the same requests arriving faster or slower
        (remembered by what it reads: not the rate, which it scales itself)."""
        for row in modes:
            mode = row["mode"]
            i = list(MODES).index(mode)
            key = self.key(("rate", "search", *self.unread(mode)), mode=mode)
            row["max_rate"], row["trials"] = _SEARCHES.get(
                key, lambda i=i, mode=mode: self._search_mode(i, mode, progress)
            )

    def _search_mode(self, i: int, mode: str, progress: Progress) -> tuple[float, list[dict]]:
        base, count, slo = self.requests_at(1.0), [0], self.setup().slo

        def serve(rate: float, give_up_after: int) -> dict[str, Any]:
            requests = [r.arriving(r.arrival / rate) for r in base]
            run = self.run_mode(mode, requests, no_progress, give_up_after=give_up_after)
            # the figures `search` reads, as `summarize` computes them (its distributions are not needed)
            return {
                "stopped_early": run.stopped_early,
                "slo_attainment": attainment(run, slo),
                "throughput_tok_s": throughput(run),
            }

        def tried(rate: float) -> None:
            count[0] += 1
            progress((len(MODES) + i + min(count[0], 12) / 13) / (2 * len(MODES)), f"{mode}: tried {rate:.3g} req/s")

        return search(serve, self.target, len(base), 0.02, tried)


def group_map_work(cost: CostModel, block_size: int, layers_apart: str, tokens: int) -> tuple[tuple[float, Unit], ...]:
    """What one frame's maps cost a mode that keeps kinds of layer apart (`Mode.layers_apart`) on a
    model whose layers are not all alike, `tokens` being the requests' `distinct_tokens`
    (bench/hybrid_maps.py measures it). vLLM V1: its one pool of pages
    scanned twice (the pool's map and the groups'), and the pages requests hold or the cache keeps
    drawn one by one, twice. SGLang: each pool drawn twice (in the map over all of them and in its
    own), slot by slot where it has at most DENSE_SLOTS (scanned), else only where slots are held.
    What is held grows as the requests come, up to the pool: a frame's is counted as their mean.
    Either draws about three maps' cells: the one over all its memory, and the groups' or pools'."""
    cells = (3 * MAX_CELLS, MAP_CELLS)
    if layers_apart == "groups":
        layout = kv_layout(cost, block_size)
        pages = layout.blocks(cost)
        held = mean_held(pages, -(-tokens // layout.block_size) * len(layout.groups))
        return cells, (2 * pages, MAP_SCANS), (2 * held, GROUP_PAGES)
    pools = sglang_pool_figures(cost) or {}
    sizes = [pools["full_tokens"], pools.get("swa_tokens", pools.get("states", 0))]
    whole = sizes[0] + (sizes[1] if "swa_tokens" in pools else 0)  # the map over all of them (a state pool: not in it)
    scanned = sum(n for n in (whole, *sizes) if n <= DENSE_SLOTS)
    return cells, (scanned, MAP_SCANS), (2 * sum(mean_held(n, tokens) for n in sizes), POOL_SLOTS)


def mean_held(size: int, units: int) -> float:
    """The mean a pool of `size` units holds over a run whose requests bring `units` in all, evenly
    over time, none freed (the cache keeps them) until the pool is full."""
    full = min(size, units)
    return full * (1 - full / (2 * units)) if units else 0.0


def frame_counts(frames: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Each frame's cells reused (cached-and-reusable, or shared by running requests) and held (not free)."""
    return [
        (f["owner"].count(CACHED) + f["owner"].count(SHARED), len(f["owner"]) - f["owner"].count(FREE)) for f in frames
    ]


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
