"""Memory as the engine counts it (kvweb/gpu/engine_memory.py): a measured run's capacity is what vLLM
or SGLang would log, computed here by hand from the terms; the roofline's is unchanged."""

import pytest

from kvweb.gpu.cost import CostModel
from kvweb.gpu.engine_memory import sglang_default_fraction
from kvweb.gpu.measured_cost import MeasuredCostModel
from kvweb.gpu.specs import GPUS, MODELS

GIB = 2**30
H100 = GPUS["H100-SXM"]


def test_the_cards_report_their_memory_and_the_datasheet_figures_stay():
    assert [g.hbm_bytes for g in GPUS.values()] == [40e9, 80e9, 80e9, 141e9]
    assert H100.reported_bytes == 85_520_809_984 == 81_559 * 2**20  # nvidia-smi: 81559MiB
    assert GPUS["H200"].reported_bytes == 150_754_820_096 == 143_771 * 2**20
    assert GPUS["A100-80GB"].reported_bytes == 85_899_345_920 == 81_920 * 2**20
    assert H100.cuda_bytes == round(79.22 * GIB)  # torch.cuda.mem_get_info: less than nvidia-smi's total


def test_llama_70b_fp8_fits_one_h100_as_vllm_counts_and_not_under_the_roofline():
    roofline = CostModel(H100, MODELS["llama-3.1-70b"], weight_precision="fp8")
    assert not roofline.fits and roofline.kv_capacity_tokens == 0
    cost = MeasuredCostModel(H100, MODELS["llama-3.1-70b"], weight_precision="fp8", engine="vllm")
    # by hand: 80 layers x (attention 8192 x 8192 x 2 + 8192 x 1024 x 2 + MLP 3 x 8192 x 28672) at 1 B,
    # embedding and LM head 2 x 128256 x 8192 at 2 B
    weights = 80 * (8192 * 8192 * 2 + 8192 * 1024 * 2 + 3 * 8192 * 28672) + 2 * 128256 * 8192 * 2
    assert weights == 72_653_733_888
    requested = 0.9 * round(79.22 * GIB)
    # profile run of 8192 tokens: hidden 8192 + QKV (64 + 2 x 8) x 128 + gate and up 2 x 28672, 2 B each;
    # the sampler's float32 logits, 256 x 128256 x 4 B
    activation = 8192 * (8192 + 80 * 128 + 2 * 28672) * 2 + 256 * 128256 * 4
    non_torch, graphs = int(0.2 * GIB), int(0.5 * GIB)
    kv = requested - weights - activation - non_torch - graphs
    assert 1.6 * GIB < kv < 1.7 * GIB  # "Available KV cache memory: 1.65 GiB"
    per_token = 80 * 2 * 8 * 128 * 2  # K and V, 80 layers, 8 KV heads of 128, 2 B
    tokens = int(kv // per_token) // 16 * 16  # whole blocks of 16
    assert cost.fits and cost.kv_capacity_tokens == tokens == 5424
    assert cost.kv_bytes_free_per_gpu == pytest.approx(kv)
    report = cost.fit()
    assert report["fits"] and report["fit_note"] is None
    assert {
        k: report["engine_memory"][k] for k in ("total", "requested", "weights", "activation", "non_torch", "graphs")
    } == pytest.approx(
        {
            "total": round(79.22 * GIB),
            "requested": requested,
            "weights": weights,
            "activation": activation,
            "non_torch": non_torch,
            "graphs": graphs,
        }
    )
    assert report["engine_memory"]["kv"] == pytest.approx(kv)
    # FP8 KV holds twice the tokens
    fp8 = MeasuredCostModel(H100, MODELS["llama-3.1-70b"], weight_precision="fp8", kv_precision="fp8")
    assert fp8.kv_capacity_tokens == int(kv // (per_token // 2)) // 16 * 16


def test_llama_8b_on_an_h100_by_hand():
    weights = 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336) * 2 + 2 * 128256 * 4096 * 2
    assert weights == 16_059_990_016  # vLLM logs "model weights take 14.99GiB" (with the norms)
    total, per_token = round(79.22 * GIB), 32 * 2 * 8 * 128 * 2
    activation = 8192 * (4096 + 48 * 128 + 2 * 14336) * 2 + 256 * 128256 * 4
    kv = 0.9 * total - weights - activation - int(0.2 * GIB) - int(0.5 * GIB)
    vllm = MeasuredCostModel(H100, MODELS["llama-3.1-8b"], engine="vllm")
    assert vllm.kv_capacity_tokens == int(kv // per_token) // 16 * 16 == 449_936
    assert 54.9 * GIB < kv < 55.0 * GIB  # public vLLM logs of this model on an H100 print 54.4-55.0 GiB
    # SGLang: mem_fraction_static x (total - CUDA context - NCCL, none on one GPU) - weights, in tokens
    sglang = MeasuredCostModel(H100, MODELS["llama-3.1-8b"], engine="sglang")
    kv = 0.9 * (total - int(0.5 * GIB)) - weights
    assert sglang.kv_capacity_tokens == int(kv // per_token) == 457_858
    memory = sglang.fit()["engine_memory"]
    assert memory["activation"] == memory["graphs"] == 0 and memory["default_fraction"] == 0.835


def test_a_smaller_token_budget_leaves_more_for_kv_and_tp_adds_nccl():
    small = MeasuredCostModel(H100, MODELS["llama-3.1-8b"], max_num_batched_tokens=2048)
    big = MeasuredCostModel(H100, MODELS["llama-3.1-8b"])
    assert small.kv_bytes_free_per_gpu - big.kv_bytes_free_per_gpu == pytest.approx(
        (8192 - 2048) * (4096 + 48 * 128 + 2 * 14336) * 2
    )
    tp2 = MeasuredCostModel(H100, MODELS["llama-3.1-70b"], tp=2)
    assert tp2.engine_memory.non_torch == int(0.2 * GIB) + 358_612_992  # aiconfigurator's nccl_mem at tp 2
    # split: QKV (32 + 2 x 4) x 128 and gate/up 2 x 28672 / 2 per GPU; the hidden states and logits whole
    assert tp2.engine_memory.activation == 8192 * (8192 + 40 * 128 + 28672) * 2 + 256 * 128256 * 4


def test_a_model_too_big_says_so_in_the_engines_terms():
    cost = MeasuredCostModel(H100, MODELS["llama-3.1-405b"], weight_precision="fp8", tp=2)
    report = cost.fit()
    assert not report["fits"] and cost.kv_capacity_tokens == 0
    assert "as vLLM counts memory" in report["fit_note"] and "gpu_memory_utilization 0.9" in report["fit_note"]


def test_sglang_default_fraction():
    # reserved = 512 + 1.5 x 8192 + 2 x 256 + 1024 / 8 MiB = 13440 MiB of 81559
    assert sglang_default_fraction(H100, 1) == round((81559 - 13440) / 81559, 3) == 0.835
    assert sglang_default_fraction(H100, 8) == round((81559 - (512 + 12288 + 1024 + 1024)) / 81559, 3)
    assert sglang_default_fraction(GPUS["H200"], 1) == round((143771 - 13440) / 143771, 3)


@pytest.mark.parametrize(
    "gpu, model, kw, tokens, usable",
    [
        ("H100-SXM", "llama-3.1-8b", {}, 426_788, 72e9),
        ("H100-SXM", "llama-3.1-70b", {"weight_precision": "fp8"}, 0, 72e9),
        ("H100-SXM", "llama-3.1-70b", {"tp": 4}, 448_288, 72e9),
        ("A100-80GB", "qwen2.5-7b", {}, 989_980, 72e9),
        ("H200", "mixtral-8x7b", {"tp": 2, "kv_precision": "fp8"}, 2_447_432, 126.9e9),
        ("A100-40GB", "opt-13b-like", {}, 11_969, 36e9),
    ],
)
def test_the_roofline_is_unchanged(gpu, model, kw, tokens, usable):
    """The figures CostModel gave before this accounting existed (decimal HBM x 0.9 - weights)."""
    cost = CostModel(GPUS[gpu], MODELS[model], **kw)
    assert cost.kv_capacity_tokens == tokens and cost.usable_bytes == usable
    assert "engine_memory" not in cost.fit()
