"""SGLang's state pool for linear-attention hybrids at SGLang's state dtypes (kvweb/prefix/sglang_pools.py):
the recurrent state in float32 and the convolution state in bfloat16 (python/sglang/srt/configs/
mamba_utils.py `mamba2_state_dtype`, `BaseLinearStateParams.mamba_cache_per_req`), whatever the KV precision."""

from __future__ import annotations

from dataclasses import replace

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.prefix.sglang_pools import sglang_mamba_pool_sizes, sglang_pool_figures, sglang_scheduler, sglang_state_bytes
from kvweb.serving.schedulers.radix_scheduler import RadixConfig

H200 = GPUS["H200"]
QWEN3_NEXT = CostModel(H200, MODELS["qwen3-next-80b-a3b"], weight_precision="int4")


def test_a_qwen3_next_state_is_float32_recurrent_and_bf16_convolution():
    # per gated-DeltaNet layer: 32 value heads x 128 x 128 recurrent elements at 4 B, (2 x 16 x 128 + 32 x 128)
    # channels x (4 - 1) convolution elements at 2 B; 36 such layers
    per_layer = 32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 2
    assert per_layer == 2_146_304  # not 548,864 x 2 = 1,097,728 B at 16 bits
    assert sglang_state_bytes(QWEN3_NEXT) == 36 * per_layer == 77_266_944
    # the KV precision does not enter; tensor parallelism splits both states by heads
    assert sglang_state_bytes(replace(QWEN3_NEXT, kv_precision="fp8")) == 77_266_944
    assert sglang_state_bytes(replace(QWEN3_NEXT, tp=2)) == 77_266_944 // 2
    assert sglang_state_bytes(CostModel(H200, MODELS["llama-3-8b"])) == 0


def test_qwen3_next_int4_on_one_h200_holds_528_states():
    # 0.9 / 1.9 of the KV memory to whole states, the rest to full-attention tokens (12 layers x 2,048 B)
    free = QWEN3_NEXT.kv_bytes_free_per_gpu
    assert free == 86_129_464_576
    assert 528 == int(free * 0.9 / 1.9 // 77_266_944)
    assert sglang_mamba_pool_sizes(QWEN3_NEXT) == ((free - 528 * 77_266_944) // 24_576, 528) == (1_844_584, 528)
    figures = sglang_pool_figures(QWEN3_NEXT)
    assert (figures["state_bytes"], figures["full_tokens"], figures["states"]) == (77_266_944, 1_844_584, 528)
    # the scheduler the labs and the fleet build runs on those pools, its running requests capped at (528 - 1) / 2
    engine = sglang_scheduler(QWEN3_NEXT, RadixConfig(8192))
    assert (engine.tree.pool.size, engine.tree.states.size) == (1_844_584, 528) and engine.max_seqs <= 263
    # fp8 KV: the same states, twice the tokens
    assert sglang_mamba_pool_sizes(replace(QWEN3_NEXT, kv_precision="fp8"))[1] == 528
