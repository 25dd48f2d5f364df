"""Speculative decoding's drafters, as vLLM V1 loads them beside the target (vllm/v1/spec_decode/):
what each weighs on a GPU, the KV it keeps in every block, and the model each of its passes runs.

- eagle (vLLM `method="eagle"`): a head of one decoder layer of the target's shape (its last layer's
  attention, no dense MLP); its embedding and LM head are the target's (`_maybe_share_embeddings`,
  `_maybe_share_lm_head` share them for an EAGLE checkpoint without its own). Any model.
- mtp (`method="mtp"`, DeepSeek-V3's `deepseek_mtp`): the model's one MTP module (vLLM's `n_predict`
  = `num_nextn_predict_layers` = 1), reused for each of the k drafts: one decoder layer of the
  target's shape (MLA, 256 routed experts and the shared one) plus `eh_proj` (2d x d, joining the
  token's embedding and the hidden state) and its norms (left out, as every model's here); the
  embedding and the shared head are the target's (vLLM's base proposer shares both for any MTP
  model, "Detected MTP model"). DeepSeek-V3's README_WEIGHTS.md counts the module at "11.5B unique parameters
  (excluding the shared 0.9B Embedding and 0.9B output Head)", its README at 14B with them; here
  the layer is 11.51 B and eh_proj 0.10 B. Only models that ship an MTP module (`MTP_MODELS`).
- a draft model (`method="draft_model"`, any of `MODELS` by name): a smaller model of the same
  vocabulary (vLLM refuses another vocabulary size without a token mapping:
  `verify_equal_vocab_size_if_draft_model`), loaded whole, its embedding and LM head its own
  (`DraftModelProposer` shares neither), at the target's tensor parallelism (vLLM requires
  `draft_tensor_parallel_size` = `tensor_parallel_size`) and weight precision. Its input keeps one
  token more a request ("the autoregressive draft-model input retains one unsliced token": vLLM's
  `max_num_new_slots_for_drafting` = 1), which the scheduler takes from the token budget
  (`input_slots`); its KV at a position reads no later token (`next_token` False).

Its KV: vLLM lists the drafter's attention layers in the KV cache spec beside the target's. When
they all need the same token slots (full or latent attention, one block size), `get_kv_cache_groups`
(vllm/v1/core/kv_cache_planning.py) makes them one group, `UniformTypeKVCacheSpecs` (in
vllm/v1/kv_cache_interface.py) whose page is the sum of its layers' pages (`page_size_bytes`), however
their head shapes differ: a block of B tokens holds B tokens of every layer of both models. So a
token takes the target's bytes plus the drafter's, and the pool has B x (both) bytes a block, from
the memory left once the drafter's own weights are loaded too (`drafter_blocks`). EAGLE's and MTP's
one layer of the target's shape make that L / (L + 1) of the blocks (L: the target's layers).

Its compute: every drafter runs vLLM's proposer loop (`propose`): a first pass over the step's
tokens, then k - 1 passes of one token a request, each a forward of the drafter's `model`, priced by
the cost model on it (spec_decode.py `draft_seconds`). Left out: the input projections' compute
(EAGLE's fc, MTP's eh_proj: one 2d x d matmul a token; MTP's is counted in its weights).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from kvweb.gpu.cost import CostModel
from kvweb.gpu.specs import BYTES_16, MODELS, LLMSpec
from kvweb.gpu.weights import WEIGHT_PRECISIONS, PrecisionError

METHODS = ("eagle", "mtp")  # the drafters that are not a model of their own; any name in MODELS is a draft model
MTP_MODELS = ("deepseek-v3",)  # models that ship an MTP module (num_nextn_predict_layers = 1)


def drafter_model(model: LLMSpec, layers: int = 1) -> LLMSpec:
    """EAGLE's head as a model: `layers` decoder layers of the target's shape (its last layer's
    attention, no dense MLP layers) and its embedding and LM head."""
    return replace(
        model, name=f"{model.name} drafter", layers=layers, dense_layers=0, layer_types=model.layer_types[-1:] * layers
    )


@dataclass(frozen=True)
class Drafter:
    """A drafter as vLLM loads it beside the target: the forward its passes run, the parameters of
    it that are the target's, those it loads that no pass is priced for, and whether its KV at a
    block's last position reads the token after the block."""

    name: str  # eagle, mtp, or the draft model's name
    model: LLMSpec  # each pass's forward (priced on it); its attention layers keep KV in every block
    shared: int = 0  # its embedding and LM head, when they are the target's (not loaded again)
    unpriced: int = 0  # parameters it loads beside `model`'s (MTP's eh_proj)
    next_token: bool = True  # EAGLE and MTP: a block is hashed with the token after it too
    input_slots: int = 0  # budget a scheduled request takes beside its tokens (a draft model: 1)

    def cost(self, cost: CostModel) -> CostModel:
        """The cost model of its passes: its model on the target's GPUs, precisions and cost model;
        where the measured kernels lack its shapes (a draft model's heads a GPU), the roofline's, as
        `auto` prices a model without them."""
        try:
            return replace(cost, model=self.model)
        except PrecisionError:
            raise
        except ValueError:  # no measured table for its shapes
            return CostModel(**{**{f.name: getattr(cost, f.name) for f in fields(CostModel)}, "model": self.model})

    def weight_bytes(self, cost: CostModel) -> float:
        """One GPU's bytes of its own weights (the shared embedding and LM head stay 16-bit, split
        over the group)."""
        if cost.ignore_weights:
            return 0.0
        own = self.cost(cost).weight_bytes_per_gpu - self.shared * BYTES_16 / cost.tp
        return own + self.unpriced * WEIGHT_PRECISIONS[cost.weight_precision] / cost.tp if self.unpriced else own

    def kv_bytes_per_token(self, cost: CostModel) -> int:
        """One GPU's KV bytes a token for its attention layers, in the target's blocks."""
        return self.cost(cost).kv_bytes_per_token_per_gpu


