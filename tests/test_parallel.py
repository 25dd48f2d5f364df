"""Tensor parallelism, precision and mixture-of-experts on the paper GPU, against hand calculations
(issue 14, part 1): bytes per token, capacity, an all-reduce's cost, and the rule that the
defaults (one GPU, 16-bit weights and KV) give exactly the lecture's figures."""

import pytest
from hypothesis import assume, given, settings, strategies as st

from kvweb.gpu import GPUS, KV_PRECISIONS, MODELS, TP_SIZES, WEIGHT_PRECISIONS, CostModel, LLMSpec
import kvweb.labs  # noqa: F401 (registers the labs)
from kvweb.parsing import make

H100, A100 = GPUS["H100-SXM"], GPUS["A100-40GB"]
L70 = MODELS["llama-3.1-70b"]
# Llama-3.1-70B: 80 x (8192*128*(2*64 + 2*8) + 3*8192*28672) + 2*128256*8192 parameters
L70_PARAMS = 80 * (150_994_944 + 704_643_072) + 2_101_346_304


def test_public_configs_give_the_public_parameter_counts():
    assert MODELS["llama-3.1-70b"].params == L70_PARAMS == 70_552_387_584  # "70B"
    # 405B: 126 x (16384*128*(256 + 16) + 3*16384*53248) + 2*128256*16384
    assert MODELS["llama-3.1-405b"].params == 126 * (570_425_344 + 2_617_245_696) + 4_202_692_608 == 405_849_243_648
    # Qwen2.5-7B: 28 x (3584*128*(56 + 8) + 3*3584*18944) + 2*152064*3584: 7.62e9 (biases left out)
    assert MODELS["qwen2.5-7b"].params == 28 * (29_360_128 + 203_685_888) + 1_089_994_752 == 7_615_283_200
    assert MODELS["qwen2.5-72b"].params == 80 * (150_994_944 + 3 * 8192 * 29568) + 2 * 152064 * 8192 == 72_704_065_536
    # Mixtral-8x7B: attention 4096*128*80, a router 4096 x 8 and 8 experts of 3*4096*14336, per layer
    mixtral = MODELS["mixtral-8x7b"]
    attention, router, expert = 41_943_040, 32_768, 176_160_768
    assert mixtral.params == 32 * (attention + router + 8 * expert) + 2 * 32000 * 4096 == 46_702_526_464  # "46.7B"
    assert (
        mixtral.active_params == 32 * (attention + router + 2 * expert) + 2 * 32000 * 4096 == 12_879_659_008
    )  # "12.9B"
    # Llama 3.1 keeps Llama 3's shapes
    assert MODELS["llama-3.1-8b"].params == MODELS["llama-3-8b"].params


def test_four_h100s_hold_llama_70b_in_fp8_by_hand():
    """Per GPU: 72 GB usable - 72.65 GB / 4 of FP8 weights (the embedding and LM head, 2 x 128256 x
    8192, stay 16-bit as in FP8 checkpoints) = 53.84 GB for KV; a token's KV on one GPU is 2 x 80
    layers x (8 / 4) KV heads x 128 x 1 B = 40,960 B."""
    cm = CostModel(H100, L70, tp=4, weight_precision="fp8", kv_precision="fp8")
    head = 2 * 128256 * 8192
    assert cm.weight_bytes == L70_PARAMS + head == 72_653_733_888
    assert cm.weight_bytes_per_gpu == 72_653_733_888 / 4 == 18_163_433_472
    assert cm.kv_heads_per_gpu == 2 and cm.kv_bytes_per_token_per_gpu == 2 * 80 * 2 * 128 * 1 == 40_960
    assert cm.kv_bytes_per_token == 4 * 40_960 == 2 * 80 * 8 * 128  # no replicas: the model's own, at 1 B
    assert cm.kv_capacity_tokens == (72e9 - 18_163_433_472) // 40_960 == 1_314_369
    assert cm.kv_capacity_tokens // 2048 == 641  # requests of 2048 tokens held at once
    fit = cm.fit()
    assert fit["fits"] and fit["fit_note"] is None and fit["tp"] == 4
    assert fit["kv_bytes_free_per_gpu"] == 72e9 - 18_163_433_472
    assert fit["kv_bytes_free_total"] == 4 * (72e9 - 18_163_433_472)
    # the same model in 16 bits on 4 GPUs: 35.3 GB of weights and 81,920 B of KV per token each
    wide = CostModel(H100, L70, tp=4)
    assert wide.kv_capacity_tokens == (72e9 - 2 * L70_PARAMS / 4) // 81_920 == 448_288
    # and on one GPU it does not fit at all (141.1 GB of weights)
    assert not CostModel(H100, L70).fits


