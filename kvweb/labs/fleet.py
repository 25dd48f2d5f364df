"""Lab `fleet`: N replicas of one scheduler behind each router, side by side on the same traffic.

The schedulers lab's parameters (workload with the trace upload, paper GPU, SLO, the schedulers'
knobs; not its rate search) with the fleet's own: the GPU (any, or the scenario's), the length
limit, the scheduler every replica runs, how many replicas, and which routers to compare: so
every candidate of the capacity planner can be opened here (`FleetLab.of_candidate`). Each router serves the same requests on a fresh fleet
(kvweb/fleet/fleet.py); the result holds each router's fleet figures, the regret of its
decisions and each replica's load, queue and hit rate over time, beside the single engine's hit
rate (what a perfect prefix router could keep). With `prefill_replicas`, the same GPUs split into a
prefill and a decode pool (kvweb/fleet/disaggregation.py) beside the co-located fleet, and the
splits around it (`split_points`), each said to pay or not.
"""

from __future__ import annotations

from typing import Any

import param

from kvweb.budget import ADVANCES, FLEET_REQUESTS, Estimate, in_turn
from kvweb.fleet.disaggregation import LINK_GB_S, LINK_LATENCY_US, Link, serve_split
from kvweb.fleet.encode_pool import EncodePool
from kvweb.fleet.fleet import MAX_REPLICAS, NO_THINK_STEP_S, serve
from kvweb.fleet.candidate import Candidate
from kvweb.fleet.routers import COMPARED, ROUTERS
from kvweb.gpu import GPUS
from kvweb.gpu.explain import Explanation
from kvweb.gpu.measured_cost import cost_source, step_cost
from kvweb.labs.engine import TraceReplay
from kvweb.labs.plan import PlanLab, choices, fleet_work, kv_groups
from kvweb.labs.modes_lab import LORA_SETTINGS
from kvweb.labs.schedulers import SchedulersLab
from kvweb.lab import ADVANCED, ParamError, Progress, Text
from kvweb.memo import Memo
from kvweb.prefix.modes import MODES
from kvweb.serving.loop.engine_setup import Setup
from kvweb.serving.loop.metrics import explain as explain_run
from kvweb.serving.load.workload import Request, with_adapters

DISAGGREGATION = (
    "prefill_replicas",
    "encode_replicas",
    "link_gb_s",
    "link_latency_us",
)  # only the disaggregated runs read these
_FLEETS: Memo[dict[str, Any]] = Memo(2 * len(ROUTERS))
_SINGLE: Memo[dict[str, Any]] = Memo(4)


