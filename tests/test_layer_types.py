"""Today's models layer by layer (issue 27 parts 1, 2, 4; issue 26's experts and FP8 head): hand
calculations per layer type, config.json round trips and refusals, tensor and data parallelism,
conservation, the lab's CLI and share URL."""

import json
from pathlib import Path
from urllib.parse import urlencode, parse_qsl

import pytest
from hypothesis import given, settings, strategies as st

import kvweb.gpu
import kvweb.labs  # noqa: F401
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.gpu.hf_config import MAX_CONFIG, from_config
from kvweb.gpu.layers import Attention, kept_tokens
from kvweb.lab import LABS, ParamError
from kvweb.parsing import make
from kvweb.query import from_query, to_query
from lab_json import cli_result

H100, H200 = GPUS["H100-SXM"], GPUS["H200"]
CONFIGS = Path(kvweb.gpu.__file__).parent / "configs"  # in the package: the wheel ships them
TODAY = [
    "deepseek-v3",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "gemma-3-27b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "qwen3-next-80b-a3b",
]


def test_deepseek_v3_keeps_one_latent_per_token_whole_on_every_gpu():
    m = MODELS["deepseek-v3"]
    assert m.kv_bytes_per_token == 61 * (512 + 64) * 2 == 70_272
    tp8 = CostModel(H200, m, tp=8, weight_precision="fp8")
    assert tp8.kv_bytes_per_token_per_gpu == 70_272  # not split by heads
    assert tp8.kv_bytes_per_token == 8 * 70_272  # the group holds it 8 times
    dp = CostModel(H200, m, tp=8, weight_precision="fp8", attention_dp=True)
    assert dp.kv_bytes_per_token_per_gpu == dp.kv_bytes_per_token == 70_272  # one copy, on its request's GPU
    # data-parallel attention: each GPU holds its own requests, so the group holds 8 times the requests
    # (less the attention weights every GPU now holds whole)
    assert dp.capacity_requests(32768, 16) == 8 * (dp.kv_bytes_free_per_gpu // (70_272 * 32768))
    assert dp.weight_bytes_per_gpu - tp8.weight_bytes_per_gpu == pytest.approx(m.attention_params * 7 / 8)
    assert dp.capacity_requests(32768, 16) > 6 * tp8.capacity_requests(32768, 16) > 0  # 112 against 18 requests


def test_gpt_oss_120b_at_32k_full_layers_grow_window_layers_keep_128_tokens():
    cm = CostModel(H100, MODELS["gpt-oss-120b"])
    per_layer_token = 2 * 8 * 64 * 2
    assert cm.kv_bytes_per_token_per_gpu == 18 * per_layer_token == 36_864
    assert kept_tokens(32768, 128, 16) == 128  # 8 whole blocks
    assert kept_tokens(32770, 128, 16) == 144  # the window starts inside a block: 9 blocks kept
    assert cm.kv_bytes_per_sequence_per_gpu(32768, 16) == (18 * 32768 + 18 * 128) * per_layer_token == 1_212_678_144


def test_gemma_3_27b_five_local_layers_of_1024_to_one_global():
    m = MODELS["gemma-3-27b"]
    kinds = [a.kind for a in m.attention]
    assert kinds.count("full") == 10 and kinds.count("sliding") == 52 and kinds[5] == "full"
    per_layer_token = 2 * 16 * 128 * 2
    cm = CostModel(H200, m)
    assert cm.kv_bytes_per_sequence_per_gpu(32768, 16) == (10 * 32768 + 52 * 1024) * per_layer_token == 3_120_562_176
    # below the window every layer keeps every token (in whole blocks)
    assert cm.kv_bytes_per_sequence_per_gpu(1000, 16) == 62 * 1008 * per_layer_token


def test_qwen3_next_keeps_a_fixed_state_in_three_layers_of_four():
    m = MODELS["qwen3-next-80b-a3b"]
    state = 32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 3  # recurrent + convolution elements per layer
    assert state == 548_864
    cm = CostModel(H200, m)
    assert cm.kv_bytes_per_token_per_gpu == 12 * 2 * 2 * 256 * 2 == 24_576
    assert cm.kv_bytes_per_sequence_per_gpu(1, 16) == (12 * 16 * 2 * 2 * 256 + 36 * state) * 2
    # the state does not grow: two contexts differ by the full layers alone
    assert cm.kv_bytes_per_sequence_per_gpu(65536, 16) - cm.kv_bytes_per_sequence_per_gpu(32768, 16) == 32768 * 24_576


def test_decode_reads_at_most_the_window_and_the_absorbed_latent():
    oss = CostModel(H100, MODELS["gpt-oss-20b"])
    parts = {p["kind"]: p for p in oss.decode_attention(4, 4 * 10_000)}
    assert parts["sliding"]["kv_bytes_read"] == 12 * 4 * 128 * 2048
    assert parts["full"]["kv_bytes_read"] == 12 * 40_000 * 2048
    assert parts["sliding"]["attention_flops"] == 4.0 * 12 * 64 * 64 * 4 * 128
    ds = CostModel(H200, MODELS["deepseek-v3"], tp=8, weight_precision="fp8")
    (latent,) = ds.decode_attention(1, 1000)
    assert latent["kv_bytes_read"] == 61 * 1000 * 576 * 2
    assert latent["attention_flops"] == 2.0 * 61 * (128 / 8) * (576 + 512) * 1000


def test_mixtral_decode_reads_the_experts_a_batch_touches():
    """Issue 26: E (1 - (1 - k/E)^B) distinct experts; at batch 32 nearly all 8."""
    cm = CostModel(H200, MODELS["mixtral-8x7b"])
    assert cm.experts_touched(1) == 2 and cm.experts_touched(32) == pytest.approx(8 * (1 - 0.75**32))
    expert = 32 * 3 * 4096 * 14336
    one = cm.step_weight_bytes(1)
    assert cm.step_weight_bytes(32) - one == pytest.approx((8 * (1 - 0.75**32) - 2) * expert * 2)
    assert cm.decode_counts(0, 0)[1] == cm.decode_counts(1, 0)[1] == one  # the engines' affine price: k experts


def test_fp8_keeps_the_embedding_and_head_in_16_bits_so_70b_does_not_fit_one_h100():
    m = MODELS["llama-3.1-70b"]
    cm = CostModel(H100, m, weight_precision="fp8")
    assert cm.weight_bytes == (m.params - 2 * 128256 * 8192) + 2 * 128256 * 8192 * 2 == 72_653_733_888
    assert not cm.fits  # 72.65 GB of weights, 72.0 GB usable
    assert CostModel(H100, m, weight_precision="16-bit").weight_bytes == m.params * 2


@pytest.mark.parametrize("name", TODAY)
def test_each_shipped_config_json_parses_to_the_built_in_model(name):
    assert from_config((CONFIGS / f"{name}.json").read_text(), name) == MODELS[name]


def test_a_plain_config_gives_an_all_full_attention_model_equal_to_the_built_in_one():
    llama = {
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "rope_theta": 500000.0,
    }
    assert from_config(json.dumps(llama), "llama-3.1-8b") == MODELS["llama-3.1-8b"]


def _oss(**change):
    config = json.loads((CONFIGS / "gpt-oss-20b.json").read_text())
    config.update(change)
    return json.dumps({k: v for k, v in config.items() if v is not ...})


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "config.json is not JSON"),
        ("[1]", "expected a JSON object"),
        (
            _oss(index_topk=2048),
            "index_topk (sparse attention: an indexer picks the keys each query reads) is not modelled",
        ),
        (_oss(num_hidden_layers=23), "layer_types must list 23 layer types"),
        (_oss(layer_types=["sliding_attention", "chunked_attention"] * 12), "layer_types has 'chunked_attention'"),
        (_oss(sliding_window=..., model_type=...), "sliding_window is missing"),  # gpt_oss's default is 128
        (_oss(num_key_value_heads=7), "num_key_value_heads (7) must divide num_attention_heads (64)"),
        (_oss(num_experts_per_tok=40, experts_per_token=40), "num_experts_per_tok (40) is more than the 32 experts"),
        (_oss(num_experts=64), "num_local_experts and num_experts disagree"),
        (_oss(experts_per_token=2), "num_experts_per_tok and experts_per_token disagree"),
        (_oss(hidden_size="2880"), "hidden_size is '\"2880\"'; expected an integer"),
        (
            _oss(num_hidden_layers=10**6, layer_types=...),
            "num_hidden_layers is '1000000'; expected an integer from 1 to 1024",
        ),
        ("{" + " " * MAX_CONFIG + "}", f"at most {MAX_CONFIG} are read"),
        ("[" * 2000 + "]" * 2000, "nested 2000 deep; at most 8 levels are read"),  # never a RecursionError
        ('{"num_hidden_layers": ' + "9" * 4400 + "}", "an integer of 4400 digits; at most 18 are read"),
    ],
)
def test_a_bad_config_gets_one_message_naming_the_field(text, message):
    with pytest.raises(ParamError) as err:
        from_config(text)
    assert message in str(err.value) and "\n" not in str(err.value)


