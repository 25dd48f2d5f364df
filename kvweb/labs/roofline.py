"""Lab `roofline`: the paper GPU. KV capacity and the cost of prefill, decode, swap and recompute,
on `tp` GPUs at the chosen weight and KV precision."""

from __future__ import annotations

from typing import Any

import param

from kvweb.gpu import GPUS, MODELS, LLMSpec, explain
from kvweb.gpu.explain import Explanation
from kvweb.budget import Estimate, constant
from kvweb.lab import ADVANCED, ParamError, Progress, no_progress
from kvweb.labs.paper_gpu import PaperGPULab
from kvweb.serving.memory.paged_memory import BLOCK_SIZE


class Roofline(PaperGPULab):
    lab_name = "roofline"
    title = "Paper GPU (roofline)"
    summary = (
        "How many tokens of KV cache fit beside the weights, and what prefill, a decode "
        "step, swapping and recomputing cost on a roofline model, on tp tensor-parallel GPUs "
        "(each holds its share of the weights and of every token's KV, and the layers' "
        "all-reduces add to every step) at the chosen weight and KV precision. Decimal units: "
        "1 GB = 1e9 B; bytes and FLOPs are one GPU's unless named total (all GPUs); token counts are all GPUs'."
    )

    gpu = param.Selector(
        objects=list(GPUS), default="A100-40GB", doc="GPU (HBM, peak bf16 and FP8 FLOP/s, bandwidth, host link, NVLink)"
    )
    model = param.Selector(
        objects=[*MODELS, "custom"],
        default="opt-13b-like",
        doc="model: opt-13b-like is the lecture's (own LM head, 13.1e9 parameters), opt-13b the "
        "real one (head tied to the embedding, 12.8e9); llama-3.1, qwen2.5 and mixtral-8x7b "
        "(8 experts, 2 active) from their Hugging Face configs; deepseek-v3, gpt-oss, gemma-3-27b and "
        "qwen3-next mix layer types (the layer-memory lab draws them); 'custom' uses the custom_* sizes",
    )
    tokens = param.Integer(2048, bounds=(1, 1_000_000), doc="tokens to prefill, swap or recompute")
    batch = param.Integer(32, bounds=(1, 4096), doc="sequences in the decode step")
    context = param.Integer(1024, bounds=(1, 1_000_000), doc="context length of each decoding sequence")
    block_size = param.Integer(BLOCK_SIZE, bounds=(1, 1024), doc="tokens per KV block")
    custom_layers = param.Integer(32, bounds=(1, 256), doc="custom model: layers", precedence=ADVANCED)
    custom_d_model = param.Integer(4096, bounds=(64, 65536), doc="custom model: d_model", precedence=ADVANCED)
    custom_heads = param.Integer(32, bounds=(1, 512), doc="custom model: query heads", precedence=ADVANCED)
    custom_kv_heads = param.Integer(
        8, bounds=(1, 512), doc="custom model: KV heads (GQA when fewer than heads)", precedence=ADVANCED
    )
    custom_head_dim = param.Integer(128, bounds=(8, 1024), doc="custom model: head dimension", precedence=ADVANCED)
    custom_d_ff = param.Integer(14336, bounds=(64, 524288), doc="custom model: SwiGLU hidden size", precedence=ADVANCED)
    custom_vocab = param.Integer(128256, bounds=(2, 1_000_000), doc="custom model: vocabulary", precedence=ADVANCED)

    def estimate(self) -> Estimate:
        """Short at any value its bounds allow: a handful of formulas."""
        return constant(0.1)

    def check(self) -> None:
        if self.model == "custom" and self.custom_heads % self.custom_kv_heads:
            raise ParamError(f"custom_kv_heads: {self.custom_kv_heads} must divide custom_heads ({self.custom_heads})")
        self.cost_model(self.gpu, self.llm())  # a weight precision the model cannot take: a ParamError

    def llm(self) -> LLMSpec:
        if self.model != "custom":
            return MODELS[self.model]
        return LLMSpec(
            "custom",
            self.custom_layers,
            self.custom_d_model,
            self.custom_heads,
            self.custom_kv_heads,
            self.custom_head_dim,
            self.custom_d_ff,
            self.custom_vocab,
        )

    def explain(self) -> dict[str, Explanation]:
        """The headline figures' formulas with the values put in, by the run's result key
        (kvweb/gpu/explain.py): the memory figures, and the step times when the model fits."""
        cm = self.cost_model(self.gpu, self.llm())
        return {**explain.memory(cm), **(explain.times(cm, self.tokens, self.batch, self.context) if cm.fits else {})}

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        cm = self.cost_model(self.gpu, self.llm())
        m, g = cm.model, cm.gpu
        facts = {
            "units": "decimal (1 GB = 1e9 B); bytes and FLOPs of one GPU unless named total (the tensor-parallel "
            "group's); token and block counts are the group's",
            "gpu": {
                "name": g.name,
                "hbm_bytes": g.hbm_bytes,
                "peak_flops": cm.peak_flops,
                "hbm_bandwidth": g.hbm_bandwidth,
                "link_bandwidth": cm.link,
                "interconnect_bandwidth": cm.interconnect,
            },
            **cm.fit(),
            "params_count": m.params,
            "active_params_count": m.active_params,
            "kv_heads_per_gpu": cm.kv_heads_per_gpu,
            "kv_bytes_per_token_total": cm.kv_bytes_per_token,
            "kv_bytes_per_token_per_gpu": cm.kv_bytes_per_token_per_gpu,
            "kv_bytes_per_block_total": cm.kv_bytes_per_token * self.block_size,
        }
        if not cm.fits:
            return facts
        prefill = cm.prefill_counts(self.tokens)
        decode = cm.decode_counts(self.batch, self.batch * self.context)
        points = []
        for name, (flops, nbytes) in (("prefill", prefill), ("decode", decode)):
            ai = cm.intensity(flops, nbytes)
            points.append(
                {
                    "name": name,
                    "flops": flops,
                    "bytes": nbytes,
                    "intensity": ai,
                    "attainable_flops_s": cm.attainable_flops(ai),
                    "bound": "compute" if ai >= cm.ridge_intensity else "memory",
                }
            )
        decode_s = cm.decode_step_cost(self.batch, self.batch * self.context)
        batch_fits = self.batch * self.context <= cm.kv_capacity_tokens
        decode_step = {
            "decode_step_s": decode_s,
            "decode_allreduce_s": cm.allreduce_time(self.batch),
            "decode_tokens_per_s": self.batch / decode_s,
        }
        return {
            **facts,
            "kv_capacity_blocks": cm.kv_capacity_blocks(self.block_size),
            "prefill_s": cm.prefill_cost(self.tokens),
            "prefill_allreduce_s": cm.allreduce_time(self.tokens),
            # a decode batch whose KV does not fit is priced as a what-if, and named so
            **{k if batch_fits else f"{k}_what_if": v for k, v in decode_step.items()},
            "decode_batch_fits": batch_fits,
            "swap_out_s": cm.swap_cost(self.tokens, self.block_size),
            "swap_roundtrip_s": cm.swap_roundtrip_cost(self.tokens, self.block_size),
            "recompute_s": cm.recompute_cost(self.tokens),
            "roofline": {
                "ridge_intensity": cm.ridge_intensity,
                "peak_flops_s": cm.peak_flops * cm.compute_eff,
                "bandwidth_b_s": g.hbm_bandwidth * cm.memory_eff,
                "points": points,
            },
        }