def test_kv_heads_are_replicated_when_fewer_than_tp():
    """ceil(kv_heads / tp) heads per GPU: 2 KV heads on 4 GPUs are each held by 2 GPUs."""
    gqa2 = LLMSpec("gqa-2", 32, 4096, 32, 2, 128, 14336, 128256)
    cm = CostModel(H100, gqa2, tp=4)
    assert cm.kv_heads_per_gpu == 1 and cm.kv_bytes_per_token_per_gpu == 2 * 32 * 1 * 128 * 2 == 16_384
    assert cm.kv_bytes_per_token == 4 * 16_384 == 2 * gqa2.kv_bytes_per_token  # twice the model's: replicas
    # capacity still follows one GPU's room: 72 GB - 1/4 of the weights, over its 16 KiB per token
    assert cm.kv_capacity_tokens == (72e9 - 2 * gqa2.params / 4) // 16_384
    # tp = 2 splits them exactly: one head each, half the model's KV per token, no replica
    half = CostModel(H100, gqa2, tp=2)
    assert half.kv_bytes_per_token_per_gpu == gqa2.kv_bytes_per_token / 2 == 16_384
    assert half.kv_bytes_per_token == gqa2.kv_bytes_per_token
    assert half.kv_capacity_tokens == (72e9 - 2 * gqa2.params / 2) // 16_384 == 3_916_707


def test_a_model_whose_heads_do_not_divide_is_not_split():
    # Qwen2.5-7B has 28 query heads: 4 GPUs take 7 each, 8 GPUs cannot (vLLM refuses too)
    assert CostModel(H100, MODELS["qwen2.5-7b"], tp=4).fits
    cm = CostModel(H100, MODELS["qwen2.5-7b"], tp=8)
    assert not cm.splits and not cm.fits and cm.kv_capacity_tokens == 0
    assert cm.fit()["fit_note"] == (
        "qwen2.5-7b cannot be split over 8 GPUs: its 28 query heads are not a multiple of 8, so nothing is priced"
    )


def test_an_all_reduce_by_hand():
    """Ring all-reduce of T tokens x 8192 x 2 B over 4 GPUs: each GPU sends 2 x 3/4 of it over one
    direction of NVLink 4 (450 GB/s), plus 10 us; two per layer, 80 layers."""
    cm = CostModel(H100, L70, tp=4)
    one = 2 * 3 / 4 * 2048 * 8192 * 2 / 450e9 + 10e-6
    assert cm.allreduce_time(2048) == pytest.approx(160 * one, rel=1e-12)
    assert cm.allreduce_time(2048) == pytest.approx(0.019496, rel=1e-4)
    assert cm.allreduce_time(0) == pytest.approx(160 * 10e-6)  # only the latencies
    assert CostModel(H100, L70).allreduce_time(2048) == 0  # one GPU: no all-reduce
    # the interconnect is an assumption: PCIe-class 25 GB/s makes the bytes 18x slower
    slow = CostModel(H100, L70, tp=4, interconnect_bandwidth=25e9)
    assert slow.allreduce_bytes_time(2048) == pytest.approx(160 * 1.5 * 2048 * 8192 * 2 / 25e9)
    # A100's NVLink 3: 300 GB/s one way
    assert CostModel(GPUS["A100-80GB"], L70, tp=8).interconnect == 300e9


def test_prefill_and_decode_on_four_gpus_by_hand():
    cm = CostModel(H100, L70, tp=4, weight_precision="fp8", kv_precision="fp8")
    # prefill 2048 tokens: each GPU does a quarter of the linear FLOPs and 16 of the 64 heads,
    # at the FP8 peak (1979e12 x 0.7); compute-bound; then the all-reduces, then the overhead
    flops = (2 * 80 * 855_638_016 * 2048 + 2 * 8192 * 128_256) / 4 + 4 * 80 * 16 * 128 * 2048 * 2049 / 2
    assert cm.prefill_counts(2048) == (pytest.approx(flops), 18_163_433_472 + 2048 * 40_960)
    compute = flops / (1979e12 * 0.7)
    assert cm.prefill_cost(2048) == pytest.approx(compute + cm.allreduce_time(2048) + 0.5e-3, rel=1e-12)
    assert cm.prefill_cost(2048) == pytest.approx(0.0716, rel=1e-3)  # 51.6 ms of FP8 math, 19.5 of all-reduce
    # decode 64 sequences of 1024 tokens: memory-bound; reads a quarter of the weights and each
    # GPU's 40,960 B of every token's KV
    nbytes = 18_163_433_472 + 64 * 1024 * 40_960
    assert cm.decode_counts(64, 64 * 1024)[1] == nbytes
    memory = nbytes / (3350e9 * 0.8)
    allreduce = 160 * (1.5 * 64 * 8192 * 2 / 450e9 + 10e-6)
    assert cm.decode_step_cost(64, 64 * 1024) == pytest.approx(memory + allreduce + 0.5e-3, rel=1e-12)
    assert allreduce / cm.decode_step_cost(64, 64 * 1024) == pytest.approx(0.21, abs=0.01)  # a fifth of the step


