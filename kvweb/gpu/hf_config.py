"""A model from a Hugging Face config.json (issue 27): the fields that set its memory and work,
read strictly, so a pasted config either builds the model or gets one message naming the field.

Read: the shape (`num_hidden_layers`, `hidden_size`, `num_attention_heads`, `num_key_value_heads`,
`head_dim`, `intermediate_size`, `vocab_size`, `tie_word_embeddings`, HF's default: tied), each
layer's attention (`layer_types`, or Qwen3-Next's `full_attention_interval`, or Gemma 3's
`sliding_window_pattern`, or MLA's `kv_lora_rank` for every layer; a window needs
`sliding_window`), MLA's ranks and dims, gated DeltaNet's `linear_*` fields, and the experts
(`num_local_experts` / `num_experts` / `n_routed_experts`, `num_experts_per_tok`,
`moe_intermediate_size`, `n_shared_experts` or `shared_expert_intermediate_size`,
`first_k_dense_replace`). A multimodal config's `text_config` is the model. Fields that change
nothing here (RoPE, norms, token ids, quantization: the precision is chosen apart) are listed
in IGNORED; any other field is refused by name, as is a contradiction.
"""
from __future__ import annotations

import itertools
import json
from typing import Any

from kvweb.gpu.layers import Attention, LatentAttention, LayerType, LinearAttention
from kvweb.gpu.specs import LLMSpec
from kvweb.lab import ParamError, shown

MAX_CONFIG = 5000  # characters: every shipped config fits (gpt-oss-120b, the longest, is 1574 compact); percent-encoded
# at worst 3 characters each, the share URL stays under its 16,000 (app/route.py)
MAX_DEPTH = 8  # nested objects and lists (a config needs 3: text_config > quantization_config > a list)
MAX_DIGITS = 18  # of a JSON integer
MAX_LAYERS = 1024

READ = {
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
    "vocab_size", "tie_word_embeddings", "layer_types", "full_attention_interval", "sliding_window_pattern",
    "sliding_window", "use_sliding_window", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
    "v_head_dim", "linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim",
    "linear_conv_kernel_dim", "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
    "experts_per_token", "moe_intermediate_size", "n_shared_experts", "shared_expert_intermediate_size",
    "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "model_type", "text_config",
    "attn_output_gate",
}
IGNORED = {  # no effect on memory or work in this model (norms, positions, routing details, token ids, dtypes)
    "architectures", "torch_dtype", "dtype", "transformers_version", "bos_token_id", "eos_token_id", "pad_token_id",
    "rms_norm_eps", "layer_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "rope_local_base_freq",
    "partial_rotary_factor", "max_position_embeddings", "initial_context_length", "hidden_act", "hidden_activation",
    "attention_bias", "attention_dropout", "mlp_bias", "initializer_range", "use_cache", "quantization_config",
    "n_group", "topk_group", "routed_scaling_factor", "scoring_func", "topk_method", "norm_topk_prob",
    "num_nextn_predict_layers", "aux_loss_alpha", "seq_aux", "ep_size", "pretraining_tp", "swiglu_limit",
    "router_aux_loss_coef", "output_router_logits", "query_pre_attn_scalar", "final_logit_softcapping",
    "attn_logit_softcapping", "vision_config", "boi_token_index", "eoi_token_index", "image_token_index",
    "mm_tokens_per_image", "max_window_layers",
}
LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding", "linear_attention": "linear"}


class _Fields:
    """The config's fields, each read with its name in any complaint."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def has(self, name: str) -> bool:
        return self.fields.get(name) is not None

    def int(self, name: str, default: int | None = None, low: int = 1, high: int = 10**7) -> int:
        value = self.fields.get(name, default)
        if value is None:
            raise ParamError(f"config.json: {name} is missing; it is needed here")
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ParamError(f"config.json: {name} is {shown(json.dumps(value))}; expected an integer from {low} to {high}")
        return value


def _integer(text: str) -> int:
    """A JSON integer, bounded before it is converted (int() of 4300 digits is a ValueError)."""
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ParamError(f"config.json: an integer of {len(text.lstrip('-'))} digits; at most {MAX_DIGITS} are read")
    return int(text)


def _text_config(text: str) -> dict[str, Any]:
    if len(text) > MAX_CONFIG:
        raise ParamError(f"config.json: {len(text)} characters; at most {MAX_CONFIG} are read")
    # json.loads recurses once per bracket: bounded first (brackets inside strings count too)
    depth = max(itertools.accumulate(1 if c in "[{" else -1 for c in text if c in "[]{}"), default=0)
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
    for name in config:
        if name not in READ and name not in IGNORED:
            raise ParamError(f"config.json: unknown field {shown(name)}; kvweb reads the fields of docs/gpu.md "
                             "('Paste a config.json') and refuses others")
    return config


def _kinds(f: _Fields, layers: int) -> list[str]:
    """Each layer's kind: layer_types, or the interval / pattern rules, or one kind for all."""
    if f.has("layer_types"):
        types = f.fields["layer_types"]
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
    return ["sliding" if f.fields.get("use_sliding_window") is True else "full"] * layers


