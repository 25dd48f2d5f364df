"""The parameters of the registry's schedulers (prefix/modes.py) and of the requests they serve, and
each mode's scheduler, run and figures made from them: what the schedulers lab runs side by side
(`SchedulersLab`, labs/schedulers.py) and the fleet lab on N replicas (labs/fleet.py).
"""

from __future__ import annotations

from typing import Any

import param

from kvweb.gpu import MODELS, CostModel
from kvweb.gpu.weights import precision_refusal
from kvweb.lab import ADVANCED, ParamError, Progress, Text
from kvweb.labs.engine import ServingLab, cost_model_param
from kvweb.prefix.modes import MODES, SWAP_PRICES, Settings
from kvweb.serving.loop.continuous_batching import ContinuousBatching, prefix_figures
from kvweb.serving.loop.engine_setup import Setup
from kvweb.serving.loop.engine_trace import TraceRecorder
from kvweb.serving.memory.hybrid_kv import kv_layout
from kvweb.serving.memory.kv_capacity import kv_cache_groups
from kvweb.serving.memory.encoder_cache import EncoderConfig
from kvweb.serving.memory.lora import LORA_RANKS, TARGETS, LoraConfig, lora_refusal
from kvweb.serving.loop.metrics import summarize
from kvweb.serving.schedulers.radix_scheduler import POLICIES, default_chunk_size
from kvweb.serving.loop.sequence import Run
from kvweb.serving.schedulers.drafters import METHODS, drafter_blocks, drafter_refusal, make_drafter
from kvweb.serving.schedulers.spec_decode import MAX_SPEC_TOKENS, Verifying, parse_acceptance
from kvweb.serving.schedulers.v1_scheduler import default_token_budget
from kvweb.serving.load.workload import SHAPES, Request, with_adapters, with_images

PREFIX_WORKLOADS = ("few-shot", "multi-turn")
MAX_WORKLOAD_TOKENS = 2_000_000  # tokens of all few-shot or multi-turn requests together
MAX_HOST_TIER_GB = 4096.0  # host memory of a large 8-GPU server
LORA_SETTINGS = ("max_loras", "lora_rank", "lora_targets")  # read only while requests use adapters
SPEC_REFUSAL = "speculative decoding (spec_tokens > 0) is simulated in vllm-v1 and sglang only"
LORA_REFUSAL = "LoRA adapters (loras > 0) are simulated in vllm-v1 and sglang only"
MAX_LORAS = 1000  # distinct adapters of a workload
IMAGE_SETTINGS = ("image_tokens", "image_pool", "encoder_budget", "encoder_cache")  # read only with images
IMAGE_REFUSAL = "images (images > 0) are simulated in vllm-v1 only"

# Smaller SGLang chunks make a run quadratic in a prompt's chunks (`check`): in CPython, scenario
# A's long-context traffic takes 1.0 s at the default, 1.2 s in chunks of 256, 2.5 s of 64, 12 s of
# 16, and the app would hang for minutes. vLLM's budget has a like floor (max_seqs, 256 by default).
MIN_CHUNK = 256


def unset(spec_tokens: int, loras: int, images: int) -> tuple[str, ...]:
    """The settings of what is off: the drafts' acceptance and drafter without drafts, the adapters'
    slots without adapters, the images' sizes and the encoder's without images."""
    return (
        *(() if spec_tokens else ("acceptance", "drafter")),
        *(() if loras else LORA_SETTINGS),
        *(() if images else IMAGE_SETTINGS),
    )


