"""SGLang's scheduler on the pools a model needs: one token pool (`RadixCache`); a full and a
window pool for sliding-window layers (`SWARadixCache`, serving/swa_scheduler.py); a token pool
and a state pool for linear-attention layers (`MambaRadixCache`, serving/mamba_scheduler.py).
Here because the serving part may not import the prefix part's trees; the schedulers lab and the
fleet's candidates both build SGLang through it."""
from __future__ import annotations

from typing import Any

from kvweb.gpu.cost import CostModel
from kvweb.prefix.mamba_radix_cache import MambaRadixCache
from kvweb.prefix.radix_cache import RadixCache
from kvweb.prefix.swa_radix_cache import SWARadixCache
from kvweb.serving.host_tier import HostTree
from kvweb.serving.mamba_scheduler import MAMBA_FULL_MEMORY_RATIO, MambaRadixScheduler, mamba_pool_sizes, state_bytes
from kvweb.serving.metrics import SLO
from kvweb.serving.radix_scheduler import RadixConfig, RadixScheduler
from kvweb.serving.swa_scheduler import SWA_FULL_TOKENS_RATIO, SWARadixScheduler, model_window, swa_pool_sizes


def sglang_scheduler(cost: CostModel, config: RadixConfig, slo: SLO = SLO(), give_up_after: int | None = None,
                     host: HostTree | None = None) -> RadixScheduler:
    """SGLang on this model's pools (a host tier only for models whose layers are all alike)."""
    window = model_window(cost.model)
    if window:
        full, swa = swa_pool_sizes(cost)
        return SWARadixScheduler(cost, SWARadixCache(full, swa, window), config, slo, give_up_after, host)
    if state_bytes(cost):
        if host is not None:
            raise ValueError("sglang: a host tier is simulated for models whose layers are all alike only")
        tokens, states = mamba_pool_sizes(cost)
        return MambaRadixScheduler(cost, MambaRadixCache(tokens, states), config, states, slo, give_up_after)
    return RadixScheduler(cost, RadixCache(cost.kv_capacity_tokens), config, slo, give_up_after, host)


def sglang_pool_figures(cost: CostModel) -> dict[str, Any] | None:
    """The two pools of a model with window or linear layers (None otherwise): the window, the ratio
    of window to full slots and each pool's token slots; or a state's bytes, the memory ratio, the
    full-attention tokens and the states."""
    window = model_window(cost.model)
    if window:
        full, swa = swa_pool_sizes(cost)
        return {"window": window, "swa_full_tokens_ratio": SWA_FULL_TOKENS_RATIO, "full_tokens": full,
                "swa_tokens": swa}
    if state_bytes(cost):
        tokens, states = mamba_pool_sizes(cost)
        return {"state_bytes": state_bytes(cost), "mamba_full_memory_ratio": MAMBA_FULL_MEMORY_RATIO,
                "full_tokens": tokens, "states": states}
    return None
