"""SGLang's scheduler on the pools a model needs: one token pool (`RadixCache`); a full and a
window pool for sliding-window layers (`SWARadixCache`, serving/schedulers/swa_scheduler.py); a token pool
and a state pool for linear-attention layers (`MambaRadixCache`, serving/schedulers/mamba_scheduler.py).
Here because the serving part may not import the prefix part's trees; the schedulers lab and the
fleet's candidates both build SGLang through it.

The state pool is sized at SGLang's state dtypes, not the KV precision (`sglang_state_bytes`):
python/sglang/srt/configs/mamba_utils.py `mamba2_state_dtype` keeps the convolution state in
bfloat16 (SGLANG_MAMBA_CONV_DTYPE) and the recurrent (SSM) state in float32 unless the model's
config or SGLANG_MAMBA_SSM_DTYPE says otherwise, and `BaseLinearStateParams.mamba_cache_per_req`
counts conv elements x 2 B + SSM elements x 4 B per linear layer: a Qwen3-Next state is about
twice what 16 bits give (2,146,304 B a layer, not 1,097,728), so about half the states fit."""

from __future__ import annotations

from typing import Any

from kvweb.gpu.cost import CostModel
from kvweb.gpu.layers import LinearAttention
from kvweb.gpu.specs import BYTES_16
from kvweb.prefix.mamba_radix_cache import MambaRadixCache
from kvweb.prefix.radix_cache import RadixCache
from kvweb.prefix.swa_radix_cache import SWARadixCache
from kvweb.serving.memory.host_tier import HostTree
from kvweb.serving.schedulers.mamba_scheduler import MAMBA_FULL_MEMORY_RATIO, MambaRadixScheduler
from kvweb.serving.loop.metrics import SLO
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, RadixScheduler
from kvweb.serving.schedulers.swa_scheduler import (
    SWA_FULL_TOKENS_RATIO,
    SWARadixScheduler,
    model_window,
    swa_pool_sizes,
)


SSM_BYTES = 4  # SGLang's default mamba_ssm_dtype, float32 (the convolution state: bfloat16, BYTES_16)


def sglang_state_bytes(cost: CostModel) -> int:
    """One request's states over every linear layer on one GPU, as SGLang sizes them: the recurrent
    state (value heads x key dim x value dim) in float32, the convolution state (conv channels x
    (kernel - 1)) in bfloat16, both split over the GPUs by heads; the KV precision does not enter."""
    tp = 1 if cost.attention_dp else cost.tp
    total = 0
    for a, n in cost.model.groups:
        if isinstance(a, LinearAttention):
            ssm = a.value_heads * a.key_dim * a.value_dim
            conv = a.conv_channels * (a.conv_kernel - 1)
            total += n * (ssm // tp * SSM_BYTES + conv // tp * BYTES_16)
    return total


def sglang_mamba_pool_sizes(cost: CostModel, ratio: float = MAMBA_FULL_MEMORY_RATIO) -> tuple[int, int]:
    """(full-attention tokens, states) of SGLang's two pools on this GPU: ratio / (1 + ratio) of the
    KV memory to whole states of `sglang_state_bytes`, the rest to full-attention tokens
    (SGLang's model_runner.py mamba pool sizing)."""
    per_state = sglang_state_bytes(cost)
    if not cost.fits or not per_state:
        return 0, 0
    free = cost.kv_bytes_free_per_gpu
    states = int(free * ratio / (1 + ratio) // per_state)
    return int((free - states * per_state) // cost.kv_bytes_per_token_per_gpu), states


def sglang_scheduler(
    cost: CostModel,
    config: RadixConfig,
    slo: SLO = SLO(),
    give_up_after: int | None = None,
    host: HostTree | None = None,
) -> RadixScheduler:
    """SGLang on this model's pools (a host tier only for models whose layers are all alike)."""
    window = model_window(cost.model)
    if window:
        full, swa = swa_pool_sizes(cost)
        return SWARadixScheduler(cost, SWARadixCache(full, swa, window), config, slo, give_up_after, host)
    if sglang_state_bytes(cost):
        if host is not None:
            raise ValueError("sglang: a host tier is simulated for models whose layers are all alike only")
        tokens, states = sglang_mamba_pool_sizes(cost)
        return MambaRadixScheduler(cost, MambaRadixCache(tokens, states), config, states, slo, give_up_after)
    tokens = config.lora.kv_tokens(cost) if config.lora else cost.kv_capacity_tokens  # adapters' slots first
    return RadixScheduler(cost, RadixCache(tokens), config, slo, give_up_after, host)


def sglang_pool_figures(cost: CostModel) -> dict[str, Any] | None:
    """The two pools of a model with window or linear layers (None otherwise): the window, the ratio
    of window to full slots and each pool's token slots; or a state's bytes, the memory ratio, the
    full-attention tokens and the states."""
    window = model_window(cost.model)
    if window:
        full, swa = swa_pool_sizes(cost)
        return {
            "window": window,
            "swa_full_tokens_ratio": SWA_FULL_TOKENS_RATIO,
            "full_tokens": full,
            "swa_tokens": swa,
        }
    if sglang_state_bytes(cost):
        tokens, states = sglang_mamba_pool_sizes(cost)
        return {
            "state_bytes": sglang_state_bytes(cost),
            "mamba_full_memory_ratio": MAMBA_FULL_MEMORY_RATIO,
            "full_tokens": tokens,
            "states": states,
        }
    return None
