"""Lab `parallel-sampling`: n answers to one prompt share the prompt's blocks (fork + copy-on-write)."""

from __future__ import annotations

from typing import Any

import param

from kvweb.kv.generate import generate_alone
from kvweb.budget import Estimate, constant
from kvweb.lab import Lab, ParamError, Progress, no_progress
from kvweb.kv.model import MiniModel, decode
from kvweb.kv.paged_store import MAX_TRACE_BLOCKS, PagedStore, Tracer, first_step_with, thin
from kvweb.kv.parallel_sampling import parallel_sample
from kvweb.kv.prompts import make_prompt


class ParallelSampling(Lab):
    lab_name = "parallel-sampling"
    title = "Parallel sampling"
    summary = (
        "One prompt, n answers: the prompt is prefilled once and n-1 children fork its block "
        "table. Full prompt blocks stay shared; the prompt's partly filled last block is copied "
        "by each child that writes into it (copy-on-write), which is why the measured saving is "
        "below the block-free estimate (n-1)Lp / (n(Lp+Lo))."
    )

    prompt_len = param.Integer(20, bounds=(1, 256), doc="prompt length Lp (tokens)")
    output_len = param.Integer(12, bounds=(1, 128), doc="answer length Lo (tokens)")
    n = param.Integer(4, bounds=(1, 16), doc="answers sampled from the one prompt")
    block_size = param.Integer(8, bounds=(1, 64), doc="tokens per KV block")
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="answer i samples with seed + i")

    def pool_blocks(self) -> int:
        """Enough blocks even without sharing: n private block tables of Lp + Lo tokens."""
        return self.n * -(-(self.prompt_len + self.output_len) // self.block_size)

    def estimate(self) -> Estimate:
        """Short at any value its bounds allow: 3.5 s at its caps."""
        return constant(5.0)

    def check(self) -> None:
        if self.pool_blocks() > MAX_TRACE_BLOCKS:
            raise ParamError(
                f"block_size: {self.n} answers of {self.prompt_len}+{self.output_len} tokens in blocks of "
                f"{self.block_size} need up to {self.pool_blocks()} blocks; at most {MAX_TRACE_BLOCKS} "
                "(raise block_size or lower n, prompt_len or output_len)"
            )

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        lp, lo, n, bs = self.prompt_len, self.output_len, self.n, self.block_size
        model = MiniModel()
        prompt = make_prompt(lp)
        store = PagedStore.for_model(model, bs, self.pool_blocks())
        tracer = Tracer(store)
        answers = parallel_sample(model, store, prompt, lo, n, self.seed, on_step=tracer)
        progress(0.5, "generating each answer alone")
        alone = [generate_alone(model, prompt, lo, self.seed + i) for i in range(n)]
        final = tracer.steps[-1]  # every answer complete, nothing freed yet
        shared, unshared = final["used_blocks"], final["unshared_blocks"]
        return {
            "block_size": bs,
            "num_blocks": self.pool_blocks(),
            "blocks_shared": shared,
            "blocks_unshared": unshared,
            "saving": 1 - shared / unshared,
            "estimate": (n - 1) * lp / (n * (lp + lo)),
            "copies": sum(e["kind"] == "copy" for s in tracer.steps for e in s["events"]),
            "prompt_blocks": -(-lp // bs),
            "prompt_last_block_fill": lp % bs,
            "identical": answers == alone,
            "prompt": decode(prompt),
            "answers": [decode(a) for a in answers],
            "steps": (steps := thin(tracer.steps)),
            "opening_step": first_step_with(steps, "copy"),  # copy-on-write beside the shared prompt blocks
        }
