"""A model from a Hugging Face config.json (issue 27): the fields that set its memory and work, so
a published config.json loads as published, or gets one message naming what is wrong or what
kvweb does not model.

Read: the shape (`num_hidden_layers`, `hidden_size`, `num_attention_heads`, `num_key_value_heads`,
`head_dim`, `intermediate_size`, `vocab_size`, `tie_word_embeddings`), each layer's attention
(`layer_types`, or Qwen3-Next's `full_attention_interval`, or Gemma 3's `sliding_window_pattern`,
or MLA's `kv_lora_rank` for every layer; a window needs `sliding_window`), MLA's ranks and dims,
gated DeltaNet's `linear_*` fields, and the experts (`num_local_experts` / `num_experts` /
`n_routed_experts`, `num_experts_per_tok`, `moe_intermediate_size`, `n_shared_experts`,
`shared_expert_intermediate_size` or MiniMax's `shared_intermediate_size`, `first_k_dense_replace`).
A multimodal config's `text_config` is the model (its fields over the file's own).

A field the file leaves out takes transformers' class default for the model_type (DEFAULTS: a
published file omits every field equal to it). A field that turns on something kvweb does not
model (FEATURES: sparse attention, Mamba layers, ...) is refused by name. Every other field is
ignored (RoPE, norms, token ids, quantization: the precision is chosen apart, vision and audio
towers, generation settings, and fields of no model known here) and listed in `Loaded.ignored`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvweb.gpu.layers import Attention, LatentAttention, LayerType, LinearAttention
from kvweb.gpu.specs import LLMSpec
from kvweb.lab import ParamError, shown
from kvweb.parsing import json_depth

MAX_CONFIG = 5000  # characters of a pasted config: every shipped config fits (gpt-oss-120b, the longest, is 2088 as
# published); percent-encoded at worst 3 characters each, the share URL stays under its 16,000 (app/route.py)
MAX_FILE = 100_000  # characters of a config read from a file (`max_chars`): quantized checkpoints list their
# unquantized modules (Qwen3-235B-A22B-FP8's is 12,910 characters)
MAX_DEPTH = 8  # nested objects and lists (a config needs 3: text_config > quantization_config > a list)
MAX_DIGITS = 18  # of a JSON integer
MAX_LAYERS = 1024

READ = {
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "tie_word_embeddings",
    "layer_types",
    "full_attention_interval",
    "sliding_window_pattern",
    "sliding_window",
    "use_sliding_window",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "linear_num_key_heads",
    "linear_key_head_dim",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "experts_per_token",
    "moe_intermediate_size",
    "n_shared_experts",
    "shared_expert_intermediate_size",
    "first_k_dense_replace",
    "moe_layer_freq",
    "decoder_sparse_step",
    "mlp_only_layers",
    "model_type",
    "text_config",
    "attn_output_gate",
    "shared_intermediate_size",
    "share_expert_dim",
    "attn_type_list",
    "interleave_moe_layer_step",
}
IGNORED = {  # no effect on memory or work in this model (norms, positions, routing details, token ids, dtypes)
    "architectures",
    "torch_dtype",
    "dtype",
    "transformers_version",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "rms_norm_eps",
    "layer_norm_eps",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "rope_local_base_freq",
    "partial_rotary_factor",
    "max_position_embeddings",
    "initial_context_length",
    "hidden_act",
    "hidden_activation",
    "attention_bias",
    "attention_dropout",
    "mlp_bias",
    "initializer_range",
    "use_cache",
    "quantization_config",
    "n_group",
    "topk_group",
    "routed_scaling_factor",
    "scoring_func",
    "topk_method",
    "norm_topk_prob",
    "num_nextn_predict_layers",
    "aux_loss_alpha",
    "seq_aux",
    "ep_size",
    "pretraining_tp",
    "swiglu_limit",
    "router_aux_loss_coef",
    "output_router_logits",
    "query_pre_attn_scalar",
    "final_logit_softcapping",
    "attn_logit_softcapping",
    "vision_config",
    "boi_token_index",
    "eoi_token_index",
    "image_token_index",
    "mm_tokens_per_image",
    "max_window_layers",
    "auto_map",
    "rotary_dim",
    "image_token_id",
    "video_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "audio_config",
    "qkv_bias",
    "use_qk_norm",
    "qk_norm_type",
    "mtp_num_hidden_layers",
    "mtp_use_dedicated_embeddings",
    "use_mtp",
    "num_mtp_modules",
    "mtp_transformer_layers",
    "mamba_ssm_dtype",
    "use_routing_bias",
    "use_moe_router_bias",
    "moe_router_scaling_factor",
    "_name_or_path",
}  # any other field not in READ or FEATURES is ignored too, and listed as such (Loaded.ignored)

# field -> what it turns on that kvweb does not model; checked in this order, the first one present (not null,
# false, 0 or empty) is the refusal
FEATURES = {
    "block_configs": "a different shape per layer, Nemotron-NAS",
    "hybrid_override_pattern": "Mamba-2 layers",
    "layers_block_type": "Mamba-2 layers",
    "linear_attn_config": "Kimi Delta Attention layers beside MLA",
    "compress_ratios": "compressed sparse attention",
    "index_topk": "sparse attention: an indexer picks the keys each query reads",
    "sparse_attention_config": "block-sparse attention",
    "swa_num_key_value_heads": "window layers with their own head shape",
    "global_head_dim": "full-attention layers with their own head shape",
    "num_kv_shared_layers": "layers that reuse another layer's KV",
    "attention_chunk_size": "chunked local attention",
    "moe_latent_size": "experts in a latent space",
}
ATTN_TYPES = {1}  # MiniMax's attn_type_list: 1 softmax attention, 0 lightning (linear) attention

# transformers' class defaults (5.25.0, the configuration_*.py of each model) for the fields read here, by the
# model_type of the config (a text_config's own): printed by scripts/derive_hf_defaults.py
DEFAULTS: dict[str, dict[str, Any]] = {
    "deepseek_v3": {
        "first_k_dense_replace": 3,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "kv_lora_rank": 512,
        "moe_intermediate_size": 2048,
        "n_shared_experts": 1,
        "num_attention_heads": 128,
        "num_hidden_layers": 61,
        "num_key_value_heads": 128,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "tie_word_embeddings": False,
        "v_head_dim": 128,
        "vocab_size": 129280,
    },
    "gemma3_text": {
        "head_dim": 256,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_attention_heads": 8,
        "num_hidden_layers": 26,
        "num_key_value_heads": 4,
        "sliding_window": 4096,
        "tie_word_embeddings": True,
        "vocab_size": 262208,
    },
    "gpt_oss": {
        "head_dim": 64,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_attention_heads": 64,
        "num_hidden_layers": 36,
        "num_key_value_heads": 8,
        "sliding_window": 128,
        "tie_word_embeddings": False,
        "vocab_size": 201088,
    },
    "llama": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "tie_word_embeddings": False,
        "vocab_size": 32000,
    },
    "minimax_m2": {
        "head_dim": 128,
        "hidden_size": 3072,
        "intermediate_size": 1536,
        "num_attention_heads": 48,
        "num_hidden_layers": 62,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "vocab_size": 200064,
    },
    "mixtral": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "vocab_size": 32000,
    },
    "qwen3": {
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "vocab_size": 151936,
    },
    "qwen3_5_moe_text": {
        "head_dim": 256,
        "hidden_size": 2048,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_value_head_dim": 128,
        "moe_intermediate_size": 512,
        "num_attention_heads": 16,
        "num_hidden_layers": 40,
        "num_key_value_heads": 2,
        "shared_expert_intermediate_size": 512,
        "tie_word_embeddings": False,
        "vocab_size": 248320,
    },
    "qwen3_5_text": {
        "head_dim": 256,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_value_head_dim": 128,
        "num_attention_heads": 16,
        "num_hidden_layers": 32,
        "num_key_value_heads": 4,
        "tie_word_embeddings": False,
        "vocab_size": 248320,
    },
    "qwen3_moe": {
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_attention_heads": 32,
        "num_hidden_layers": 24,
        "num_key_value_heads": 4,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "vocab_size": 151936,
    },
    "qwen3_next": {
        "head_dim": 256,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_value_head_dim": 128,
        "moe_intermediate_size": 512,
        "num_attention_heads": 16,
        "num_hidden_layers": 48,
        "num_key_value_heads": 2,
        "shared_expert_intermediate_size": 512,
        "tie_word_embeddings": False,
        "vocab_size": 151936,
    },
    "qwen3_vl_moe_text": {
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "moe_intermediate_size": 1408,
        "num_attention_heads": 16,
        "num_hidden_layers": 24,
        "num_key_value_heads": 16,
        "tie_word_embeddings": True,
        "vocab_size": 151936,
    },
    "qwen3_vl_text": {
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
        "vocab_size": 151936,
    },
    "step3p7": {
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 11264,
        "moe_intermediate_size": 1280,
        "num_attention_heads": 64,
        "num_hidden_layers": 45,
        "num_key_value_heads": 8,
        "share_expert_dim": 1280,
        "tie_word_embeddings": False,
        "vocab_size": 128815,
    },
}
# ... and the layer patterns their __post_init__ sets when layer_types is not given
for _model_type, _pattern in (
    ("gemma3_text", {"sliding_window_pattern": 6}),
    ("qwen3_next", {"full_attention_interval": 4}),
    ("qwen3_5_text", {"full_attention_interval": 4}),
    ("qwen3_5_moe_text", {"full_attention_interval": 4}),
):
    DEFAULTS[_model_type].update(_pattern)

LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear"}


@dataclass(frozen=True)
class Loaded:
    """A config.json's model, with what was not read: the fields ignored (present, read by nothing here) and
    the fields defaulted (left out of the file, taken from DEFAULTS for its model_type)."""

    spec: LLMSpec
    ignored: tuple[str, ...]
    defaulted: tuple[str, ...]


class _Fields:
    """The config's fields, each read with its name in any complaint; one the file leaves out (or gives as
    null) takes its model_type's default, and is noted."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields
        model_type = fields.get("model_type")
        self.defaults = DEFAULTS.get(model_type, {}) if isinstance(model_type, str) else {}
        self.defaulted: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:
        value = self.fields.get(name)
        if value is None and self.defaults.get(name) is not None:
            self.defaulted.add(name)
            return self.defaults[name]
        return default if value is None else value

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    def int(self, name: str, default: int | None = None, low: int = 1, high: int = 10**7) -> int:
        value = self.get(name, default)
        if value is None:
            raise ParamError(f"config.json: {name} is missing; it is needed here")
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ParamError(
                f"config.json: {name} is {shown(json.dumps(value))}; expected an integer from {low} to {high}"
            )
        return value


