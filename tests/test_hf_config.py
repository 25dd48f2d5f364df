"""Published config.json files load as published (issue "Whatever a user brings", item 1): each file of
tests/data/model_configs/ (aiconfigurator-core 0.12.0's copies of the Hugging Face files) loads with the
figures listed here, or is refused with one line naming the feature kvweb does not model; one model of
each architecture checked by hand; the shipped configs are the published files."""

import json
from pathlib import Path

import pytest

import kvweb.gpu
from kvweb.gpu import MODELS
from kvweb.gpu.hf_config import DEFAULTS, FEATURES, MAX_CONFIG, MAX_FILE, READ, from_config, load_config
from kvweb.gpu.layers import Attention, LatentAttention, LinearAttention
from kvweb.lab import ParamError

CORPUS = Path(__file__).parent / "data" / "model_configs"
CONFIGS = Path(kvweb.gpu.__file__).parent / "configs"

EXPECTED = {  # file (without _config.json): (layers, parameters in 1e9, KV bytes per token) or the refused field
    "MiniMaxAI--MiniMax-M2.5": (62, 228.69, 253952),
    "MiniMaxAI--MiniMax-M2.7": (62, 228.69, 253952),
    "MiniMaxAI--MiniMax-M3": "sparse_attention_config",
    "Qwen--Qwen3-0.6B": (28, 0.60, 114688),
    "Qwen--Qwen3-1.7B": (28, 1.72, 114688),
    "Qwen--Qwen3-235B-A22B-FP8": (94, 235.09, 192512),
    "Qwen--Qwen3-235B-A22B": (94, 235.09, 192512),
    "Qwen--Qwen3-30B-A3B-FP8": (48, 30.53, 98304),
    "Qwen--Qwen3-30B-A3B": (48, 30.53, 98304),
    "Qwen--Qwen3-32B-FP8-Static-PerTensor": (64, 32.76, 262144),
    "Qwen--Qwen3-32B-FP8": (64, 32.76, 262144),
    "Qwen--Qwen3-32B": (64, 32.76, 262144),
    "Qwen--Qwen3-8B": (36, 8.19, 147456),
    "Qwen--Qwen3-Coder-480B-A35B-Instruct": (62, 480.15, 253952),
    "Qwen--Qwen3-VL-235B-A22B-Instruct": (94, 235.09, 192512),
    "Qwen--Qwen3-VL-2B-Instruct": (28, 1.72, 114688),
    "Qwen--Qwen3-VL-30B-A3B-Instruct": (48, 30.53, 98304),
    "Qwen--Qwen3-VL-32B-Instruct": (64, 32.76, 262144),
    "Qwen--Qwen3-VL-32B-Thinking": (64, 32.76, 262144),
    "Qwen--Qwen3-VL-4B-Instruct": (36, 4.02, 147456),
    "Qwen--Qwen3-VL-8B-Instruct": (36, 8.19, 147456),
    "Qwen--Qwen3.5-122B-A10B": (48, 122.11, 24576),
    "Qwen--Qwen3.5-27B": (64, 26.90, 65536),
    "Qwen--Qwen3.5-35B-A3B": (40, 34.66, 20480),
    "Qwen--Qwen3.5-397B-A17B": (60, 396.35, 30720),
    "XiaomiMiMo--MiMo-7B-Base": (36, 7.62, 147456),
    "XiaomiMiMo--MiMo-V2-Flash": "swa_num_key_value_heads",
    "deepseek-ai--DeepSeek-R1": (61, 671.03, 70272),
    "deepseek-ai--DeepSeek-V3.2": "index_topk",
    "deepseek-ai--DeepSeek-V3": (61, 671.03, 70272),
    "deepseek-ai--DeepSeek-V4-Flash": "compress_ratios",
    "deepseek-ai--DeepSeek-V4-Pro": "compress_ratios",
    "google--gemma-4-26B-A4B": "global_head_dim",
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct": "attention_chunk_size",
    "meta-llama--Llama-4-Scout-17B-16E-Instruct": "attention_chunk_size",
    "meta-llama--Meta-Llama-3.1-405B": (126, 405.85, 516096),
    "meta-llama--Meta-Llama-3.1-70B": (80, 70.55, 327680),
    "meta-llama--Meta-Llama-3.1-8B": (32, 8.03, 131072),
    "mistralai--Mixtral-8x22B-v0.1": (56, 140.62, 229376),
    "mistralai--Mixtral-8x7B-v0.1": (32, 46.70, 131072),
    "moonshotai--Kimi-K2-Instruct": (61, 1026.41, 70272),
    "moonshotai--Kimi-K2.5": (61, 1026.41, 70272),
    "moonshotai--Kimi-K3": "linear_attn_config",
    "nvidia--DeepSeek-V3.1-NVFP4": (61, 671.03, 70272),
    "nvidia--DeepSeek-V3.2-NVFP4": "index_topk",
    "nvidia--DeepSeek-V4-Flash-NVFP4": "compress_ratios",
    "nvidia--DeepSeek-V4-Pro-NVFP4": "compress_ratios",
    "nvidia--GLM-5-NVFP4": "index_topk",
    "nvidia--GLM-5.1-NVFP4": "index_topk",
    "nvidia--GLM-5.2-NVFP4": "index_topk",
    "nvidia--GLM-5.3-NVFP4": "index_topk",
    "nvidia--Gemma-4-26B-A4B-NVFP4": "global_head_dim",
    "nvidia--Gemma-4-31B-IT-NVFP4": "global_head_dim",
    "nvidia--Kimi-K2.5-NVFP4": (61, 1026.41, 70272),
    "nvidia--Kimi-K2.6-NVFP4": (61, 1026.41, 70272),
    "nvidia--Kimi-K2.7-Code-NVFP4": (61, 1026.41, 70272),
    "nvidia--Llama-3.1-70B-Instruct-FP8": (80, 70.55, 327680),
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1": "block_configs",
    "nvidia--MiniMax-M2.5-NVFP4": (62, 228.69, 253952),
    "nvidia--MiniMax-M2.7-NVFP4": (62, 228.69, 253952),
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "hybrid_override_pattern",
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": "hybrid_override_pattern",
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8": "hybrid_override_pattern",
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4": "hybrid_override_pattern",
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": "layers_block_type",
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8": "layers_block_type",
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4": "layers_block_type",
    "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4": "layers_block_type",
    "nvidia--Nemotron-H-56B-Base-8K": "hybrid_override_pattern",
    "nvidia--Qwen3-235B-A22B-NVFP4": (94, 235.09, 192512),
    "nvidia--Qwen3.5-122B-A10B-NVFP4": (48, 122.11, 24576),
    "nvidia--Qwen3.5-397B-A17B-NVFP4": (60, 396.35, 30720),
    "openai--gpt-oss-120b": (36, 116.79, 36864),
    "openai--gpt-oss-20b": (24, 20.91, 24576),
    "sgl-project--DeepSeek-V4-Flash-FP8": "compress_ratios",
    "sgl-project--DeepSeek-V4-Pro-FP8": "compress_ratios",
    "stepfun-ai--Step-3.7-Flash-FP8": (45, 195.83, 49152),
    "stepfun-ai--Step-3.7-Flash": (45, 195.83, 49152),
    "zai-org--GLM-5-FP8": "index_topk",
    "zai-org--GLM-5.1-FP8": "index_topk",
    "zai-org--GLM-5.1": "index_topk",
    "zai-org--GLM-5.2-FP8": "index_topk",
    "zai-org--GLM-5.2": "index_topk",
    "zai-org--GLM-5.3-FP8": "index_topk",
    "zai-org--GLM-5.3": "index_topk",
    "zai-org--GLM-5": "index_topk",
}