def drafter_refusal(name: str, target: LLMSpec) -> str | None:
    """Why `name` cannot draft for `target`, or None: MTP only where the model ships it; a draft model
    smaller than the target, of its vocabulary, its layers all full or latent attention."""
    if name == "eagle":
        return None
    if name == "mtp":
        return (
            None
            if target.name in MTP_MODELS
            else f"it ships no MTP module; mtp drafts for {', '.join(MTP_MODELS)} only (use eagle)"
        )
    if name not in MODELS:
        return f"use eagle, mtp or a model's name ({', '.join(MODELS)})"
    draft = MODELS[name]
    if draft.params >= target.params or draft.vocab != target.vocab:
        return (
            f"a draft model must be smaller ({target.params / 1e9:.1f} B parameters) and share its vocabulary "
            f"({target.vocab:,} tokens): {name} has {draft.params / 1e9:.1f} B and {draft.vocab:,} (use eagle "
            "or a smaller model of the same vocabulary)"
        )
    if len(draft.groups) > 1 or any(a.window for a in draft.attention):
        return (
            f"{name}'s layers mix kinds (vLLM's KV cache groups), and a draft model is simulated with full or "
            "latent layers only (use eagle)"
        )
    return None


def make_drafter(name: str, target: LLMSpec) -> Drafter:
    """The drafter called `name` for `target` (ValueError with `drafter_refusal`'s reason)."""
    why = drafter_refusal(name, target)
    if why:
        raise ValueError(f"drafter: {name} is not allowed with model {target.name}; {why}")
    if name == "eagle":
        return Drafter(name, drafter_model(target), shared=target.embedding_params)
    if name == "mtp":
        return Drafter(name, drafter_model(target), shared=target.embedding_params, unpriced=2 * target.d_model**2)
    return Drafter(name, MODELS[name], next_token=False, input_slots=1)


def drafter_blocks(cost: CostModel, block_size: int, drafter: Drafter | None) -> int:
    """KV blocks of `block_size` tokens when each also holds the drafter's layers: the memory left
    beside its weights too, each token taking the target's bytes and the drafter's (None: no drafter
    in memory, the target's blocks)."""
    if drafter is None:
        return cost.kv_capacity_blocks(block_size)
    free = max(0.0, cost.kv_bytes_free_per_gpu - drafter.weight_bytes(cost))
    tokens = int(free // (cost.kv_bytes_per_token_per_gpu + drafter.kv_bytes_per_token(cost)))
    return tokens * (cost.tp if cost.attention_dp else 1) // block_size