@settings(max_examples=40, deadline=None)
@given(
    model=st.sampled_from(TODAY + ["llama-3.1-70b", "mixtral-8x7b"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    dp=st.booleans(),
    context=st.integers(1, 300_000),
    block=st.sampled_from([1, 16, 64]),
)
def test_conservation_layers_sum_to_the_sequence_and_capacity_fits_the_memory(model, tp, dp, context, block):
    cm = CostModel(H200, MODELS[model], tp=tp, attention_dp=dp, weight_precision="fp8", ignore_weights=True)
    layers = cm.kv_bytes_per_layer(context, block)
    assert sum(layers) == cm.kv_bytes_per_sequence_per_gpu(context, block)
    assert cm.kv_bytes_per_sequence_per_gpu(context + block, block) >= cm.kv_bytes_per_sequence_per_gpu(context, block)
    per_gpu = cm.capacity_requests(context, block) // (tp if dp else 1)
    assert per_gpu * sum(layers) <= cm.kv_bytes_free_per_gpu < (per_gpu + 1) * sum(layers)
    # the growing part alone: full and latent layers keep every token in whole blocks
    growing = sum(b for b, a in zip(layers, cm.model.attention) if not a.window and not a.state_elements)
    assert growing == cm.kv_bytes_per_token_per_gpu * kept_tokens(context, 0, block)


def test_an_existing_model_is_all_full_attention_of_its_own_shape():
    m = MODELS["llama-3.1-8b"]
    assert m.groups == [(Attention(8, 128), 32)] and m.kv_bytes_per_token == 131_072


def test_the_lab_cli_json_equals_the_library_run():
    result = cli_result("layer-memory", {"model": "gemma-3-27b", "gpu": "H200"})
    assert result["model"] == "gemma-3-27b"


def test_the_lab_reports_per_sequence_bytes_capacity_and_layers():
    r = make("layer-memory", {"model": "gpt-oss-120b", "gpu": "H200", "tp": "8", "context": "32768"}).run()
    assert r["kv_bytes_per_sequence_total"] == 1_212_678_144 and r["kv_bytes_per_token_total"] == 36_864
    assert r["layers"]["kind"][:2] == ["sliding", "full"] and len(r["layers"]["bytes_per_gpu"]) == 36
    assert r["growth"]["context"][0] == 0 and r["growth"]["context"][-1] == 32768
    assert r["growth"]["full"][-1] + r["growth"]["sliding"][-1] == r["kv_bytes_per_sequence_per_gpu"]
    by_model = {m["model"]: m for m in r["models"]}
    assert by_model["gpt-oss-120b"]["capacity_requests"] == r["capacity_requests"] > 0
    assert set(TODAY) <= set(by_model)


def test_a_pasted_config_round_trips_through_the_share_url():
    text = (CONFIGS / "deepseek-v3.json").read_text()
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    lab = make(
        "layer-memory", {"model": "config", "config": compact, "gpu": "H200", "tp": "8", "weight_precision": "fp8"}
    )
    search = urlencode(to_query(lab))
    assert len(search) < 4000  # a whole DeepSeek-V3 config.json: about 2 thousand characters of URL
    back, messages = from_query(dict(parse_qsl(search)))
    assert messages == [] and back.values() == lab.values()
    assert back.run()["kv_bytes_per_token_per_gpu"] == 70_272
    with pytest.raises(ParamError, match="config: empty"):
        make("layer-memory", {"model": "config"})


def test_data_parallel_attention_holds_the_attention_weights_on_every_gpu():
    m = MODELS["deepseek-v3"]
    dp = CostModel(H200, m, tp=8, weight_precision="fp8", attention_dp=True)
    plain = CostModel(H200, m, tp=8, weight_precision="fp8")
    assert dp.weight_bytes == pytest.approx(dp.weight_bytes_per_gpu * 8)  # the group's, every copy
    assert dp.weight_bytes - plain.weight_bytes == m.attention_params * 1 * 7  # 7 more copies at 1 B
    assert m.attention_params == 61 * (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168)


@settings(max_examples=40, deadline=None)
@given(window=st.integers(1, 300), n=st.integers(1, 400), cached=st.integers(0, 600))
def test_a_window_layer_prefills_at_most_window_keys_per_query(window, n, cached):
    """Closed form against the sum it stands for: token i sees min(cached + i, window) keys."""
    from kvweb.gpu import LLMSpec

    swa = LLMSpec("swa", 2, 512, 8, 2, 64, 1024, 1000, layer_types=(Attention(2, 64, window=window),) * 2)
    full = LLMSpec("full", 2, 512, 8, 2, 64, 1024, 1000)
    pairs = sum(min(cached + i, window) for i in range(1, n + 1))
    swa_flops, swa_bytes = CostModel(H100, swa).prefill_counts(n, cached)
    full_flops, full_bytes = CostModel(H100, full).prefill_counts(n, cached)
    attention = full_flops - CostModel(H100, full)._linear_flops(n, 1)
    assert swa_flops - CostModel(H100, swa)._linear_flops(n, 1) == pytest.approx(
        attention * pairs / (n * cached + n * (n + 1) / 2)
    )
    assert swa_bytes - full_bytes == (min(cached, window) - cached) * 2 * 2 * 2 * 64 * 2


def test_under_mxfp4_the_lab_compares_the_models_with_experts_and_gpt_oss_120b_fits_one_h100():
    result = LABS["layer-memory"](model="gpt-oss-120b", weight_precision="mxfp4", gpu="H100-SXM").run()
    assert result["fits"] and result["weight_bytes_per_gpu"] == 65_168_179_200
    assert [m["model"] for m in result["models"]] == [n for n, m in MODELS.items() if m.experts > 1]
    with pytest.raises(ParamError, match="^weight_precision mxfp4 quantizes routed experts only"):
        LABS["layer-memory"](model="llama-3.1-8b", weight_precision="mxfp4").run()


def test_a_linear_layers_state_stays_16_bit_under_an_fp8_kv_cache():
    """Qwen3-Next's gated DeltaNet state: 32 value heads x 128 x 128 recurrent + 3 conv steps x (2 x 16 key heads
    x 128 + 32 x 128) = 548,864 elements, 1,097,728 B at 16 bits, with an FP8 KV cache too (vLLM's
    mamba_cache_dtype auto); the gated-attention layers' KV halves."""
    m = MODELS["qwen3-next-80b-a3b"]
    b16, b8 = (CostModel(H200, m, kv_precision=kv).kv_bytes_per_layer(1000, 16) for kv in ("16-bit", "fp8"))
    assert b16[0] == b8[0] == 548_864 * 2
    assert b8[3] * 2 == b16[3] == 1008 * 2 * 2 * 256 * 2  # 1,008 tokens in whole blocks x K and V x 2 heads x 256 x 2 B


@pytest.mark.parametrize(
    "query, model",
    [
        ({"lab": "layer-memory", "model": "llama-3.1-8b"}, "llama-3.1-8b"),
        ({"lab": "roofline"}, "opt-13b-like"),
        ({"lab": "schedulers"}, "opt-13b-like"),
        ({"lab": "recovery"}, "llama-3-8b"),
        ({"lab": "prefill-savings"}, "llama-3-8b"),
    ],
)
def test_a_url_with_mxfp4_for_a_dense_model_opens_at_the_default_precision_with_one_message(query, model):
    restored, messages = from_query({**query, "weight_precision": "mxfp4"})
    assert restored.weight_precision == "16-bit"
    assert messages == [
        f"weight_precision mxfp4 quantizes routed experts only (as gpt-oss ships); {model} has none: "
        "use 16-bit, fp8, fp8-block, int8 or int4; using the defaults for weight_precision"
    ]
