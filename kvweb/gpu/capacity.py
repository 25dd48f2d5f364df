"""How much KV fits beside the weights, and whether a model runs here at all (part of `CostModel`).

Each GPU may use `mem_util` of its memory (like vLLM's gpu_memory_utilization; the datasheet's
decimal figure), less its share of the weights; what is left holds KV. Every GPU holds its share of
every token's KV, so the group holds as many tokens as one GPU has room for (under data-parallel
attention each GPU holds its own requests' tokens whole, so tp times as many). `fit` says in one
sentence why nothing is priced when the weights do not fit or the model cannot be split.
"""

from __future__ import annotations

from dataclasses import replace

from kvweb.gpu.kv_bytes import KV_PRECISIONS, KVBytes
from kvweb.gpu.specs import GPUSpec
from kvweb.gpu.weights import Weights


class Capacity(Weights, KVBytes):
    """Memory left for KV and what fits in it; a part of `CostModel` (its fields below)."""

    gpu: GPUSpec
    mem_util: float
    ignore_weights: bool

    @property
    def usable_bytes(self) -> float:
        """Per GPU."""
        return self.mem_util * self.gpu.hbm_bytes

    @property
    def kv_bytes_free_per_gpu(self) -> float:
        return max(0.0, self.usable_bytes - (0 if self.ignore_weights else self.weight_bytes_per_gpu))

    @property
    def splits(self) -> bool:
        """Whether the query heads divide evenly over the tp GPUs (vLLM refuses otherwise); under
        data-parallel attention no head is split."""
        return self.attention_dp or self.model.heads % self.tp == 0

    @property
    def _capacity_bytes_per_token(self) -> int:
        """What a token takes for capacity in tokens: the growing part, or where nothing grows
        without bound (every layer a window or a state), the window layers' part."""
        tp = self._attention_tp
        return (
            self.kv_bytes_per_token_per_gpu
            or sum(n * a.kv_elements_per_gpu(tp) for a, n in self.model.groups) * KV_PRECISIONS[self.kv_precision]
        )

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV that fit beside the weights (0 when the weights alone do not fit or the
        model cannot be split): each GPU holds its share of each of them (under data-parallel
        attention, its own requests' tokens whole). Hybrid models: tokens of the growing part."""
        per_token = self._capacity_bytes_per_token
        if not self.splits or not per_token:
            return 0
        return int(self.kv_bytes_free_per_gpu // per_token) * (self.tp if self.attention_dp else 1)

    def kv_capacity_blocks(self, block_size: int) -> int:
        return self.kv_capacity_tokens // block_size

    def capacity_requests(self, context: int, block_size: int) -> int:
        """Requests of `context` tokens whose cache fits beside the weights, over the group: each GPU
        holds a share of every request, or under data-parallel attention its own requests whole."""
        if not self.splits:
            return 0
        per_gpu = self.kv_bytes_free_per_gpu // self.kv_bytes_per_sequence_per_gpu(context, block_size)
        return int(per_gpu) * (self.tp if self.attention_dp else 1)

    @property
    def fits(self) -> bool:
        """Whether this model can run here at all: its weights and at least one token of KV."""
        return self.kv_capacity_tokens > 0

    @property
    def where(self) -> str:
        return f"one {self.gpu.name}" if self.tp == 1 else f"{self.tp} x {self.gpu.name}"

    def fit(self) -> dict[str, object]:
        """Whether the configuration can run, with one plain sentence when it cannot (or when it
        is a what-if); every lab that prices work reports this beside its figures."""
        m, g, tp = self.model, self.gpu, self.tp
        weights, usable = f"{self.weight_bytes_per_gpu / 1e9:.1f} GB", f"{self.usable_bytes / 1e9:.1f} GB"
        share = "" if tp == 1 else " per GPU"
        note = None
        if not self.splits:
            note = (
                f"{m.name} cannot be split over {tp} GPUs: its {m.heads} query heads are not a multiple "
                f"of {tp}, so nothing is priced"
            )
        elif not self.fits:
            note = (
                f"{m.name} does not fit on {self.where}: its weights take {weights}{share} and {usable} is "
                f"usable ({self.mem_util:.0%} of {g.hbm_bytes / 1e9:g} GB), so nothing is priced as if it ran; "
                "ignore_weights=true prices it as a what-if"
            )
        elif self.ignore_weights:
            real = replace(self, ignore_weights=False).fits  # self: a CostModel, a dataclass
            note = (
                f"what-if: the weights of {m.name} ({weights}) are left out of {g.name}'s {usable}; "
                f"for real it {'fits' if real else 'does not fit'}"
            )
            # named as the what-if it is (`fits` is left out: a reader of it sees a priced run)
            return {"fits_what_if": True, "fits_for_real": real, **self._fit_figures(note)}
        return {"fits": self.fits, **self._fit_figures(note)}

    def _fit_figures(self, note: str | None) -> dict[str, object]:
        """Memory figures, each named by its scope: one GPU's, or the tensor-parallel group's
        (total; token counts are the group's)."""
        tp = self.tp
        return {
            "fit_note": note,
            "tp": tp,
            "weight_bytes_total": self.weight_bytes,
            "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
            "usable_bytes_per_gpu": self.usable_bytes,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "kv_bytes_free_per_gpu": self.kv_bytes_free_per_gpu,
            "kv_bytes_free_total": self.kv_bytes_free_per_gpu * tp,
        }
