"""Lab `beam-search`: beams share their common prefix through fork; dropped beams are freed."""

from __future__ import annotations

from typing import Any

import param

from kvweb.kv.beam_search import Beam, beam_search, beam_search_naive, lineage
from kvweb.budget import MODEL_CALLS, MODEL_PAIRS, Estimate, work
from kvweb.lab import Lab, ParamError, Progress, no_progress
from kvweb.kv.model import MiniModel, ModelConfig, decode
from kvweb.kv.paged_store import MAX_TRACE_BLOCKS, PagedStore, Tracer, first_step_with
from kvweb.kv.prompts import make_prompt

SWEEP_WIDTHS = (2, 4, 8)


class BeamSearch(Lab):
    lab_name = "beam-search"
    title = "Beam search"
    summary = (
        "Beam search of width k on a paged cache: a kept beam continues in its sequence, its "
        "other kept children fork it, beams nobody extends are freed. Memory is compared with "
        "private block tables per beam, and the tokens with a search that recomputes every "
        "beam from scratch."
    )

    width = param.Integer(4, bounds=(1, 8), doc="beam width k")
    prompt_len = param.Integer(20, bounds=(1, 128), doc="prompt length (tokens)")
    steps = param.Integer(12, bounds=(1, 32), doc="tokens generated per beam")
    block_size = param.Integer(8, bounds=(1, 64), doc="tokens per KV block")
    seed = param.Integer(
        0,
        bounds=(0, 2**31 - 1),
        doc="the mini model: 0 is the trained one; N > 0 is untrained, random weights seeded N",
    )

    def pool_blocks(self, width: int) -> int:
        """Enough blocks even without sharing: `width` private block tables."""
        return width * -(-(self.prompt_len + self.steps) // self.block_size)

    def estimate(self) -> Estimate:
        """The paged searches (this width and the sweep's) step by step, and the naive search, which
        recomputes every beam's whole context every step (attention pairs: tokens x context)."""
        naive = sum((1 if t == 0 else self.width) * (self.prompt_len + t) ** 2 / 2 for t in range(self.steps))
        calls = (1 + len(SWEEP_WIDTHS)) * self.steps + 1 + (self.steps - 1) * self.width
        return work((naive, MODEL_PAIRS), (calls, MODEL_CALLS), lower=("prompt_len", "width", "steps"))

    def check(self) -> None:
        need = self.pool_blocks(max(self.width, *SWEEP_WIDTHS))
        if need > MAX_TRACE_BLOCKS:
            raise ParamError(
                f"block_size: up to {max(self.width, *SWEEP_WIDTHS)} beams (the width sweep included) of "
                f"{self.prompt_len}+{self.steps} tokens in blocks of {self.block_size} need {need} blocks; at most {MAX_TRACE_BLOCKS} (raise block_size or lower prompt_len or steps)"
            )

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        # Beam search draws no random number: the seed can only choose weights. N > 0 keeps what
        # seed=N meant before the model was trained (old share URLs show the same beams).
        model = MiniModel(ModelConfig(weights="random", seed=self.seed) if self.seed else ModelConfig())
        prompt = make_prompt(self.prompt_len)
        beams, steps = self._search(model, prompt, self.width)
        sweep = []
        for i, width in enumerate(SWEEP_WIDTHS):
            progress(i / (len(SWEEP_WIDTHS) + 1), f"width {width}")
            sweep.append({"width": width, **savings(self._search(model, prompt, width)[1])})
        progress(len(SWEEP_WIDTHS) / (len(SWEEP_WIDTHS) + 1), "naive beam search (recomputing)")
        naive = beam_search_naive(model, prompt, self.width, self.steps)
        return {
            "block_size": self.block_size,
            "num_blocks": self.pool_blocks(self.width),
            **savings(steps),
            "identical": [b.tokens for b in beams] == [b.tokens for b in naive],
            "prompt": decode(prompt),
            "beams": [{"text": decode(b.tokens), "score": b.score} for b in beams],
            "memory": [
                {"step": s["step"], "shared": s["used_blocks"], "unshared": s["unshared_blocks"]} for s in steps
            ],
            "sweep": sweep,
            "steps": steps,
            "lineage": lineage(steps),
            "opening_step": first_step_with(steps, "free") or first_step_with(steps, "fork"),  # a beam freed
        }

    def _search(self, model: MiniModel, prompt: list[int], width: int) -> tuple[list[Beam], list[dict[str, Any]]]:
        """The final beams and the trace of one paged beam search."""
        tracer = Tracer(PagedStore.for_model(model, self.block_size, self.pool_blocks(width)))
        beams = beam_search(model, tracer.store, prompt, width, self.steps, on_step=tracer)
        return beams, tracer.steps


def savings(steps: list[dict[str, Any]]) -> dict[str, float]:
    """Memory saved by sharing: time-averaged (1 - mean shared / mean unshared blocks over the
    steps) and at the peak (1 - peak shared / peak unshared: the pool a server must reserve),
    with the two peaks, so that a reader sees what the peak saving compares."""
    shared = [s["used_blocks"] for s in steps]
    unshared = [s["unshared_blocks"] for s in steps]
    return {
        "saving_mean": 1 - sum(shared) / sum(unshared),
        "saving_peak": 1 - max(shared) / max(unshared),
        "peak_blocks_with_sharing": max(shared),
        "peak_blocks_without_sharing": max(unshared),
    }