def test_swap_moves_each_gpus_share_over_its_own_link():
    cm = CostModel(H100, L70, tp=4, kv_precision="fp8")
    # 1000 tokens x 40,960 B per GPU over 50 GB/s, all four GPUs at once, + 63 copies x 10 us
    assert cm.swap_cost(1000, 16) == pytest.approx(1000 * 40_960 / 50e9 + 63 * 10e-6)
    assert cm.recompute_cost(1000) == cm.prefill_cost(1000)


def test_precision_sets_bytes_and_the_compute_peak():
    m = MODELS["llama-3.1-8b"]
    head = 2 * 128256 * 4096  # the embedding and LM head: 16-bit in every checkpoint (issue 26)
    for name, per_param in (("16-bit", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)):
        assert CostModel(H100, m, weight_precision=name).weight_bytes == (m.params - head) * per_param + head * 2
    assert CostModel(H100, m, kv_precision="fp8").kv_bytes_per_token == 2 * 32 * 8 * 128 * 1 == 65_536
    # FP8 weights use FP8 tensor cores where there are some; INT8/INT4 are weight-only (16-bit math)
    assert CostModel(H100, m, weight_precision="fp8").peak_flops == 1979e12
    assert CostModel(GPUS["H200"], m, weight_precision="fp8").peak_flops == 1979e12
    assert CostModel(A100, m, weight_precision="fp8").peak_flops == 312e12  # no FP8 on Ampere
    assert CostModel(H100, m, weight_precision="int8").peak_flops == 989e12
    assert CostModel(H100, m, weight_precision="int4").peak_flops == 989e12
    # INT4 on one H100: (72 GB - 6.98e9 x 0.5 B - 1.05e9 x 2 B) / 128 KiB of 16-bit KV
    assert (
        CostModel(H100, m, weight_precision="int4").kv_capacity_tokens
        == (72e9 - (m.params - head) / 2 - head * 2) // 131_072
    )
    fp8 = CostModel(H100, m, weight_precision="fp8")
    assert fp8.ridge_intensity == pytest.approx(1979e12 * 0.7 / (3350e9 * 0.8))
    with pytest.raises(ValueError, match="weight_precision must be one of 16-bit, fp8, fp8-block, int8, int4, mxfp4"):
        CostModel(H100, m, weight_precision="fp4")
    with pytest.raises(ValueError, match="tp must be one of 1, 2, 4, 8"):
        CostModel(H100, m, tp=3)


def test_a_mixture_of_experts_holds_every_expert_and_runs_two():
    mixtral = MODELS["mixtral-8x7b"]
    cm = CostModel(H100, mixtral, tp=2)
    # memory holds all 46.7e9 parameters at 2 B: 46.7 GB per GPU; 2 x 32 x 4 KV heads x 128 x 2 B per token
    assert cm.weight_bytes_per_gpu == 46_702_526_464 and cm.kv_bytes_per_token_per_gpu == 65_536
    assert cm.kv_capacity_tokens == (72e9 - 46_702_526_464) // 65_536 == 386_008
    # a decode step reads only the active 12.9e9 parameters (a GPU's half of them) and computes them
    assert cm.step_weight_bytes() == 12_879_659_008 == cm.decode_counts(0, 0)[1]
    per_token = (2 * 32 * (41_943_040 + 32_768 + 2 * 176_160_768) + 2 * 4096 * 32000) / 2
    assert cm.decode_counts(1, 0)[0] == per_token
    # one 16-bit GPU cannot hold it: 93.4 GB of weights
    assert not CostModel(H100, mixtral).fits


def test_llama_405b_needs_eight_gpus_and_fp8_on_h100():
    m = MODELS["llama-3.1-405b"]
    assert not CostModel(H100, m, tp=8).fits  # 811.7 GB / 8 = 101.5 GB > 72 GB
    fp8 = CostModel(H100, m, tp=8, weight_precision="fp8")
    head = 2 * 128256 * 16384  # 16-bit in the FP8 checkpoint
    assert fp8.kv_capacity_tokens == (72e9 - (405_849_243_648 + head) / 8) // (2 * 126 * 1 * 128 * 2) == 321_544
    note = CostModel(H100, m, tp=8).fit()["fit_note"]
    assert note.startswith(
        "llama-3.1-405b does not fit on 8 x H100-SXM: its weights take 101.5 GB per GPU and 72.0 GB is usable"
    )