def _integer(text: str) -> int:
    """A JSON integer, bounded before it is converted (int() of 4300 digits is a ValueError)."""
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ParamError(f"config.json: an integer of {len(text.lstrip('-'))} digits; at most {MAX_DIGITS} are read")
    return int(text)


def _text_config(text: str, max_chars: int = MAX_CONFIG) -> dict[str, Any]:
    if len(text) > max_chars:
        raise ParamError(f"config.json: {len(text)} characters; at most {max_chars} are read")
    # json.loads recurses once per bracket: bounded first (brackets inside strings count too)
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise ParamError(f"config.json: nested {depth} deep; at most {MAX_DEPTH} levels are read")
    try:
        config = json.loads(text, parse_int=_integer)
    except json.JSONDecodeError as e:
        raise ParamError(f"config.json is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(config, dict):
        raise ParamError("config.json: expected a JSON object")
    inner = config.get("text_config")
    if inner is not None:
        if not isinstance(inner, dict):
            raise ParamError("config.json: text_config is not an object")
        config = {**{k: v for k, v in config.items() if k != "text_config"}, **inner}
    for name, feature in FEATURES.items():
        if config.get(name):
            raise ParamError(f"config.json: {name} ({feature}) is not modelled")
    types = config.get("attn_type_list")
    if isinstance(types, list) and set(types) - ATTN_TYPES:
        raise ParamError("config.json: attn_type_list (lightning attention layers) is not modelled")
    return config


def _kinds(f: _Fields, layers: int) -> list[str]:
    """Each layer's kind: layer_types, or the interval / pattern rules, or one kind for all."""
    if f.has("layer_types"):
        types = f.get("layer_types")
        if not isinstance(types, list) or len(types) != layers:
            raise ParamError(f"config.json: layer_types must list {layers} layer types (num_hidden_layers)")
        bad = [t for t in types if t not in LAYER_TYPES]
        if bad:
            raise ParamError(f"config.json: layer_types has {shown(str(bad[0]))}; allowed: {', '.join(LAYER_TYPES)}")
        return [LAYER_TYPES[t] for t in types]
    if f.has("full_attention_interval"):
        every = f.int("full_attention_interval")
        return ["full" if (i + 1) % every == 0 else "linear" for i in range(layers)]
    if f.has("sliding_window_pattern"):
        every = f.int("sliding_window_pattern")
        return ["full" if (i + 1) % every == 0 else "sliding" for i in range(layers)]
    return ["sliding" if f.get("use_sliding_window") is True else "full"] * layers


def _attention(f: _Fields, kinds: list[str], heads: int, d_model: int) -> tuple[LayerType, ...]:
    if f.has("kv_lora_rank"):
        if set(kinds) != {"full"}:
            raise ParamError("config.json: kv_lora_rank (MLA) with layer types other than full attention")
        latent = LatentAttention(
            f.int("kv_lora_rank"),
            f.int("qk_rope_head_dim"),
            f.int("q_lora_rank", 0, low=0),
            f.int("qk_nope_head_dim"),
            f.int("v_head_dim"),
        )
        return (latent,) * len(kinds)
    head_dim = f.int("head_dim", d_model // heads if d_model % heads == 0 else None)
    if f.get("v_head_dim", head_dim) != head_dim:
        raise ParamError("config.json: v_head_dim (values of another size than the keys) is not modelled")
    kv_heads = f.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ParamError(f"config.json: num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads})")
    gate = f.get("attn_output_gate", f.get("model_type") == "qwen3_next") is True
    made: dict[str, LayerType] = {"full": Attention(kv_heads, head_dim, gate=gate)}
    if "sliding" in kinds:
        made["sliding"] = Attention(kv_heads, head_dim, window=f.int("sliding_window"), gate=gate)
    if "linear" in kinds:
        made["linear"] = LinearAttention(
            f.int("linear_num_key_heads"),
            f.int("linear_key_head_dim"),
            f.int("linear_num_value_heads"),
            f.int("linear_value_head_dim"),
            f.int("linear_conv_kernel_dim"),
        )
    if "full" not in kinds and "sliding" not in kinds:
        raise ParamError("config.json: layer_types has no attention layer; kvweb needs at least one")
    return tuple(made[k] for k in kinds)


def _one_of(f: _Fields, names: tuple[str, ...]) -> str | None:
    """The first of `names` the config has; two of them that disagree are refused."""
    given = [n for n in names if f.has(n)]
    if len({json.dumps(f.get(n)) for n in given}) > 1:
        raise ParamError(f"config.json: {given[0]} and {given[1]} disagree")
    return given[0] if given else None


def _experts(f: _Fields, layers: int) -> dict[str, int]:
    count = _one_of(f, ("num_local_experts", "num_experts", "n_routed_experts"))
    experts = f.int(count) if count else 1
    if experts == 1:
        return {"d_ff": f.int("intermediate_size")}
    top = _one_of(f, ("num_experts_per_tok", "experts_per_token")) or "num_experts_per_tok"
    active = f.int(top)
    if active > experts:
        raise ParamError(f"config.json: {top} ({active}) is more than the {experts} experts")
    for name in ("moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step"):
        if f.get(name, 1) != 1:
            raise ParamError(f"config.json: {name} other than 1 (experts in only some layers) is not modelled")
    if f.get("mlp_only_layers"):
        raise ParamError("config.json: mlp_only_layers (dense layers among the experts) is not modelled")
    spec = {
        "experts": experts,
        "active_experts": active,
        "d_ff": f.int("moe_intermediate_size", f.get("intermediate_size")),
    }
    if f.has("n_shared_experts"):  # each as wide as a routed expert, or Step's share_expert_dim
        spec.update(
            shared_experts=f.int("n_shared_experts", low=0), shared_d_ff=f.int("share_expert_dim", spec["d_ff"])
        )
    else:  # one shared expert of this width, 0 for none (Qwen3-Coder's; MiniMax's shared_intermediate_size)
        width = _one_of(f, ("shared_expert_intermediate_size", "shared_intermediate_size"))
        if width and f.int(width, low=0):
            spec.update(shared_experts=1, shared_d_ff=f.int(width))
    dense = f.int("first_k_dense_replace", 0, low=0)
    if dense:
        if dense > layers:
            raise ParamError(f"config.json: first_k_dense_replace ({dense}) is more than num_hidden_layers ({layers})")
        spec.update(dense_layers=dense, dense_d_ff=f.int("intermediate_size"))
    return spec


def from_config(text: str, name: str = "config", max_chars: int = MAX_CONFIG) -> LLMSpec:
    """The model a config.json describes, or one ParamError naming the field that is wrong or the feature
    that is not modelled."""
    return load_config(text, name, max_chars).spec


def load_config(text: str, name: str = "config", max_chars: int = MAX_CONFIG) -> Loaded:
    """from_config's model, with the fields it ignored and those it took from DEFAULTS (`Loaded`)."""
    f = _Fields(_text_config(text, max_chars))
    # layers are drawn one by one: bounded like the models that exist (Llama-3.1-405B has 126)
    layers, d_model, heads = (
        f.int("num_hidden_layers", high=MAX_LAYERS),
        f.int("hidden_size"),
        f.int("num_attention_heads"),
    )
    kinds = _kinds(f, layers)
    attention = _attention(f, kinds, heads, d_model)
    first = next((a for a in attention if isinstance(a, Attention)), None)
    kv_heads, head_dim = (first.kv_heads, first.head_dim) if first else (1, attention[0].kv_elements)
    uniform = set(attention) == {Attention(kv_heads, head_dim)}
    tied = f.get("tie_word_embeddings", True)  # transformers' PretrainedConfig default, where DEFAULTS has none
    if not isinstance(tied, bool):
        raise ParamError("config.json: tie_word_embeddings must be true or false")
    spec = LLMSpec(
        name,
        layers,
        d_model,
        heads,
        kv_heads,
        head_dim,
        vocab=f.int("vocab_size"),
        tied_embeddings=tied,
        layer_types=() if uniform else attention,
        **_experts(f, layers),
    )
    return Loaded(spec, tuple(sorted(n for n in f.fields if n not in READ)), tuple(sorted(f.defaulted)))