def _text(name: str) -> str:
    return (CORPUS / f"{name}_config.json").read_text()


def _load(name: str, as_name: str | None = None):
    return load_config(_text(name), as_name or name, max_chars=MAX_FILE)


def test_the_table_lists_every_file_of_the_corpus():
    assert sorted(p.name[: -len("_config.json")] for p in CORPUS.glob("*_config.json")) == sorted(EXPECTED)
    assert sum(isinstance(v, tuple) for v in EXPECTED.values()) == 48 and len(EXPECTED) == 86


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_published_config_loads_or_is_refused_naming_the_feature(name):
    expected = EXPECTED[name]
    if isinstance(expected, tuple):
        spec = _load(name).spec
        assert (spec.layers, round(spec.params / 1e9, 2), spec.kv_bytes_per_token) == expected
    else:
        with pytest.raises(ParamError) as err:
            _load(name)
        line = str(err.value)
        assert "\n" not in line and line.startswith(f"config.json: {expected} (") and line.endswith(" is not modelled")


def test_a_field_of_no_known_model_is_ignored_and_listed_and_one_that_is_read_is_not():
    config = json.loads(_text("meta-llama--Meta-Llama-3.1-8B"))
    loaded = load_config(json.dumps({**config, "flux_capacitor": 1}), "llama-3.1-8b")
    assert loaded.spec == MODELS["llama-3.1-8b"] and "flux_capacitor" in loaded.ignored
    assert not set(loaded.ignored) & READ and loaded.defaulted == ()