def _attention(f: _Fields, kinds: list[str], heads: int, d_model: int) -> tuple[LayerType, ...]:
    if f.has("kv_lora_rank"):
        if set(kinds) != {"full"}:
            raise ParamError("config.json: kv_lora_rank (MLA) with layer types other than full attention")
        latent = LatentAttention(f.int("kv_lora_rank"), f.int("qk_rope_head_dim"), f.int("q_lora_rank", 0, low=0),
                                 f.int("qk_nope_head_dim"), f.int("v_head_dim"))
        return (latent,) * len(kinds)
    head_dim = f.int("head_dim", d_model // heads if d_model % heads == 0 else None)
    kv_heads = f.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ParamError(f"config.json: num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads})")
    gate = f.fields.get("attn_output_gate", f.fields.get("model_type") == "qwen3_next") is True
    made: dict[str, LayerType] = {"full": Attention(kv_heads, head_dim, gate=gate)}
    if "sliding" in kinds:
        made["sliding"] = Attention(kv_heads, head_dim, window=f.int("sliding_window"), gate=gate)
    if "linear" in kinds:
        made["linear"] = LinearAttention(f.int("linear_num_key_heads"), f.int("linear_key_head_dim"),
                                         f.int("linear_num_value_heads"), f.int("linear_value_head_dim"),
                                         f.int("linear_conv_kernel_dim"))
    if "full" not in kinds and "sliding" not in kinds:
        raise ParamError("config.json: layer_types has no attention layer; kvweb needs at least one")
    return tuple(made[k] for k in kinds)


def _one_of(f: _Fields, names: tuple[str, ...]) -> str | None:
    """The first of `names` the config has; two of them that disagree are refused."""
    given = [n for n in names if f.has(n)]
    if len({json.dumps(f.fields[n]) for n in given}) > 1:
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
    for name in ("moe_layer_freq", "decoder_sparse_step"):
        if f.fields.get(name, 1) != 1:
            raise ParamError(f"config.json: {name} other than 1 (experts in only some layers) is not modelled")
    if f.fields.get("mlp_only_layers"):
        raise ParamError("config.json: mlp_only_layers (dense layers among the experts) is not modelled")
    spec = {"experts": experts, "active_experts": active, "d_ff": f.int("moe_intermediate_size", f.fields.get("intermediate_size"))}
    if f.has("n_shared_experts"):
        spec.update(shared_experts=f.int("n_shared_experts", low=0), shared_d_ff=spec["d_ff"])
    elif f.has("shared_expert_intermediate_size"):
        spec.update(shared_experts=1, shared_d_ff=f.int("shared_expert_intermediate_size"))
    dense = f.int("first_k_dense_replace", 0, low=0)
    if dense:
        if dense > layers:
            raise ParamError(f"config.json: first_k_dense_replace ({dense}) is more than num_hidden_layers ({layers})")
        spec.update(dense_layers=dense, dense_d_ff=f.int("intermediate_size"))
    return spec


def from_config(text: str, name: str = "config") -> LLMSpec:
    """The model a config.json describes, or one ParamError naming the field that is wrong."""
    f = _Fields(_text_config(text))
    # layers are drawn one by one: bounded like the models that exist (Llama-3.1-405B has 126)
    layers, d_model, heads = f.int("num_hidden_layers", high=MAX_LAYERS), f.int("hidden_size"), f.int("num_attention_heads")
    kinds = _kinds(f, layers)
    attention = _attention(f, kinds, heads, d_model)
    first = next((a for a in attention if isinstance(a, Attention)), None)
    kv_heads, head_dim = (first.kv_heads, first.head_dim) if first else (1, attention[0].kv_elements)
    uniform = set(attention) == {Attention(kv_heads, head_dim)}
    tied = f.fields.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise ParamError("config.json: tie_word_embeddings must be true or false")
    return LLMSpec(name, layers, d_model, heads, kv_heads, head_dim, vocab=f.int("vocab_size"), tied_embeddings=tied,
                   layer_types=() if uniform else attention, **_experts(f, layers))
