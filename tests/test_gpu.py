"""The paper GPU against hand calculations (SPEC section 1)."""
import math

import pytest

from kvweb.gpu import GPUS, MODELS, CostModel, decode_step_cost, prefill_cost, recompute_cost, swap_cost

KIB = 1024


@pytest.mark.parametrize("model, kib", [("opt-13b-like", 800), ("llama-3-8b", 128), ("llama-3-70b", 320)])
def test_kv_bytes_per_token(model, kib):
    # 2 (K, V) x layers x kv_heads x head_dim x 2 bytes: 2*40*40*128*2, 2*32*8*128*2, 2*80*8*128*2
    assert MODELS[model].kv_bytes_per_token == kib * KIB


def test_parameter_counts_by_hand():
    # Llama-3-8B: per layer 4096*128*(2*32+2*8) + 3*4096*14336 = 41,943,040 + 176,160,768
    per_layer = 41_943_040 + 176_160_768
    assert MODELS["llama-3-8b"].params == 32 * per_layer + 2 * 128256 * 4096  # untied embeddings
    # OPT-13B-like: 40 * (4*5120*5120 + 3*5120*13653) + 50272*5120 (tied) = 12.84e9, ~26 GB in fp16
    assert MODELS["opt-13b-like"].params == 40 * (104_857_600 + 209_710_080) + 50272 * 5120
    assert 25.5e9 < MODELS["opt-13b-like"].weight_bytes < 26e9


def test_capacity_matches_the_lecture():
    opt = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])
    # (0.9 * 40e9 - 25,680,199,680) // 819,200 = 12,597 tokens: "near 12 thousand"
    assert opt.kv_capacity_tokens == (36e9 - 25_680_199_680) // 819_200 == 12_597
    assert opt.kv_capacity_blocks(16) == 787
    llama = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"])
    assert llama.kv_capacity_tokens > 400_000


def test_short_prefill_is_memory_bound_and_never_below_one_weight_read():
    cm = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"])
    one_read = MODELS["llama-3-8b"].weight_bytes / (3350e9 * 0.8)
    assert cm.prefill_cost(1) >= one_read
    assert cm.prefill_cost(1) == pytest.approx(one_read + 1e-3, rel=1e-3)
    # long prefills are compute-bound: time grows about linearly with tokens
    assert cm.prefill_cost(8192) / cm.prefill_cost(4096) == pytest.approx(2, rel=0.15)


def test_decode_step_reads_weights_and_every_kv():
    cm = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"], step_overhead_s=0)
    flops, nbytes = cm.decode_work(batch=8, total_context=8 * 1000)
    assert nbytes == MODELS["opt-13b-like"].weight_bytes + 8000 * 819_200
    assert cm.decode_step_cost(8, 8000) == pytest.approx(nbytes / (1555e9 * 0.8))
    assert decode_step_cost(MODELS["opt-13b-like"], GPUS["A100-40GB"], 8, [1000] * 8, step_overhead_s=0) == \
        cm.decode_step_cost(8, 8000)


def test_swap_cost_by_hand():
    # 1000 tokens x 128 KiB over 50 GB/s + 63 blocks x 10 us
    expected = 1000 * 131_072 / 50e9 + math.ceil(1000 / 16) * 10e-6
    assert swap_cost(MODELS["llama-3-8b"], GPUS["H100-SXM"], 1000, 16) == pytest.approx(expected)
    cm = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"])
    assert cm.swap_roundtrip_cost(1000, 16) == pytest.approx(2 * expected)
    # block size 1 pays the per-block overhead 1000 times
    assert cm.swap_cost(1000, 1) - cm.swap_cost(1000, 1000) == pytest.approx(999 * 10e-6)


def test_recompute_is_a_prefill():
    m, g = MODELS["llama-3-70b"], GPUS["H200"]
    assert recompute_cost(m, g, 3000) == prefill_cost(m, g, 3000)


def test_roofline_ridge():
    cm = CostModel(GPUS["A100-40GB"], MODELS["llama-3-8b"])
    assert cm.ridge_intensity == pytest.approx(312e12 * 0.5 / (1555e9 * 0.8))
    assert cm.attainable_flops(cm.ridge_intensity * 10) == pytest.approx(312e12 * 0.5)
    assert cm.attainable_flops(1.0) == pytest.approx(1555e9 * 0.8)
