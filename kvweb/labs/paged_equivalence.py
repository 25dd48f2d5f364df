"""Lab `paged-equivalence`: paging changes nothing in the output, whatever the block size or order."""

from __future__ import annotations

from typing import Any

import param

from kvweb.kv.batching import Engine, Request
from kvweb.kv.contiguous_store import ContiguousStore
from kvweb.kv.generate import generate_alone
from kvweb.budget import Estimate, constant
from kvweb.lab import Lab, Progress, no_progress
from kvweb.kv.model import MiniModel, decode
from kvweb.kv.paged_store import PagedStore, Tracer
from kvweb.kv.prompts import make_prompt

BLOCK_SIZES = (1, 4, 16)


class PagedEquivalence(Lab):
    lab_name = "paged-equivalence"
    title = "Paged = contiguous"
    summary = (
        "Requests arriving at different iterations are batched continuously, once on a "
        "contiguous cache and once on a paged cache per block size, with blocks handed out in "
        "order and shuffled. Every run must produce exactly the tokens each request gets alone. "
        "Memory is compared in K/V rows: the contiguous cache holds one per token, a paged one "
        "whole blocks (at most one partly empty block per request)."
    )

    requests = param.Integer(4, bounds=(1, 8), doc="number of requests")
    prompt_len = param.Integer(20, bounds=(1, 128), doc="prompt length of request 0; request i has 3*i more tokens")
    output_len = param.Integer(12, bounds=(1, 64), doc="answer tokens per request")
    arrival_gap = param.Integer(2, bounds=(0, 16), doc="iterations between two arrivals (request i arrives at i * gap)")
    block_size = param.Integer(8, bounds=(1, 64), doc="one more block size to try besides 1, 4 and 16")
    seed = param.Integer(
        0, bounds=(0, 2**31 - 1), doc="sampling seed (request i samples with seed + i); also the shuffle seed"
    )

    def estimate(self) -> Estimate:
        """Short at any value its bounds allow: 4.7 s at its caps, 8.6 s of CPU on a loaded machine."""
        return constant(9.0)

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        model = MiniModel()
        requests = [
            Request(
                make_prompt(self.prompt_len + 3 * i, i), self.output_len, self.seed + i, arrival=i * self.arrival_gap
            )
            for i in range(self.requests)
        ]
        alone = [generate_alone(model, r.prompt, r.max_new, r.seed) for r in requests]
        contiguous, rows = ContiguousStore(model.config.layers), []
        answers = Engine(model, contiguous, on_step=lambda note: rows.append(contiguous.rows)).run(requests)
        runs: list[dict[str, Any]] = [
            {
                "store": "contiguous",
                "block_size": None,
                "shuffle": False,
                "identical": answers == alone,
                "peak_used_blocks": None,
                "peak_rows": max(rows),
            }
        ]
        configs = [(b, s) for b in sorted({*BLOCK_SIZES, self.block_size}) for s in (False, True)]
        for done, (block_size, shuffle) in enumerate(configs):
            progress(done / len(configs), f"block size {block_size}{', shuffled' if shuffle else ''}")
            pool = sum(-(-(len(r.prompt) + r.max_new) // block_size) for r in requests)
            store = PagedStore.for_model(model, block_size, pool, shuffle, self.seed)
            tracer = Tracer(store)
            answers = Engine(model, store, on_step=tracer).run(requests)
            runs.append(
                {
                    "store": "paged",
                    "block_size": block_size,
                    "shuffle": shuffle,
                    "identical": answers == alone,
                    "peak_used_blocks": (peak := max(s["used_blocks"] for s in tracer.steps)),
                    "peak_rows": peak * block_size,
                }
            )
        return {
            "identical": all(r["identical"] for r in runs),
            "requests": [
                {"seq": i, "arrival": r.arrival, "prompt": decode(r.prompt), "answer": decode(a)}
                for i, (r, a) in enumerate(zip(requests, alone))
            ],
            "runs": runs,
        }