def test_the_paste_limit_stays_and_a_file_may_be_longer():
    text = _text("Qwen--Qwen3-235B-A22B-FP8")  # 12,910 characters: its quantization block
    with pytest.raises(ParamError, match=f"12910 characters; at most {MAX_CONFIG} are read"):
        from_config(text)
    assert from_config(text, "q", max_chars=MAX_FILE) == from_config(_text("Qwen--Qwen3-235B-A22B"), "q")


# ---- by hand, one model of each architecture


def test_dense_gqa_llama_3_1_8b():
    spec = _load("meta-llama--Meta-Llama-3.1-8B", "llama-3.1-8b").spec
    assert spec == MODELS["llama-3.1-8b"]
    assert spec.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131_072  # K and V, 32 layers, 8 KV heads of 128, 2 B
    # embedding + head 2 x 128256 x 4096; per layer q, o 4096^2, k, v 4096 x 1024, MLP 3 x 4096 x 14336
    by_hand = 2 * 128256 * 4096 + 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    # the checkpoint's 8,030,261,248 less its 65 RMSNorm vectors of 4096 (kvweb leaves norms out)
    assert spec.params == by_hand == 8_030_261_248 - 65 * 4096


def test_moe_qwen3_235b_a22b():
    spec = _load("Qwen--Qwen3-235B-A22B").spec
    assert spec.kv_bytes_per_token == 2 * 94 * 4 * 128 * 2 == 192_512
    assert spec.params == pytest.approx(235e9, rel=0.005) and spec.active_params == pytest.approx(22e9, rel=0.01)
    assert (spec.experts, spec.active_experts, spec.d_ff) == (128, 8, 1536)


def test_moe_mixtral_8x7b_is_the_built_in_one():
    spec = _load("mistralai--Mixtral-8x7B-v0.1", "mixtral-8x7b").spec
    assert spec == MODELS["mixtral-8x7b"]
    assert spec.params == pytest.approx(46.7e9, rel=0.001)  # the card's 46.7B


def test_mla_deepseek_v3_published_is_exactly_the_shipped_model():
    loaded = _load("deepseek-ai--DeepSeek-V3", "deepseek-v3")
    assert loaded.spec == MODELS["deepseek-v3"]
    assert loaded.spec.kv_bytes_per_token == 61 * (512 + 64) * 2 == 70_272  # one latent + rope key per layer
    assert set(loaded.spec.attention) == {LatentAttention(512, 64, 1536, 128, 128)}
    assert loaded.spec.params == pytest.approx(671e9, rel=0.001)  # 671B without the 11.5B MTP module
    assert "auto_map" in loaded.ignored and loaded.defaulted == ()


