"""Lab `layer-memory`: today's models on the paper GPU, layer by layer (issue 27). One request's
cache as it grows (full layers growing, window layers sliding, latent layers thin, linear layers
fixed), what a decode step reads per layer type, and how many requests of `context` tokens each
model's cache holds on the chosen GPUs."""

from __future__ import annotations

from typing import Any

import param

from kvweb.budget import Estimate, constant
from kvweb.gpu import GPUS, MODELS, CostModel, LLMSpec
from kvweb.gpu.weights import precision_refusal
from kvweb.gpu.hf_config import MAX_CONFIG, from_config
from kvweb.gpu.measured_cost import roofline
from kvweb.gpu.layers import KINDS
from kvweb.lab import ParamError, Progress, Text, no_progress
from kvweb.labs.paper_gpu import PaperGPULab
from kvweb.serving.memory.paged_memory import BLOCK_SIZE

GROWTH_POINTS = 33  # contexts drawn in the growth curve, 0 to `context`


class LayerMemory(PaperGPULab):
    lab_name = "layer-memory"
    title = "Today's models: KV memory layer by layer"
    summary = (
        "Models served in 2026 keep different memory per layer: full attention keeps every token, a "
        "sliding window only its last tokens, DeepSeek's latent attention (MLA) one thin latent per token "
        "shared by all heads, linear attention (gated DeltaNet) a fixed state per request. One request's "
        "cache layer by layer and as it grows, what a decode step reads per layer type, and the requests "
        "of `context` tokens each model holds on tp GPUs. Decimal units: 1 GB = 1e9 B."
    )

    gpu = param.Selector(objects=list(GPUS), default="H100-SXM", doc="GPU (HBM, peak FLOP/s, bandwidth)")
    model = param.Selector(
        objects=[*MODELS, "config"], default="gpt-oss-20b", doc="model; 'config' builds it from the pasted config.json"
    )
    context = param.Integer(32768, bounds=(1, 1_000_000), doc="tokens of one request (prompt and output so far)")
    block_size = param.Integer(
        BLOCK_SIZE, bounds=(1, 1024), doc="tokens per KV block (window layers keep whole blocks)"
    )
    attention_dp = param.Boolean(
        False,
        doc="SGLang's data-parallel attention: each GPU holds its own requests' "
        "cache whole (and the attention weights), instead of a share of every request's",
    )
    config = Text(
        "",
        max_length=MAX_CONFIG,
        doc="a Hugging Face config.json (model=config): layers, heads, layer_types, sliding_window, "
        "kv_lora_rank, linear_* and expert fields; docs/gpu.md lists what is read",
    )

    def estimate(self) -> Estimate:
        """Short at any value its bounds allow: formulas per layer and per model."""
        return constant(0.1)

    def check(self) -> None:
        if self.model == "config":
            if not self.config.strip():
                raise ParamError("config: empty; paste a config.json, or choose a model")
            from_config(self.config)
        self.cost(self.llm())  # a weight precision the model cannot take: a ParamError

    def llm(self) -> LLMSpec:
        return from_config(self.config) if self.model == "config" else MODELS[self.model]

    def cost(self, model: LLMSpec) -> CostModel:
        return roofline(GPUS[self.gpu], model, {"attention_dp": self.attention_dp, **self.assumptions()})

    def capacity(self, cm: CostModel) -> dict[str, Any]:
        """One model's figures at `context` tokens on these GPUs."""
        return {
            "model": cm.model.name,
            "fits": cm.fits,
            "kv_bytes_per_token_total": cm.kv_bytes_per_token,
            "kv_bytes_per_sequence_total": cm.kv_bytes_per_sequence(self.context, self.block_size),
            "capacity_requests": cm.capacity_requests(self.context, self.block_size),
        }

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        cm = self.cost(self.llm())
        m, ctx, bs = cm.model, self.context, self.block_size
        per_layer = cm.kv_bytes_per_layer(ctx, bs)
        kinds = [a.kind for a in m.attention]
        points = sorted({round(ctx * i / (GROWTH_POINTS - 1)) for i in range(GROWTH_POINTS)})
        growth: dict[str, list[int]] = {k: [] for k in KINDS}
        for c in points:
            by_layer = cm.kv_bytes_per_layer(c, bs)
            for k in KINDS:
                growth[k].append(sum(b for b, kind in zip(by_layer, kinds) if kind == k))
        groups = [
            {
                "kind": a.kind,
                "layers": n,
                "window": a.window,
                "kv_elements_per_token": a.kv_elements,
                "state_elements": a.state_elements,
            }
            for a, n in m.groups
        ]
        # the models that take this weight precision (MXFP4 only those with routed experts)
        models = [
            self.capacity(self.cost(spec))
            for spec in ([*MODELS.values(), m] if self.model == "config" else MODELS.values())
            if not precision_refusal(spec, self.weight_precision)
        ]
        return {
            "units": "decimal (1 GB = 1e9 B); _per_gpu: one GPU holding the request, _total: the tensor-parallel "
            "group; bytes at the KV precision, in whole blocks",
            "model": m.name,
            "params_count": m.params,
            "active_params_count": m.active_params,
            **cm.fit(),
            "attention_dp": self.attention_dp,
            "groups": groups,
            "kv_bytes_per_token_per_gpu": cm.kv_bytes_per_token_per_gpu,
            "kv_bytes_per_token_total": cm.kv_bytes_per_token,
            "kv_bytes_per_sequence_per_gpu": cm.kv_bytes_per_sequence_per_gpu(ctx, bs),
            "kv_bytes_per_sequence_total": cm.kv_bytes_per_sequence(ctx, bs),
            "capacity_requests": cm.capacity_requests(ctx, bs),
            "layers": {"kind": kinds, "bytes_per_gpu": per_layer},
            "growth": {"context": points, **growth},
            "decode_attention": cm.decode_attention(1, ctx),
            "models": models,
        }