class ModesLab(ServingLab):
    """A lab serving requests on the registry's modes: the schedulers' knobs, the prefix workloads'
    lengths, each mode's refusals and unread parameters, its scheduler made from the parameters, and
    a run of it with its figures. No lab of its own (`SchedulersLab` and `FleetLab` are).

    methods: 24, because each of vLLM V1's optional mechanisms (drafts, LoRA adapters, images) has its
    parameters checked against the others' and its settings made here, where the one schema of the
    schedulers' parameters lives, two or three methods each."""

    cost_model = cost_model_param("auto")
    model = param.Selector(
        objects=["scenario", *MODELS],
        default="scenario",
        doc="the model served: the scenario's, or any other (today's models mix sliding-window, "
        "linear and latent layers: vLLM V1 keeps each kind in its own KV cache groups, SGLang "
        "window layers in a pool of their own; the papers' engine serves only models whose "
        "layers are all full or latent, and SGLang here none with linear layers)",
    )
    workload = param.Selector(
        objects=["scenario", *SHAPES, *PREFIX_WORKLOADS, "closed-loop", "trace"],
        default="multi-turn",
        doc="requests: the scenario's lengths, a named length shape, few-shot tasks or multi-turn "
        "chat sessions sharing prefixes, closed-loop clients (`concurrency` of them, each "
        "sending its next request of prompt_len in, output_len out the moment its last one "
        "finishes, as vllm bench serve --max-concurrency: no arrival rate), or the uploaded "
        "trace",
    )
    requests = param.Integer(300, bounds=(1, 5000), doc="requests to serve (a trace brings its own)")
    rate = param.Number(
        2.0,
        bounds=(0.01, 1000.0),
        doc="Poisson arrival rate, requests per second; multi-turn: chat sessions start at rate / "
        "turns per second, and each later turn waits for the answer before it (plus think_s), "
        "so requests come more slowly (arrival_rate_per_s says how fast)",
    )
    prefix_caching = param.Boolean(
        True, doc="vLLM V1's automatic prefix caching and SGLang's radix cache; off: a finished request's KV is freed"
    )
    full_prompt_check = param.Boolean(
        True,
        doc="vLLM V1: admit a waiting request only if its whole uncached prompt fits "
        "in free blocks (scheduler_reserve_full_isl, vLLM's default since PR "
        "#37307); off: only its first chunk must fit, as older vLLM did, which "
        "preempts over and over when long prompts fill the memory",
    )
    async_scheduling = param.Boolean(
        False,
        precedence=ADVANCED,
        doc="vLLM V1: schedule the next step before the last one's tokens are known "
        "(on by default in vLLM 0.33.0): a finished request keeps its blocks and batch slot "
        "one step longer; the paper GPU prices no CPU time, so nothing is hidden",
    )
    host_tier_gb = param.Number(
        0.0,
        bounds=(0.0, MAX_HOST_TIER_GB),
        doc="vLLM V1 and SGLang: a host-memory tier for the prefix cache, in GB (vLLM's "
        "OffloadingConnector with CPU blocks, SGLang's HiCache): what the GPU caches is also "
        "written to host memory, least recently used dropped first, and a prefix found there "
        "is loaded back over the host link before the request runs; 0: off. Needs "
        "prefix_caching",
    )
    token_budget = param.Integer(
        0,
        bounds=(0, 65536),
        doc="vLLM V1: max_num_batched_tokens, the tokens one step computes for decodes and "
        "prefill chunks together; 0: vLLM's default for the GPU (2048 on A100, 8192 on "
        "H100 and H200)",
    )
    chunk_size = param.Integer(
        0,
        bounds=(0, 65536),
        precedence=ADVANCED,
        doc="SGLang: chunked_prefill_size, the prefill tokens of one batch; 0: SGLang's default "
        f"for the GPU (8192 on every GPU here); else at least {MIN_CHUNK}",
    )
    policy = param.Selector(
        objects=list(POLICIES),
        default="lpm",
        precedence=ADVANCED,
        doc="SGLang: waiting-queue order, longest prefix match first (lpm) or first come first served",
    )
    mixed_chunk = param.Boolean(
        False,
        precedence=ADVANCED,
        doc="SGLang: running requests decode in prefill batches too (--enable-mixed-chunk); off: "
        "a prefill batch runs alone",
    )
    max_seqs = param.Integer(
        256,
        bounds=(1, 1024),
        precedence=ADVANCED,
        doc="running requests at most (vLLM's max_num_seqs, SGLang's max_running_requests)",
    )
    spec_tokens = param.Integer(
        0,
        bounds=(0, MAX_SPEC_TOKENS),
        doc="vLLM V1 and SGLang: speculative decoding's draft tokens per step (EAGLE-style: each decoding "
        "request verifies 1 + spec_tokens tokens a step). vLLM counts them in the token budget and holds "
        "KV slots for them and as many lookahead slots, kept when drafts are rejected; SGLang (EAGLE, topk "
        "1, mixed chunks off) takes spec_tokens slots for the drafts and 1 + spec_tokens to verify, frees "
        "the rejected ones in the same step, and decodes only while 2 x spec_tokens + 1 slots a request "
        "are free (else it retracts from the back of the batch); 0: off. The papers' engine does not "
        "model it and is not run",
    )
    acceptance = Text(
        "0.8",
        max_length=120,
        doc="spec_tokens: the chance each draft token is accepted, given the ones before it were: one "
        "rate in [0, 1], or one per draft position separated by commas (0.9,0.7,0.5); drawn with "
        "the seed",
    )
    drafter = param.Selector(
        objects=[*METHODS, *MODELS],
        default="eagle",
        doc="spec_tokens: what proposes the drafts (vLLM's speculative method): eagle, a head of one "
        "layer of the target's shape sharing its embedding and LM head (any model); mtp, the model's own "
        "multi-token-prediction module (deepseek-v3 only); or a model's name, a separate smaller draft "
        "model of the same vocabulary (draft_model), loaded whole. Each keeps its layers' KV in every "
        "block beside the target's: fewer blocks",
    )
    loras = param.Integer(
        0,
        bounds=(0, MAX_LORAS),
        doc="vLLM V1 and SGLang: LoRA adapters the requests use (each request one of them, adapter i with "
        "weight 1 / i: a few adapters get most requests; a chat session keeps its adapter); the GPU "
        "keeps max_loras adapter slots beside the KV cache, and a prefix cached under one adapter is "
        "no hit for another; 0: off. The papers' engine does not model it and is not run",
    )
    max_loras = param.Integer(
        1,
        bounds=(1, 64),
        doc="loras: vLLM's max_loras and SGLang's max_loras_per_batch, the distinct adapters one batch may "
        "use and the GPU slots they are loaded into (vLLM's default 1, SGLang's 8): a waiting request "
        "whose adapter would make one more waits in its place while the requests behind it are tried, "
        "and one not in a slot is copied over the host link before its step. SGLang counts the base "
        "model as an adapter and loads a batch's adapters per forward batch, so a prefill batch may "
        "evict an adapter the running requests use",
    )
    lora_rank = param.Selector(
        objects=list(LORA_RANKS),
        default=16,
        doc="loras: vLLM's and SGLang's max_lora_rank, the rank every slot is allocated at",
    )
    lora_targets = param.Selector(
        objects=list(TARGETS),
        default="qkvo",
        precedence=ADVANCED,
        doc="loras: the modules each adapter adds its A and B to: the attention projections q, k, v, o, "
        "or every linear layer (with the MLP's gate, up and down)",
    )
    images = param.Integer(
        0,
        bounds=(0, 8),
        doc="vLLM V1: images in each request's prompt (after the system prompt in few-shot and "
        "multi-turn, else first), each image_tokens placeholder tokens whose embeddings a vision "
        "encoder computes, drawn from image_pool distinct images (so some repeat; a chat session "
        "keeps its images); the encoder cache keeps embeddings by image, so a request with an image "
        "already encoded skips the encoder; 0: off. The other modes do not model it and are not run",
    )
    image_tokens = param.Integer(
        576,
        bounds=(1, 16384),
        doc="images: placeholder tokens (and embeddings) of each image (576: LLaVA-1.5's 336 x 336 image)",
    )
    image_pool = param.Integer(
        20, bounds=(1, 100_000), doc="images: distinct images the requests' images are drawn from (uniformly)"
    )
    encoder_budget = param.Integer(
        0,
        bounds=(0, 65536),
        precedence=ADVANCED,
        doc="images: the embeddings the encoder may compute in one step (a chunk needing an image beyond it "
        "stops before the image); 0: vLLM 0.33.0's max_num_encoder_input_tokens, the token budget, which it "
        "does not let you change (later vLLM: max_num_batched_encoder_embeds); raised to image_tokens, as "
        "vLLM does",
    )
    encoder_cache = param.Integer(
        0,
        bounds=(0, 1_000_000),
        precedence=ADVANCED,
        doc="images: the embeddings the encoder cache holds (images no running request needs are evicted "
        "oldest first when room is needed); 0: vLLM 0.33.0's encoder_cache_size, the token budget, which it "
        "does not let you change (later vLLM: encoder_cache_size, default the encoder budget); raised to "
        "image_tokens, as vLLM does",
    )
    search = param.Boolean(False, doc="also search each mode's highest rate within the SLO (about ten runs per mode)")
    target = param.Number(
        0.9, bounds=(0.5, 0.999), precedence=ADVANCED, doc="search: SLO attainment the rate must keep"
    )
    output_len = param.Integer(
        128,
        bounds=(1, 8191),
        precedence=ADVANCED,
        doc="fixed: output tokens; uniform: the largest output; few-shot, multi-turn: each answer",
    )
    tasks = param.Integer(8, bounds=(1, 64), precedence=ADVANCED, doc="few-shot: tasks (each with its own examples)")
    examples_len = param.Integer(
        600, bounds=(0, 8192), precedence=ADVANCED, doc="few-shot: tokens of each task's examples"
    )
    turns = param.Integer(6, bounds=(1, 32), precedence=ADVANCED, doc="multi-turn: turns per chat session")
    think_s = param.Number(
        5.0,
        bounds=(0.0, 600.0),
        precedence=ADVANCED,
        doc="multi-turn: seconds between an answer and the user's next turn",
    )
    system_len = param.Integer(
        200,
        bounds=(0, 8192),
        precedence=ADVANCED,
        doc="few-shot, multi-turn: tokens of the system prompt every request shares",
    )
    question_len = param.Integer(
        50, bounds=(1, 8192), precedence=ADVANCED, doc="few-shot, multi-turn: tokens of each new question"
    )

    def check(self) -> None:
        super().check()
        if self.cost_model != "roofline":
            for mode in self.priced_modes():
                self.scheduler_cost(mode)  # each engine's kernels, or a ParamError naming what is missing
        max_len = self.setup().spec.max_len
        pictures = self.images * self.image_tokens
        longest = {
            "few-shot": self.system_len + self.examples_len + self.question_len + self.output_len + pictures,
            "multi-turn": self.system_len + self.turns * (self.question_len + self.output_len) + pictures,
        }
        if self.workload in longest and longest[self.workload] > max_len:
            sizes = (
                "system_len + examples_len + question_len + output_len"
                if self.workload == "few-shot"
                else "system_len + turns x (question_len + output_len)"
            ) + (" + images x image_tokens" if pictures else "")
            raise ParamError(
                f"{sizes}: {longest[self.workload]} tokens in the longest request is not allowed; "
                f"scenario {self.scenario} allows at most {max_len}"
            )
        if self.workload in longest and self.requests * longest[self.workload] > MAX_WORKLOAD_TOKENS:
            raise ParamError(
                f"requests: {self.requests} requests of up to {longest[self.workload]} tokens is not allowed; "
                f"the workload may hold at most {MAX_WORKLOAD_TOKENS:,} tokens"
            )
        if self.budget() < self.max_seqs:
            raise ParamError(
                f"token_budget: {self.budget()} is not allowed; vLLM needs at least max_seqs ({self.max_seqs})"
            )
        if 0 < self.chunk_size < MIN_CHUNK:
            raise ParamError(
                f"chunk_size: {self.chunk_size} is not allowed; use 0 (SGLang's default for the GPU) or "
                f"{MIN_CHUNK} to 65536: SGLang matches a chunked request in the radix tree again after "
                f"every chunk, so a prompt of n chunks walks about n²/2 tree nodes (minutes here)"
            )
        if self.host_tier_gb and not self.prefix_caching:
            raise ParamError(
                f"host_tier_gb: {self.host_tier_gb:g} is not allowed with prefix_caching false; the host "
                "tier keeps prefix-cache blocks (use 0)"
            )
        if self.host_tier_gb and kv_layout(self.setup().cost_model(), self.block_size).hybrid:
            raise ParamError(
                f"host_tier_gb: {self.host_tier_gb:g} is not allowed with model {self.model}; its layers "
                "mix kinds (vLLM's KV cache groups), and the host tier is simulated for models whose "
                "layers are all alike only (use 0)"
            )
        if self.host_tier_gb and not self.host_blocks():
            block = self.block_size * self.setup().cost_model().kv_bytes_per_token
            raise ParamError(
                f"host_tier_gb: {self.host_tier_gb:g} holds no KV block of {block:,} bytes; use 0 (off) "
                f"or at least {block / 1e9:.3g}"
            )
        if self.spec_tokens:
            self.check_spec()
        if self.loras:
            self.check_lora()
        if self.images:
            self.check_images()
        if self.search and self.workload in ("trace", "closed-loop"):
            raise ParamError(
                f"search: true is not allowed with workload {self.workload}; a rate search needs Poisson arrivals"
            )

    def ignored(self) -> tuple[str, ...]:
        """The engine labs' unread parameters, `acceptance` while no draft tokens are proposed and the
        adapters' settings while requests use none."""
        return (*super().ignored(), *unset(self.spec_tokens, self.loras, self.images))

    def check_lora(self) -> None:
        """LoRA adapters: in a mode that models them, alone, on a model they are simulated on (the
        fleet lab: every replica's mode)."""
        if not any(MODES[m].adapters for m in self.priced_modes()):
            raise ParamError(
                f"loras: {self.loras} is not allowed with mode {self.priced_modes()[0]}; {LORA_REFUSAL} (use 0)"
            )
        if self.spec_tokens:
            raise ParamError(
                f"loras: {self.loras} is not allowed with spec_tokens {self.spec_tokens}; adapters and "
                "speculative decoding together are not simulated (use 0 for one of them)"
            )
        cost = self.setup().cost_model()
        why = lora_refusal(cost.model, self.lora_targets)
        if why:
            raise ParamError(f"loras: {self.loras} is not allowed with model {cost.model.name}; {why}")
        if cost.kv_capacity_blocks(self.block_size) > 1 >= self.lora().kv_blocks(cost, self.block_size):
            raise ParamError(
                f"max_loras: {self.max_loras} is not allowed; {self.max_loras} slots of rank {self.lora_rank} "
                "leave no KV cache (use fewer or a lower lora_rank)"
            )

    def lora(self) -> LoraConfig | None:
        """vLLM's and SGLang's LoRA settings (None: requests use no adapter)."""
        return LoraConfig(self.max_loras, self.lora_rank, self.lora_targets) if self.loras else None

    def check_images(self) -> None:
        """Images: in a mode that models them (the fleet lab: every replica's), without drafts, on a
        model whose layers are all alike, and within the model's length."""
        if not any(MODES[m].multimodal for m in self.priced_modes()):
            raise ParamError(
                f"images: {self.images} is not allowed with mode {self.priced_modes()[0]}; {IMAGE_REFUSAL} (use 0)"
            )
        if self.spec_tokens:
            raise ParamError(
                f"images: {self.images} is not allowed with spec_tokens {self.spec_tokens}; images and "
                "speculative decoding together are not simulated (use 0 for one of them)"
            )
        if kv_layout(self.setup().cost_model(), self.block_size).hybrid:
            raise ParamError(
                f"images: {self.images} is not allowed with model {self.model}; its layers mix kinds (vLLM's "
                "KV cache groups), and images are simulated for models whose layers are all alike only (use 0)"
            )
        max_len = self.setup().spec.max_len
        if self.images * self.image_tokens >= max_len:
            raise ParamError(
                f"image_tokens: {self.images} images of {self.image_tokens} tokens is not allowed; scenario "
                f"{self.scenario} allows at most {max_len} tokens a request, text and output included"
            )

    def encoder(self) -> EncoderConfig | None:
        """vLLM's encoder budget and cache size, each raised to an image's embeddings (None: no images)."""
        if not self.images:
            return None
        budget = max(self.encoder_budget or self.budget(), self.image_tokens)
        return EncoderConfig(budget, max(self.encoder_cache or budget, self.image_tokens))

    def imaged(self, requests: list[Request]) -> list[Request]:
        """The requests with the lab's images, as a mode that models them serves them."""
        return with_images(requests, self.images, self.image_tokens, self.image_pool, self.seed, self.image_at())

    def image_at(self) -> int:
        """Where the images go in a prompt: after the system prompt every request shares, else first."""
        return self.system_len if self.workload in PREFIX_WORKLOADS else 0

    def check_spec(self) -> None:
        """Speculative decoding: in a mode that models it, with rates it can read, on what it simulates."""
        if not any(MODES[m].speculative for m in self.priced_modes()):
            raise ParamError(
                f"spec_tokens: {self.spec_tokens} is not allowed with mode {self.priced_modes()[0]}; "
                f"{SPEC_REFUSAL} (use 0)"
            )
        try:
            parse_acceptance(self.acceptance, self.spec_tokens)
        except ValueError as e:
            raise ParamError(str(e)) from None
        if self.async_scheduling:
            raise ParamError(
                f"spec_tokens: {self.spec_tokens} is not allowed with async_scheduling true; speculative "
                "decoding is simulated with synchronous scheduling only (use 0)"
            )
        if kv_layout(self.setup().cost_model(), self.block_size).hybrid:
            raise ParamError(
                f"spec_tokens: {self.spec_tokens} is not allowed with model {self.model}; its layers mix "
                "kinds (vLLM's KV cache groups), and speculative decoding is simulated for models whose "
                "layers are all alike only (use 0)"
            )
        self.check_drafter()

    def check_drafter(self) -> None:
        """The drafter: one that can draft for the model (drafters.py), split over its GPUs as the
        model is, leaving KV blocks beside it."""
        cost = self.setup().cost_model()
        why = drafter_refusal(self.drafter, cost.model)
        if why:
            raise ParamError(f"drafter: {self.drafter} is not allowed with model {cost.model.name}; {why}")
        drafter = make_drafter(self.drafter, cost.model)
        why = precision_refusal(drafter.model, cost.weight_precision)
        if why:  # (MXFP4 for a draft model without experts)
            raise ParamError(why)
        if cost.splits and not cost.attention_dp and drafter.model.heads % cost.tp:  # (Capacity.splits, not built)
            raise ParamError(
                f"drafter: {self.drafter} is not allowed on {cost.where}; its {drafter.model.heads} query heads do "
                f"not split over {cost.tp} GPUs (vLLM runs a draft model at the target's tensor parallelism; use "
                "eagle or a tp that divides them)"
            )
        if cost.kv_capacity_blocks(self.block_size) > 1 >= drafter_blocks(cost, self.block_size, drafter):
            raise ParamError(
                f"drafter: {self.drafter} is not allowed on {cost.where}; its weights "
                f"({drafter.weight_bytes(cost) / 1e9:.1f} GB a GPU) leave no KV cache beside {cost.model.name} "
                "(use eagle or more GPUs)"
            )

    def setup(self, memory: str = "paged") -> Setup:
        """The scenario's setup with the model chosen; `auto` prices the modes alike (`Setup.alike`)."""
        return (
            super()
            .setup(memory)
            .with_(
                model="" if self.model == "scenario" else self.model,
                alike=tuple(sorted({MODES[m].engine for m in self.priced_modes()})),
            )
        )

    def refusal(self, mode: str) -> str | None:
        """Why a mode cannot serve the model (or these parameters), or None."""
        if self.spec_tokens and not MODES[mode].speculative:
            return f"{mode}: {SPEC_REFUSAL}"
        if self.loras and not MODES[mode].adapters:
            return f"{mode}: {LORA_REFUSAL}"
        if self.images and not MODES[mode].multimodal:
            return f"{mode}: {IMAGE_REFUSAL}"
        return MODES[mode].refusal(self.setup().cost_model().model)

    def scenario_info(self) -> dict[str, Any]:
        info = super().scenario_info()
        if self.model != "scenario":
            info["model"] = self.model
            info["about"] = f"{self.model} on {info['gpu']}, the requests of scenario {self.scenario}"
        return info

    def kv_groups(self) -> list[dict[str, Any]] | None:
        """vLLM V1's KV cache groups for a model whose layers are not all alike (None otherwise:
        `kv_capacity.kv_cache_groups`)."""
        return kv_cache_groups(self.setup().cost_model(), self.block_size, self.setup().spec.max_len)

    def budget(self) -> int:
        return self.token_budget or default_token_budget(self.setup().cost_model().gpu)

    def chunk(self) -> int:
        return self.chunk_size or default_chunk_size(self.setup().cost_model().gpu)

    def mode_setup(self, mode: str) -> Setup:
        """The setup a mode runs with: a measured model prices SGLang's steps with SGLang's kernels."""
        return self.setup().with_(kernels=MODES[mode].engine)

    def priced_modes(self) -> tuple[str, ...]:
        """The modes a run prices steps for."""
        return tuple(MODES)

    def scheduler_cost(self, mode: str) -> CostModel:
        return self.mode_setup(mode).cost_model()

    def scheduler(self, mode: str, give_up_after: int | None = None) -> ContinuousBatching:
        """The mode's scheduler, configured from the parameters."""
        setup = self.mode_setup(mode)
        return MODES[mode].make(
            Settings(
                setup.cost_model(),
                setup.spec.max_len,
                setup.slo,
                give_up_after,
                block_size=self.block_size,
                max_seqs=self.max_seqs,
                watermark=self.watermark,
                preemption=self.preemption,
                token_budget=self.budget(),
                full_prompt_check=self.full_prompt_check,
                async_scheduling=self.async_scheduling,
                chunk_size=self.chunk(),
                policy=self.policy,
                mixed_chunk=self.mixed_chunk,
                prefix_caching=self.prefix_caching,
                host_tokens=self.host_tokens(),
                spec_tokens=self.spec_tokens,
                acceptance=parse_acceptance(self.acceptance, self.spec_tokens) if self.spec_tokens else (),
                drafter=self.drafter,
                seed=self.seed,
                lora=self.lora(),
                encoder=self.encoder(),
            )
        )

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
        unread = (
            *MODES[mode].unread,
            *unset(self.spec_tokens, self.loras, self.images),
        )  # no drafts, no adapters, no images: their settings are not read
        if MODES[mode].tiered and self.host_blocks():
            return tuple(n for n in unread if n not in SWAP_PRICES)
        return unread

    def run_mode(
        self,
        mode: str,
        requests: list[Request],
        progress: Progress,
        trace: bool = False,
        give_up_after: int | None = None,
    ) -> Run:
        """One mode's run; with a host tier, a tiered mode's carries its figures as `host_tier`."""
        recorder = None
        if trace:
            horizon = max((r.arrival for r in requests), default=0.0) or 1.0
            curves = ("cached", "hit_rate") if MODES[mode].prefix_cache else ()
            recorder = TraceRecorder(horizon / 200, extra_curves=curves)
        scheduler = self.scheduler(mode, give_up_after)
        served = with_adapters(requests, self.loras, self.seed)
        if MODES[mode].multimodal:  # (a mode that refuses images never runs with them)
            served = self.imaged(served)
        run = scheduler.run(served, progress, trace=recorder)
        if isinstance(scheduler, Verifying):
            run.spec = scheduler.figures(run.sim_time)
            slots_at = getattr(scheduler, "slots_at", None)
            if slots_at is not None and trace:  # SGLang's draft and verify slots, taken and freed a step
                run.spec["at_frames"] = slots_at([f["t"] for f in run.trace["frames"]])
        slots = getattr(scheduler, "adapters", None)
        if slots is not None:  # the KV left beside the slots in the mode's cells: vLLM's blocks, SGLang's tokens
            times = [f["t"] for f in run.trace["frames"]] if trace else []
            cell, lora = MODES[mode].cell, self.lora()
            kv = lora.kv_blocks(scheduler.cost, self.block_size) if cell == "block" else lora.kv_tokens(scheduler.cost)
            run.lora = {"loras": self.loras, **slots.figures(kv, times)}
        encoder = getattr(scheduler, "encoder", None)
        if encoder is not None:
            times = [f["t"] for f in run.trace["frames"]] if trace else []
            run.encoder = {
                "images": self.images,
                "image_tokens": self.image_tokens,
                "image_pool": self.image_pool,
                **encoder.figures(scheduler.config.encoder.budget, times),
            }
        tier = getattr(scheduler, "tier", None)
        if tier is not None:
            times = run.trace["curves"]["t"] if trace else []
            run.host_tier = {
                "size_gb": self.host_tier_gb,
                "host_hit_tokens": scheduler.host_hit_tokens,
                **tier.figures(times),
            }
        return run

    def figures(self, run: Run) -> dict[str, Any]:
        out = {**summarize(run, self.setup().slo), **prefix_figures(run), "max_batch": run.max_batch}
        if hasattr(run, "spec"):
            out["spec"] = run.spec
        if hasattr(run, "lora"):
            out["lora"] = run.lora
        if hasattr(run, "encoder"):
            out["encoder"] = run.encoder
        tier = getattr(run, "host_tier", None)
        if tier is not None:  # hits by tier: what the prompt tokens of first admissions came from
            host = tier["host_hit_tokens"]
            out["host_tier"] = {
                **tier,
                "gpu_hit_tokens": out["hit_tokens"] - host,
                "computed_tokens": out["prompt_tokens"] - out["hit_tokens"],
            }
        return out
