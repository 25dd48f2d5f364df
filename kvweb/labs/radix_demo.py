"""Lab `radix-demo`: requests sharing a system prompt, and a later turn of a conversation,
prefill only what the radix cache lacks, and generate exactly what a from-scratch run does."""

from __future__ import annotations

from typing import Any

import param

from kvweb.budget import CONTEXT_READS, MODEL_CALLS, Estimate, work
from kvweb.lab import Lab, ParamError, Progress, Text, no_progress
from kvweb.kv.model import MiniModel, decode, encode
from kvweb.prefix.radix_demo import run_demo


class RadixDemo(Lab):
    lab_name = "radix-demo"
    title = "Radix cache on a real model"
    summary = (
        "Each question is asked after the same system prompt; the follow-up is the next turn of "
        "the first conversation (its question, the model's answer, then the follow-up) and comes "
        "third. Every request prefills only the suffix the radix tree lacks, reading the cached "
        "K and V through the tree's pool slots; the answers equal a from-scratch run. A small pool "
        "makes the least recently used leaves go."
    )

    system = Text(
        "You are a helpful assistant. Answer briefly. ", max_length=400, doc="system prompt shared by every request"
    )
    questions = Text(
        "What is a radix tree?|Why cache the KV?|How does LRU work?|What is a page?",
        max_length=400,
        doc="questions separated by |, one request each",
    )
    follow_up = Text(" Tell me more.", max_length=200, doc="next turn of the first conversation (empty: none)")
    max_new = param.Integer(16, bounds=(1, 64), doc="tokens generated per request")
    pool = param.Integer(180, bounds=(8, 4096), doc="pool slots shared by the cache and the running request")
    page_size = param.Integer(1, bounds=(1, 16), doc="tokens per pool page (the tree caches whole pages)")
    temperature = param.Number(1.0, bounds=(0.0, 2.0), doc="sampling temperature (0: greedy)")
    seed = param.Integer(0, bounds=(0, 2**31 - 1), doc="request i samples with seed + i")

    def _encoded(self, name: str, text: str) -> list[int]:
        try:
            return encode(text)
        except ValueError as error:
            raise ParamError(f"{name}: {error}") from None

    def prompts(self) -> tuple[list[list[int]], dict[int, tuple[int, list[int]]]]:
        """The requests' prompts, and which one is a follow-up turn (of request 0)."""
        system = self._encoded("system", self.system)
        asked = [q for q in self.questions.split("|") if q]
        if not asked:
            raise ParamError("questions: give at least one question (separate them with |)")
        prompts = [system + self._encoded("questions", q) for q in asked]
        follow: dict[int, tuple[int, list[int]]] = {}
        if self.follow_up:
            at = min(2, len(prompts))
            prompts.insert(at, [])
            follow[at] = (0, self._encoded("follow_up", self.follow_up))
        return prompts, follow

    def kv_lengths(self) -> list[int]:
        """Slots each request needs: its prompt and all generated tokens but the last."""
        prompts, follow = self.prompts()
        lengths = [len(p) + self.max_new - 1 for p in prompts]
        for i, (j, question) in follow.items():
            lengths[i] = len(prompts[j]) + self.max_new + len(question) + self.max_new - 1
        return lengths

    def estimate(self) -> Estimate:
        """Each request's tokens read against their context (about n^2 / 2 for n slots) and its tokens
        decoded, once through the radix cache and once for the reference."""
        lengths = self.kv_lengths()
        return work(
            (sum(n * n for n in lengths) / 2, CONTEXT_READS),
            (2 * self.max_new * len(lengths), MODEL_CALLS),
            lower=("questions", "system", "max_new"),
        )

    def check(self) -> None:
        longest = max(self.kv_lengths())
        need = -(-longest // self.page_size) * self.page_size
        if self.pool < need:
            raise ParamError(
                f"pool: {self.pool} slots cannot hold the longest request ({longest} tokens); allowed: at least {need}"
            )

    def run(self, progress: Progress = no_progress) -> dict[str, Any]:
        self.check()
        prompts, follow = self.prompts()
        model = MiniModel()
        done = run_demo(model, prompts, self.max_new, self.pool, self.page_size, self.seed, self.temperature, follow)
        requests = []
        for i, r in enumerate(done):
            for node in (*r.running_tree["nodes"], *r.tree["nodes"]):
                node["text"] = decode(node.pop("tokens"))
            requests.append(
                {
                    "index": i,
                    "follow_up": i in follow,
                    "prompt": decode(r.prompt),
                    "output": decode(r.output),
                    "reference": decode(r.reference),
                    "suffix": decode(r.prompt[r.cached_tokens :]),
                    "match_node": r.match_node,
                    "cached_tokens": r.cached_tokens,
                    "prefilled_tokens": r.prefilled_tokens,
                    "identical": r.output == r.reference,
                    "evicted": r.evicted,
                    "running_tree": r.running_tree,
                    "tree": r.tree,
                }
            )
        steps = [t for r in requests for t in (r["running_tree"], r["tree"])]
        prompt_tokens = sum(len(r.prompt) for r in done)
        cached = sum(r.cached_tokens for r in done)
        return {
            "identical": all(r["identical"] for r in requests),
            "cached_tokens": cached,
            "prefilled_tokens": prompt_tokens - cached,
            "hit_rate": cached / prompt_tokens,
            "evicted": sum(r.evicted for r in done),
            "requests": requests,
            # two steps per request (running, done): open on the first that changes the tree's shape
            "opening_step": next(
                (i for i, t in enumerate(steps) if any(n["split"] or n["ghost"] for n in t["nodes"])), 0
            ),
        }
