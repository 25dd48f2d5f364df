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
    # OPT-13B-like (the lecture's): 40 * (4*5120*5120 + 3*5120*13653) + 2 * 50272*5120, its own LM head
    opt_layers = 40 * (104_857_600 + 209_710_080)
    assert MODELS["opt-13b-like"].params == opt_layers + 2 * 50272 * 5120 == 13_097_492_480  # ~13.1e9
    # the real OPT-13B ties its LM head to the embedding: one vocab x d_model matrix less
    assert MODELS["opt-13b"].params == opt_layers + 50272 * 5120 == 12_840_099_840  # ~12.8e9
    assert MODELS["opt-13b"].kv_bytes_per_token == MODELS["opt-13b-like"].kv_bytes_per_token


def test_capacity_matches_the_lecture():
    opt = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"])
    # (0.9 * 40e9 - 2 * 13,097,492,480) // 819,200 = 9,805,015,040 // 819,200 = 11,969 tokens: "near 12 thousand"
    assert opt.kv_capacity_tokens == (36e9 - 2 * 13_097_492_480) // 819_200 == 11_969
    assert opt.kv_capacity_blocks(16) == 11_969 // 16 == 748
    real = CostModel(GPUS["A100-40GB"], MODELS["opt-13b"])  # tied: 514,785,280 B more for KV
    assert real.kv_capacity_tokens == (36e9 - 2 * 12_840_099_840) // 819_200 == 12_597
    assert real.kv_capacity_blocks(16) == 787
    llama = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"])
    assert llama.kv_capacity_tokens > 400_000


def test_the_lectures_assumptions_are_the_defaults():
    cm = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"])
    assert (cm.compute_eff, cm.step_overhead_s, cm.memory_eff, cm.mem_util) == (0.7, 0.5e-3, 0.8, 0.9)
    # Prefill of 4096 tokens of Llama-3-8B on H100-SXM, by hand:
    # linear layers 2 x 32 x 218,103,808 x 4096; the LM head for the last token 2 x 4096 x 128,256;
    # attention 4 x 32 layers x 32 heads x 128 x (4096 x 4097 / 2) query-key pairs.
    flops = 2 * 32 * 218_103_808 * 4096 + 2 * 4096 * 128_256 + 4 * 32 * 32 * 128 * 4096 * 4097 / 2
    assert flops == pytest.approx(6.1578e13, rel=1e-4)
    # compute-bound: 16.6 GB / (3350e9 x 0.8) = 6.2 ms of memory time is far below 89 ms of compute
    assert cm.prefill_cost(4096) == pytest.approx(flops / (989e12 * 0.7) + 0.5e-3, rel=1e-12)
    assert cm.prefill_cost(4096) == pytest.approx(0.08945, rel=1e-3)


def test_decode_step_reads_weights_and_every_kv():
    cm = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"], step_overhead_s=0)
    flops, nbytes = cm.decode_work(batch=8, total_context=8 * 1000)
    assert nbytes == MODELS["opt-13b-like"].weight_bytes + 8000 * 819_200
    assert cm.decode_step_cost(8, 8000) == pytest.approx(nbytes / (1555e9 * 0.8))
    assert decode_step_cost(
        MODELS["opt-13b-like"], GPUS["A100-40GB"], 8, [1000] * 8, step_overhead_s=0
    ) == cm.decode_step_cost(8, 8000)


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
    assert cm.ridge_intensity == pytest.approx(312e12 * 0.7 / (1555e9 * 0.8))
    assert cm.attainable_flops(cm.ridge_intensity * 10) == pytest.approx(312e12 * 0.7)
    assert cm.attainable_flops(1.0) == pytest.approx(1555e9 * 0.8)