class FleetLab(SchedulersLab):
    lab_name = "fleet"
    title = "A fleet of replicas: routers side by side"
    summary = (
        "N replicas of one scheduler on the same paper GPU, on one simulated clock, behind a router: round robin, "
        "least outstanding requests, SGLang's cache-aware router, llm-d's exact prefix scorer and Dynamo's cost "
        "router, each on the same requests. Per router: throughput, TTFT and TPOT percentiles, SLO attainment, "
        "the prefix hit rate beside the single engine's, each replica's load over time, and the regret of each "
        "decision (prefix tokens another replica had cached)."
    )
    # the schedulers lab's rate search and draft-length sweep: not a fleet's
    dropped = ("search", "target", "spec_sweep")

    gpu = param.Selector(
        objects=["scenario", *GPUS],
        default="scenario",
        doc="the GPU type of every replica (tp of them each): the scenario's, or any other",
    )

    mode = param.Selector(
        objects=list(MODES),
        default="sglang",
        doc="the scheduler every replica runs: paper (no prefix cache), vllm-v1 or sglang",
    )
    replicas = param.Integer(4, bounds=(1, MAX_REPLICAS), doc="replicas in the fleet, each tp GPUs of the fleet's type")
    prefill_replicas = param.Integer(
        0,
        bounds=(0, MAX_REPLICAS - 1),
        doc="disaggregation: of the replicas, this many prefill and the rest decode, beside "
        "the co-located fleet on as many GPUs and the splits around it (mode sglang "
        "or vllm-v1); 0: off",
    )
    encode_replicas = param.Integer(
        0,
        bounds=(0, MAX_REPLICAS - 1),
        doc="encode/prefill/decode disaggregation: of the replicas, this many run the vision encoder only "
        "and send the images' embeddings over the link to the replica that prefills them, beside the "
        "co-located fleet on as many GPUs; the rest serve as one pool, or split by prefill_replicas "
        "(mode vllm-v1, with images); 0: off",
    )
    link_gb_s = param.Number(
        LINK_GB_S,
        bounds=(0.1, 10_000.0),
        precedence=ADVANCED,
        doc="disaggregation: KV (and images' embeddings) link bandwidth per GPU, GB/s (50: one 400 Gb/s RDMA "
        "NIC per GPU)",
    )
    link_latency_us = param.Number(
        LINK_LATENCY_US,
        bounds=(0.0, 100_000.0),
        precedence=ADVANCED,
        doc="disaggregation: KV link latency per transfer, microseconds",
    )
    routers = Text(",".join(COMPARED), max_length=120, doc=f"routers to compare, comma-separated: {', '.join(ROUTERS)}")
    max_len = param.Integer(
        0,
        bounds=(0, 32768),
        precedence=ADVANCED,
        doc="the model's limit on prompt + output tokens (longer draws are clipped); 0: the "
        "scenario's (A: 2048, B: 8192)",
    )

    @classmethod
    def of_candidate(cls, plan: PlanLab, candidate: Candidate) -> FleetLab:
        """The fleet lab serving the planner's workload on one of its candidates: the same requests,
        GPU, model, precisions, scheduler, replicas and router, so its router's figures are the
        candidate's in the plan (`candidate.evaluate` builds each replica at these defaults)."""
        return cls(
            gpu=candidate.gpu,
            tp=candidate.tp,
            weight_precision=candidate.weight_precision,
            kv_precision=candidate.kv_precision,
            mode=candidate.scheduler,
            replicas=candidate.replicas,
            routers=candidate.router,
            model=plan.model,
            workload=plan.workload,
            requests=plan.requests,
            rate=plan.rate,
            seed=plan.seed,
            max_len=plan.max_len,
            prompt_len=plan.prompt_len,
            output_len=plan.output_len,
            ttft_slo_s=plan.ttft_slo_s,
            tpot_slo_ms=plan.tpot_slo_ms,
            cost_model=plan.cost_model,
            **{n: getattr(plan, n) for n in ("loras", *LORA_SETTINGS)},
            **{n: getattr(plan, n) for n in TraceReplay.param if n != "name"},
        )

    def setup(self, memory: str = "paged") -> Setup:
        return super().setup(memory).with_(gpu="" if self.gpu == "scenario" else self.gpu, max_len=self.max_len)

    def scenario_info(self) -> dict[str, Any]:
        info = super().scenario_info()
        if self.gpu != "scenario" or self.max_len:
            info["about"] = f"{info['model']} on {info['gpu']}, the requests of scenario {self.scenario}"
        return info

    def check(self) -> None:
        if self.max_len == 1:
            raise ParamError("max_len: 1 is not allowed; expected 0 (the scenario's) or 2 to 32768")
        super().check()
        self.router_list()
        if self.prefill_replicas and (not MODES[self.mode].holds_transfers or self.prefill_replicas >= self.replicas):
            raise ParamError(
                f"prefill_replicas: {self.prefill_replicas} is not allowed; expected 0 (off) or, with mode "
                f"sglang or vllm-v1, 1 to {self.replicas - 1} (replicas - 1: one at least decodes)"
            )
        most = self.replicas - self.prefill_replicas - 1  # one replica at least decodes
        if self.encode_replicas and (not self.images or not MODES[self.mode].multimodal or self.encode_replicas > most):
            raise ParamError(
                f"encode_replicas: {self.encode_replicas} is not allowed; expected 0 (off) or, with images > 0 "
                f"(mode vllm-v1), 1 to {most} (replicas - prefill_replicas - 1: one at least decodes)"
            )
        if self.prefill_replicas and self.loras:
            raise ParamError(
                f"prefill_replicas: {self.prefill_replicas} is not allowed with loras {self.loras}; the KV "
                "transfer of LoRA adapters' requests is not simulated (use 0 for one of them)"
            )
        if self.prefill_replicas and self.kv_groups():
            raise ParamError(
                f"prefill_replicas: {self.prefill_replicas} is not allowed with model {self.model}; its "
                "layers mix kinds (vLLM's KV cache groups), and the KV transfer is simulated for models "
                "whose layers are all alike only (use 0)"
            )

    def router_list(self) -> list[str]:
        return choices("routers", self.routers, list(ROUTERS))

    def estimate(self) -> Estimate:
        """One fleet simulation per router and per split fleet (`fleet_work`: a split's prefill and
        decode pools serve the requests once between them, its router probing the prefill pool; with
        encode replicas, their pool's requests, each routed once more), and the single engine's run."""
        requests, serving = self.served_requests(), self.replicas - self.encode_replicas
        splits = split_points(serving, self.prefill_replicas) if self.prefill_replicas else []
        rounds = 0.0  # multi-turn: the fleet advances every replica at least once per think time
        if self.workload == "multi-turn":
            horizon = max((r.arrival for r in requests), default=0.0)
            rounds = (horizon + self.turns * (self.think_s + 1.0)) / max(self.think_s, NO_THINK_STEP_S)
        cost = self.setup().cost_model()
        kv_tokens, groups = cost.kv_capacity_tokens, kv_groups(cost, self.mode, self.block_size)
        trace, max_loras = self.workload == "trace", self.max_loras if self.loras else 0
        host_tokens = self.host_tokens()  # 0 without a host tier
        runs = [
            fleet_work(
                requests,
                self.replicas,
                self.replicas,
                kv_tokens,
                self.max_seqs,
                self.mode,
                self.block_size,
                rounds,
                groups=groups,
                trace=trace,
                max_loras=max_loras,
                host_tokens=host_tokens,
            )
            for _ in self.router_list()
        ]
        # the split runs, or with encode replicas and no split the co-located fleet behind their pool
        apart = [
            fleet_work(
                requests,
                serving,
                prefill if splits else serving,
                kv_tokens,
                self.max_seqs,
                self.mode,
                self.block_size,
                rounds,
                transfers=bool(splits),
                groups=groups,
                trace=trace,
                max_loras=max_loras,
                host_tokens=host_tokens,
            )
            for prefill in (splits or ([0] if self.encode_replicas else []))
        ]
        if self.encode_replicas:  # each request with images queued, encoded and sent by the pool, routed again
            encoded = sum(1 for r in requests if r.images)
            apart = [[*run, (encoded, FLEET_REQUESTS), (encoded * serving, ADVANCES)] for run in apart]
        runs += apart
        knobs = self.work_knobs()
        single = fleet_work(
            requests,
            1,
            0,
            kv_tokens,
            self.max_seqs,
            self.mode,
            self.block_size,
            groups=groups,
            trace=trace,
            max_loras=max_loras,
            host_tokens=host_tokens,
        )
        return in_turn(
            *runs,
            single,
            lower=(
                *knobs["lower"],
                "replicas",
                "routers",
                *self.workload_lengths(),
                *(("host_tier_gb",) if host_tokens else ()),
            ),
            higher=(*knobs["higher"], *(("think_s",) if rounds else ())),
        )

    def fleet_key(self, **extra: Any) -> str:
        return self.key(("routers", *DISAGGREGATION, *self.unread(self.mode)), **extra)

    def serve(self, progress: Progress) -> dict[str, Any]:
        requests, slo = self.served_requests(), self.setup().slo
        names = self.router_list()
        rows = []
        for i, name in enumerate(names):

            def part(fraction: float, message: str, i: int = i, name: str = name) -> None:
                progress((i + fraction) / (len(names) + 1), f"{name}: {message}")

            def run(name: str = name, part: Any = part) -> dict[str, Any]:
                fleet = serve(requests, lambda: self.scheduler(self.mode), self.replicas, name, part)
                return fleet.figures(slo)

            rows.append(_FLEETS.get(self.fleet_key(router=name), run))
        single = _SINGLE.get(self.fleet_key(replicas=1), lambda: self.single(requests))
        split = self.split(requests, names[0], rows[0]) if self.prefill_replicas or self.encode_replicas else None
        progress(1.0, "done")
        priced = step_cost(self.scheduler_cost(self.mode))
        return {
            "mode": self.mode,
            **priced,
            "replicas": self.replicas,
            "submitted": len(requests),
            "single_engine": single,
            "routers": [{k: v for k, v in row.items() if k not in ("series", "replicas")} for row in rows],
            "per_replica": {row["router"]: row["replicas"] for row in rows},
            "series": {row["router"]: row["series"] for row in rows},
            "shared_prefixes": any(r.tokens is not None for r in requests),  # content: few-shot, multi-turn, Mooncake
            "disaggregation": split,
        }

    def served_requests(self) -> list[Request]:
        """The workload's requests with the lab's adapters and images."""
        return self.imaged(with_adapters(self.requests_at(self.rate), self.loras, self.seed))

    def split(self, requests: list[Request], router: str, together: dict[str, Any]) -> dict[str, Any]:
        """The disaggregated fleet (prefill pool routed by `router`; with encode replicas, their pool
        first: fleet/encode_pool.py) beside the co-located one behind the same router, on as many
        GPUs, and the splits around it: each `pays` when it keeps more requests within the SLO than
        the co-located fleet, or as many with a lower TPOT p99. With encode replicas and no prefill
        replicas, the one disaggregated run is the encode pool before a co-located fleet."""
        gpus, link = self.replicas * self.tp, Link(self.link_gb_s, self.link_latency_us)
        keep = ("ttft_s", "tpot_s", "slo_attainment", "throughput_tok_s", "finished", "rejected")
        co_located = {"fleet": "co-located", "gpus": gpus, **{k: together[k] for k in keep}}
        encode, serving, slo = self.encode_replicas, self.replicas - self.encode_replicas, self.setup().slo

        def pool() -> EncodePool | None:
            return EncodePool(self.scheduler_cost(self.mode), self.encoder(), encode, link) if encode else None

        def one(prefill: int) -> dict[str, Any]:
            def run() -> dict[str, Any]:
                make = lambda: self.scheduler(self.mode)  # noqa: E731
                if prefill:
                    return serve_split(requests, make, prefill, serving - prefill, router, link, pool()).figures(
                        slo, gpus
                    )
                fleet = serve(requests, make, serving, router, encode=pool()).figures(slo)
                return {"fleet": "encode + co-located", "gpus": gpus, **{k: fleet[k] for k in (*keep, "encode")}}

            at = (prefill, link, encode) if encode else (prefill, link)
            figures = _FLEETS.get(self.fleet_key(router=router, split=at), run)
            attained, co_attained = figures["slo_attainment"], co_located["slo_attainment"]
            tail, co_tail = figures["tpot_s"]["p99"], co_located["tpot_s"]["p99"]
            pays = attained > co_attained or (
                attained == co_attained and None not in (tail, co_tail) and tail < co_tail
            )
            pool_size = {"encode_replicas": encode} if encode else {}
            return {
                **pool_size,
                "prefill_replicas": prefill,
                "decode_replicas": serving - prefill,
                **figures,
                "pays": pays,
            }

        points = split_points(serving, self.prefill_replicas) if self.prefill_replicas else [0]
        splits = [one(p) for p in points]
        chosen = next(s for s in splits if s["prefill_replicas"] == self.prefill_replicas)
        return {
            **({"encode_replicas": encode} if encode else {}),
            "prefill_replicas": self.prefill_replicas,
            "decode_replicas": chosen["decode_replicas"],
            "router": router,
            "link_gb_s": link.gb_s,
            "link_latency_us": link.latency_us,
            "disaggregated": chosen,
            "co_located": co_located,
            "splits": splits,
        }

    def priced_modes(self) -> tuple[str, ...]:
        return (self.mode,)

    def explain(self, result: dict[str, Any]) -> dict[str, dict[str, Explanation]]:
        """Each router's headline figures with their formulas and values (figure key -> router ->
        explanation): throughput, TTFT and TPOT p50, the prefix hit rate (`metrics.explain`)."""
        source = cost_source(self.scheduler_cost(self.mode))
        out: dict[str, dict[str, Explanation]] = {}
        for row in result.get("routers", []):
            for key, e in explain_run(row, source).items():
                if key != "step_s":  # steps of several replicas: their sum says nothing of one step
                    out.setdefault(key, {})[row["router"]] = e
        return out

    def single(self, requests: list[Request]) -> dict[str, Any]:
        """The single engine's figures a fleet is read against: its prefix hit rate is what a
        router that never splits a prefix could keep (memory allowing)."""
        figures = self.figures(self.scheduler(self.mode).run(requests))
        return {k: figures[k] for k in ("prefix_hit_rate", "throughput_tok_s", "slo_attainment")}


def split_points(replicas: int, prefill: int) -> list[int]:
    """The prefill replicas of the splits shown: the one chosen, its neighbours and both ends."""
    return sorted({p for p in (1, prefill - 1, prefill, prefill + 1, replicas - 1) if 1 <= p < replicas})