def test_sliding_window_gemma_3_published_is_exactly_the_shipped_model():
    loaded = load_config((CONFIGS / "gemma-3-27b.json").read_text(), "gemma-3-27b")
    assert loaded.spec == MODELS["gemma-3-27b"]
    # the published text_config leaves out what equals Gemma3TextConfig's defaults
    assert loaded.defaulted == ("sliding_window_pattern", "tie_word_embeddings", "vocab_size")
    assert DEFAULTS["gemma3_text"]["vocab_size"] == 262_208 and "vision_config" in loaded.ignored
    kinds = [a.window for a in loaded.spec.attention]
    assert kinds.count(0) == 10 and kinds.count(1024) == 52 and kinds[5] == kinds[11] == 0
    assert loaded.spec.kv_bytes_per_token == 10 * 2 * 16 * 128 * 2 == 81_920  # growing part: the 10 global layers
    assert loaded.spec.params == pytest.approx(27.0e9, rel=0.002)


def test_sliding_window_gpt_oss_120b():
    spec = _load("openai--gpt-oss-120b", "gpt-oss-120b").spec
    assert spec == MODELS["gpt-oss-120b"]
    assert spec.kv_bytes_per_token == 18 * 2 * 8 * 64 * 2 == 36_864  # the 18 full layers; 18 window layers of 128
    assert spec.params == pytest.approx(116.8e9, rel=0.001)  # the card's 116.8B


def test_linear_hybrid_qwen3_5_35b_a3b():
    spec = _load("Qwen--Qwen3.5-35B-A3B").spec
    full = [a for a in spec.attention if isinstance(a, Attention)]
    linear = [a for a in spec.attention if isinstance(a, LinearAttention)]
    assert len(full) == 10 and len(linear) == 30 and set(full) == {Attention(2, 256, gate=True)}
    assert spec.kv_bytes_per_token == 10 * 2 * 2 * 256 * 2 == 20_480
    # DeltaNet state per request and layer: 32 value heads x 128 x 128, plus the conv state (3 x (2 x 16 x 128 + 32 x 128))
    assert linear[0].state_elements == 32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128) == 548_864
    assert spec.params == pytest.approx(35e9, rel=0.015)  # 35B with its vision tower (left out here)
    assert spec.active_params == pytest.approx(3e9, rel=0.2)


# ---- the shipped configs are the published files


@pytest.mark.parametrize(
    "shipped, published",
    [
        ("deepseek-v3", "deepseek-ai--DeepSeek-V3"),
        ("gpt-oss-120b", "openai--gpt-oss-120b"),
        ("gpt-oss-20b", "openai--gpt-oss-20b"),
        ("qwen3-32b", "Qwen--Qwen3-32B"),
        ("qwen3-235b-a22b", "Qwen--Qwen3-235B-A22B"),
    ],
)
def test_a_shipped_config_is_the_published_file_byte_for_byte(shipped, published):
    assert (CONFIGS / f"{shipped}.json").read_bytes() == (CORPUS / f"{published}_config.json").read_bytes()


def test_every_shipped_config_fits_the_paste_limit():
    assert all(len(p.read_text()) <= MAX_CONFIG for p in CONFIGS.glob("*.json"))


@pytest.mark.parametrize("field", list(FEATURES))
def test_each_refused_feature_is_one_line_naming_it(field):
    config = {**json.loads(_text("meta-llama--Meta-Llama-3.1-8B")), field: 1}
    with pytest.raises(ParamError, match=rf"^config\.json: {field} \(.+\) is not modelled$"):
        from_config(json.dumps(config))


def test_lightning_attention_layers_and_values_of_another_size_are_refused():
    base = json.loads(_text("MiniMaxAI--MiniMax-M2.7"))
    with pytest.raises(ParamError, match="attn_type_list"):
        from_config(json.dumps({**base, "attn_type_list": [0] + base["attn_type_list"][1:]}))
    with pytest.raises(ParamError, match="v_head_dim"):
        from_config(json.dumps({**base, "v_head_dim": 64}))