def test_swap_copies_per_layer_for_k_and_v():
    # vLLM V0 copies each block once per layer for K and once for V: 2 x 32 = 64 copies for Llama-3-8B
    cm = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"], swap_copies="per-layer-kv")
    assert cm.copies_per_block == 64
    expected = 1000 * 131_072 / 50e9 + math.ceil(1000 / 16) * 64 * 10e-6
    assert cm.swap_cost(1000, 16) == pytest.approx(expected)
    # the host link is an assumption too: 25 GB/s doubles the bytes' time
    slow = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"], link_bandwidth=25e9)
    assert slow.swap_cost(1000, 1000) == pytest.approx(1000 * 131_072 / 25e9 + 10e-6)
    with pytest.raises(ValueError, match="swap_copies"):
        CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"], swap_copies="per-token")


def test_a_model_that_does_not_fit_says_so():
    # Llama-3-70B: 141.1 GB of weights; 0.9 x 80 GB = 72 GB usable on an H100, 126.9 GB on an H200
    for gpu in GPUS:
        cm = CostModel(GPUS[gpu], MODELS["llama-3-70b"])
        fit = cm.fit()
        assert not cm.fits and fit["fits"] is False and fit["kv_capacity_tokens"] == 0
        assert fit["fit_note"].startswith(f"llama-3-70b does not fit on one {gpu}: its weights take 141.1 GB")
    what_if = CostModel(GPUS["H100-SXM"], MODELS["llama-3-70b"], ignore_weights=True)
    assert what_if.fits and what_if.kv_capacity_tokens == 72e9 // 327_680 == 219_726
    assert "what-if" in what_if.fit()["fit_note"] and "does not fit" in what_if.fit()["fit_note"]
    ok = CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"]).fit()
    assert ok["fits"] and ok["fit_note"] is None and ok["usable_bytes_per_gpu"] == 72e9
    # weights that fit with no room for one token of KV cannot run either
    tight = CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"], mem_util=26_194_984_960 / 40e9)
    assert tight.kv_capacity_tokens == 0 and not tight.fits


def test_mxfp4_quantizes_the_routed_experts_only_and_gpt_oss_120b_fits_one_h100():
    """gpt-oss-120b as it ships: 114.66e9 routed-expert parameters at 4.25 bits (4-bit values and an
    8-bit scale per 32), the other 2.13e9 (attention, routers, embedding and LM head) at 16 bits."""
    m = MODELS["gpt-oss-120b"]
    assert (m.params, m.experts * m.expert_params, m.embedding_params) == (
        116_788_838_400,
        114_661_785_600,
        1_158_266_880,
    )
    mx = CostModel(GPUS["H100-SXM"], m, weight_precision="mxfp4")
    by_hand = (116_788_838_400 - 114_661_785_600) * 2 + 114_661_785_600 * 4.25 / 8
    assert mx.weight_bytes == mx.weight_bytes_per_gpu == by_hand == 65_168_179_200
    assert mx.kv_capacity_tokens > 0 and CostModel(GPUS["H100-SXM"], m).kv_capacity_tokens == 0
    # a step reads its experts at 4.25 bits, the rest at 16: between the int4 and the 16-bit price
    prices = [
        CostModel(GPUS["H100-SXM"], m, weight_precision=w).step_weight_bytes(8) for w in ("int4", "mxfp4", "16-bit")
    ]
    assert prices == sorted(prices) and len(set(prices)) == 3
    with pytest.raises(ValueError, match="routed experts only.*llama-3.1-8b has none"):
        CostModel(GPUS["H100-SXM"], MODELS["llama-3.1-8b"], weight_precision="mxfp4")


def test_fp8_block_is_priced_as_fp8_by_the_roofline():
    """The roofline has no per-block scales: fp8-block weights cost what FP8 weights cost (its
    kernels differ only in the measured tables)."""
    for name in ("llama-3.1-70b", "mixtral-8x7b"):
        a, b = (CostModel(GPUS["H100-SXM"], MODELS[name], tp=4, weight_precision=w) for w in ("fp8", "fp8-block"))
        assert (a.weight_bytes, a.kv_capacity_tokens, a.prefill_cost(3000), a.decode_step_cost(32, 40_000)) == (
            b.weight_bytes,
            b.kv_capacity_tokens,
            b.prefill_cost(3000),
            b.decode_step_cost(32, 40_000),
        )
