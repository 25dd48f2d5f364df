"""Lab `block-tables`: two requests decoding on a paged KV cache, their block tables step by step."""

from __future__ import annotations

from typing import Any

import param

from kvweb.kv.batching import Engine, Request
from kvweb.kv.generate import generate_alone
from kvweb.budget import Estimate, constant
from kvweb.lab import Lab, ParamError, Progress, no_progress
from kvweb.kv.model import MiniModel, decode
from kvweb.kv.paged_store import PagedStore, Tracer, first_step_with, thin
from kvweb.kv.prompts import make_prompt


class BlockTables(Lab):
    lab_name = "block-tables"
    title = "Block tables"
    summary = (
        "Two requests prefill and decode together on a paged KV cache. Each has a block table "
        "mapping its logical blocks to physical ones; a block is taken from the free list only "
        "when the last one is full, so at most one block per request is partly empty. Each block "
        "shows the characters it holds; blocks are handed out in shuffled order, so a request's "
        "text lies scattered over the pool and only its table puts it back in order."
    )

    prompt_a = param.Integer(20, bounds=(1, 256), doc="prompt length of request 0 (tokens)")
    prompt_b = param.Integer(24, bounds=(1, 256), doc="prompt length of request 1 (tokens)")
    decode_steps = param.Integer(12, bounds=(1, 128), doc="decode steps (answer tokens) of each request")
    block_size = param.Integer(8, bounds=(1, 64), doc="tokens per KV block")
    num_blocks = param.Integer(12, bounds=(1, 256), doc="physical blocks in the pool")
    shuffle = param.Boolean(
        True,
        doc="hand out free blocks in a seeded random order (off: 0, 1, 2, ...), so that "
        "a table's blocks lie anywhere in the pool",
    )
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="sampling seed (request i samples with seed + i)")

    def blocks_needed(self) -> int:
        return sum(-(-(p + self.decode_steps) // self.block_size) for p in (self.prompt_a, self.prompt_b))

    def estimate(self) -> Estimate:
        """Short at any value its bounds allow: 1.5 s at its caps."""
        return constant(2.5)

    def check(self) -> None:
        if self.blocks_needed() > self.num_blocks:
            raise ParamError(
                f"num_blocks: {self.num_blocks} blocks of {self.block_size} tokens cannot hold both "
                f"requests; at least {self.blocks_needed()} are needed (or raise block_size)"
            )

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        model = MiniModel()
        store = PagedStore.for_model(model, self.block_size, self.num_blocks, self.shuffle, self.seed)
        tracer = Tracer(store)
        requests = [
            Request(make_prompt(length, i), self.decode_steps, self.seed + i)
            for i, length in enumerate((self.prompt_a, self.prompt_b))
        ]
        answers = Engine(model, store, on_step=tracer).run(requests)
        alone = [generate_alone(model, r.prompt, r.max_new, r.seed) for r in requests]
        return {
            "block_size": self.block_size,
            "num_blocks": self.num_blocks,
            "requests": [
                {"seq": i, "prompt": decode(r.prompt), "answer": decode(a)}
                for i, (r, a) in enumerate(zip(requests, answers))
            ],
            "peak_used_blocks": max(s["used_blocks"] for s in tracer.steps),
            "identical": answers == alone,
            "steps": (steps := thin(tracer.steps)),
            "opening_step": first_step_with(steps, "allocate", after=1),  # a decode step that takes a block
        }
