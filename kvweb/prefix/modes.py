"""The scheduler modes, in one registry: what each is called, how its scheduler is made, and what it
can do, as data. The schedulers, fleet and plan labs, the fleet's candidates and the app's
schedulers view read `MODES`; none of them branches on a mode's name. A new scheduler is one
`Mode` in `MODES` (tests/test_toy_scheduler.py adds one from a test).

Here, not in the serving part, because SGLang's scheduler is built on the prefix part's trees
(`sglang_scheduler`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kvweb.gpu.cost import CostModel
from kvweb.gpu.specs import LLMSpec
from kvweb.prefix.radix_cache import RadixCache
from kvweb.prefix.sglang_pools import sglang_pool_figures, sglang_scheduler
from kvweb.serving.loop.continuous_batching import ContinuousBatching
from kvweb.serving.loop.engine_setup import ignored_by
from kvweb.serving.memory.host_tier import HostTree
from kvweb.serving.memory.hybrid_kv import sglang_refusal
from kvweb.serving.memory.encoder_cache import EncoderConfig
from kvweb.serving.memory.lora import LoraConfig
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.memory.paged_memory import BLOCK_SIZE, PagedMemory
from kvweb.serving.schedulers.paper_scheduler import PaperConfig, PaperScheduler, paper_refusal
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, default_chunk_size
from kvweb.serving.schedulers.radix_spec import RadixSpecScheduler, spec_pool_slots
from kvweb.serving.schedulers.spec_decode import Drafts, SpecV1Scheduler
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler, default_token_budget

MAX_SEQS = 256  # running requests at most (vLLM's max_num_seqs, SGLang's max_running_requests)


@dataclass(frozen=True)
class Settings:
    """What a mode's scheduler is made from: the step prices, the length limit, the SLO and every
    scheduler's knobs, each mode reading its own (0: the engine's default for the GPU). The
    defaults are the engines' (the fleet's candidates run at them)."""

    cost: CostModel
    max_len: int  # the model's limit on prompt + output
    slo: SLO = SLO()
    give_up_after: int | None = None
    block_size: int = BLOCK_SIZE
    max_seqs: int = MAX_SEQS
    watermark: float = 0.01  # the papers' engine: vLLM 2023's default
    preemption: str = "recompute"  # the papers' engine
    token_budget: int = 0  # vLLM V1's max_num_batched_tokens
    full_prompt_check: bool = True  # vLLM V1
    async_scheduling: bool = False  # vLLM V1
    chunk_size: int = 0  # SGLang's chunked_prefill_size
    max_prefill_tokens: int = 16384  # SGLang's default
    policy: str = "lpm"  # SGLang
    mixed_chunk: bool = False  # SGLang
    prefix_caching: bool = True  # vLLM V1's automatic prefix caching, SGLang's radix cache
    host_tokens: int = 0  # a host-memory tier for the prefix cache, in tokens of KV (0: off)
    spec_tokens: int = 0  # speculative decoding's draft tokens per step (0: off), where a mode models it
    acceptance: tuple[float, ...] = ()  # each draft position's acceptance rate (serving/schedulers/spec_decode.py)
    drafter: str = "eagle"  # what proposes the drafts: eagle, mtp or a draft model's name (schedulers/drafters.py)
    seed: int = 0  # the draws of accepted drafts
    lora: LoraConfig | None = None  # LoRA adapters' slots and max_loras (None: off), where a mode models them
    encoder: EncoderConfig | None = None  # images' encoder budget and cache (None: no images), where modelled


@dataclass(frozen=True)
class Mode:
    """One scheduler mode: its name (the result's `mode`), factory and traits."""

    name: str
    make: Callable[[Settings], ContinuousBatching]
    engine: str  # whose measured kernels price its steps: vllm or sglang (kvweb/gpu/measured_cost.py)
    refusal: Callable[[LLMSpec], str | None]  # why it cannot serve a model, or None
    unread: tuple[str, ...]  # the schedulers lab's parameters its run does not read (left out of a run's key)
    cell: str  # a memory map's cell: a KV "block" or SGLang's "token" slots
    prefix_cache: bool  # it keeps a prefix cache (its trace has the hit-rate and cached curves)
    tiered: bool  # a host-memory tier can serve it
    layers_apart: str  # how it keeps a model's kinds of layer apart: "groups" (vLLM V1), "pools" (SGLang) or ""
    holds_transfers: bool  # its decode side can hold a transferred prompt's KV (prefill/decode disaggregation)
    hashes_blocks: bool  # it hashes every block into its pool (the fleet's work estimate)
    stepwise: bool  # its quiet steps run as arrays (the work estimate)
    color: str  # its colour in the app
    pool_figures: Callable[[CostModel], dict[str, Any]] = lambda cost: {}  # its own pools, for the result
    speculative: bool = False  # it models speculative decoding's memory (spec_tokens > 0)
    adapters: bool = False  # it models LoRA adapters' slots and max_loras (loras > 0)
    multimodal: bool = False  # it models images' encoder budget and cache (images > 0)


def paper(s: Settings) -> ContinuousBatching:
    """The papers' engine on paged memory."""
    memory = PagedMemory(s.cost.kv_capacity_blocks(s.block_size), s.block_size, s.watermark)
    config = PaperConfig(s.max_len, s.preemption, s.block_size, s.max_seqs)
    return PaperScheduler(s.cost, memory, config, s.slo, s.give_up_after)


def vllm_v1(s: Settings) -> ContinuousBatching:
    """vLLM V1, its host tier in whole blocks; with draft tokens, speculative decoding's; with
    adapters, their slots and max_loras; with images, the encoder's budget and cache."""
    config = V1Config(
        s.max_len,
        s.block_size,
        s.max_seqs,
        s.token_budget or default_token_budget(s.cost.gpu),
        s.prefix_caching,
        s.full_prompt_check,
        s.async_scheduling,
        s.host_tokens // s.block_size,
        s.lora,
        s.encoder,
    )
    if s.spec_tokens:
        return SpecV1Scheduler(
            s.cost, config, Drafts(s.spec_tokens, s.acceptance, s.seed, s.drafter), s.slo, s.give_up_after
        )
    return V1Scheduler(s.cost, config, s.slo, s.give_up_after)


def sglang(s: Settings) -> ContinuousBatching:
    """SGLang on the pools its model needs, its host tier another radix tree; with adapters, their
    slots and max_loras_per_batch; with draft tokens, EAGLE's worker's slots (radix_spec.py)."""
    config = RadixConfig(
        s.max_len,
        s.max_seqs,
        s.chunk_size or default_chunk_size(s.cost.gpu),
        s.max_prefill_tokens,
        s.policy,
        s.mixed_chunk,
        s.prefix_caching,
        s.lora,
    )
    host = HostTree(RadixCache(s.host_tokens), s.host_tokens, s.cost) if s.host_tokens else None
    if s.spec_tokens:  # EAGLE's worker: SGLang turns mixed chunks off, the drafter's layers share the pool
        drafts = Drafts(s.spec_tokens, s.acceptance, s.seed, s.drafter)
        tree = RadixCache(spec_pool_slots(s.cost, drafts))
        config = replace(config, mixed_chunk=False)
        return RadixSpecScheduler(s.cost, tree, config, drafts, s.slo, s.give_up_after, host)
    return sglang_scheduler(s.cost, config, s.slo, s.give_up_after, host)


def sglang_pools(cost: CostModel) -> dict[str, Any]:
    """SGLang's pools for a model with window or linear layers (none otherwise)."""
    pools = sglang_pool_figures(cost)
    return {"sglang_pools": pools} if pools else {}


# What each run does not read: the papers' engine has no token budget, chunking or prefix cache
# (and paged memory no allocator); vLLM V1 and SGLang never swap (the swap prices and the engine's
# watermark and preemption mode are not theirs), SGLang's slots are token-granular (no block
# size), and the token budget and images are vLLM's alone.
SWAP_PRICES = ("block_overhead_us", "host_link_gb_s", "swap_copies")
V1_ONLY = ("full_prompt_check", "async_scheduling")
# read by the modes that are `speculative`; the others refuse spec_tokens > 0
SPEC = ("spec_tokens", "acceptance", "drafter")
LORA = (
    "loras",
    "max_loras",
    "lora_rank",
    "lora_targets",
)  # read by the modes with `adapters`; the others refuse loras > 0
IMAGES = ("images", "image_tokens", "image_pool", "encoder_budget", "encoder_cache")  # `multimodal` modes read them
MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode(
            "paper",
            paper,
            "vllm",
            paper_refusal,
            (
                "token_budget",
                "chunk_size",
                "policy",
                "mixed_chunk",
                "prefix_caching",
                *V1_ONLY,
                "host_tier_gb",
                *SPEC,
                *LORA,
                *IMAGES,
                *ignored_by("paged"),
            ),
            cell="block",
            prefix_cache=False,
            tiered=False,
            layers_apart="",
            holds_transfers=False,
            hashes_blocks=False,
            stepwise=False,
            color="#7f7f7f",
        ),
        Mode(
            "vllm-v1",
            vllm_v1,
            "vllm",
            lambda model: None,
            ("watermark", "preemption", "allocator", "chunk_size", "policy", "mixed_chunk", *SWAP_PRICES),
            cell="block",
            prefix_cache=True,
            tiered=True,
            layers_apart="groups",
            holds_transfers=True,
            hashes_blocks=True,
            stepwise=True,
            color="#1f77b4",
            speculative=True,
            adapters=True,
            multimodal=True,
        ),
        Mode(
            "sglang",
            sglang,
            "sglang",
            sglang_refusal,
            (
                "block_size",
                "watermark",
                "preemption",
                "allocator",
                "token_budget",
                *V1_ONLY,
                *SWAP_PRICES,
                *IMAGES,
            ),
            cell="token",
            prefix_cache=True,
            tiered=True,
            layers_apart="pools",
            holds_transfers=True,
            hashes_blocks=False,
            stepwise=True,
            color="#d62728",
            pool_figures=sglang_pools,
            speculative=True,
            adapters=True,
        ),
    )
}