def test_the_defaults_are_todays_figures():
    for gpu in GPUS.values():
        for m in MODELS.values():
            cm = CostModel(gpu, m)
            assert (cm.tp, cm.weight_precision, cm.kv_precision) == (1, "16-bit", "16-bit")
            assert cm.weight_bytes == m.weight_bytes and cm.kv_bytes_per_token == m.kv_bytes_per_token
            assert cm.prefill_work(777, 33) == cm.prefill_counts(777, 33)
            assert cm.decode_work(5, 900) == cm.decode_counts(5, 900)
            assert cm.peak_flops == gpu.peak_flops and cm.allreduce_time(1000) == 0


works = st.tuples(st.integers(1, 4096), st.integers(0, 4096))


@settings(max_examples=60, deadline=None)
@given(
    tp=st.sampled_from(TP_SIZES),
    wp=st.sampled_from(list(WEIGHT_PRECISIONS)),
    kp=st.sampled_from(list(KV_PRECISIONS)),
    model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "opt-13b-like"]),
    chunks=st.lists(works, min_size=1, max_size=4),
    batch=st.integers(0, 256),
    context=st.integers(0, 10**6),
)
def test_a_step_is_its_roofline_plus_its_all_reduces_for_any_sum_of_work(tp, wp, kp, model, chunks, batch, context):
    """Simulators add up the work of a whole step and price it once: the all-reduce time of the
    step's tokens adds exactly to max(compute, memory), whatever the mix of prefills and decodes."""
    assume(wp != "mxfp4" or MODELS[model].experts > 1)  # MXFP4 quantizes routed experts only
    cm = CostModel(H100, MODELS[model], tp=tp, weight_precision=wp, kv_precision=kp)
    weights = cm.step_weight_bytes()
    f, b = cm.decode_work(batch, context)
    cf, cb = cm.decode_counts(batch, context)
    for n, cached in chunks:
        wf, wb = cm.prefill_work(n, cached)
        pf, pb = cm.prefill_counts(n, cached)
        f, b, cf, cb = f + wf, b + wb - weights, cf + pf, cb + pb - weights
    tokens = batch + sum(n for n, _ in chunks)
    roofline = max(cf / (cm.peak_flops * 0.7), cb / (3350e9 * 0.8))
    assert cm.step_time(f, b) == pytest.approx(roofline + cm.allreduce_time(tokens) + 0.5e-3, rel=1e-9)


def test_the_roofline_lab_shows_tp_and_precision():
    r = make(
        "roofline",
        {
            "model": "llama-3.1-70b",
            "gpu": "H100-SXM",
            "tp": "4",
            "weight_precision": "fp8",
            "kv_precision": "fp8",
            "batch": "64",
            "context": "1024",
            "tokens": "2048",
        },
    ).run()
    assert r["fits"] and r["tp"] == 4 and r["kv_capacity_tokens"] == 1_314_369
    assert r["kv_bytes_per_token_per_gpu"] == 40_960 and r["kv_heads_per_gpu"] == 2
    assert r["gpu"]["peak_flops"] == 1979e12 and r["gpu"]["interconnect_bandwidth"] == 450e9
    assert r["prefill_allreduce_s"] == pytest.approx(0.019496, rel=1e-4)
    assert r["decode_allreduce_s"] == pytest.approx(160 * (1.5 * 64 * 8192 * 2 / 450e9 + 10e-6))
    # the roofline's points are one GPU's own FLOPs and bytes, without the all-reduce
    decode = r["roofline"]["points"][1]
    assert decode["bytes"] == 18_163_433_472 + 64 * 1024 * 40_960
    assert r["weight_bytes_per_gpu"] == 18_163_433_472
    bad = make("roofline", {"model": "qwen2.5-7b", "gpu": "H100-SXM", "tp": "8"}).run()
    assert not bad["fits"] and "cannot be split over 8 GPUs" in bad["fit_note"] and "prefill_s" not in bad


def test_tp_reaches_the_engine():
    base = {"scenario": "A", "rate": "4", "requests": "40", "compare": "none"}
    one, two = make("engine", base).run(), make("engine", {**base, "tp": "2"}).run()
    # OPT-13B-like on 2 A100-40GB: (36 GB - 13.1 GB) per GPU over 409,600 B of KV per token each
    assert two["kv_capacity_tokens"] == (36e9 - 13_097_492_480) // 409_600 == 55_914
    assert one["kv_capacity_tokens"] == 11_969
    assert two["preemptions"] <= one["preemptions"]
