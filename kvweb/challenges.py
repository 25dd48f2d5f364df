"""What to try in a lab: short challenges a learner does in the lab itself, each checked on the
lab's own result ("make round robin lose half its hits: what did you change?"), with the answer
the app reveals once the learner has tried (changed a value) or met it.

Each challenge carries a `solution` (parameters that meet it) so a test can show it is reachable,
and is not met at the lab's defaults (a challenge already met teaches nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Result = Mapping[str, Any]


@dataclass(frozen=True)
class Challenge:
    task: str
    met: Callable[[Result], bool]
    answer: str
    solution: Mapping[str, Any]  # parameters that meet it (tests/test_challenges.py)


def _mode(result: Result, mode: str) -> Result:
    """A mode's figures; a mode that did not run (it cannot serve the model) reads as nothing."""
    return next((m for m in result["modes"] if m["mode"] == mode), {})


def _router(result: Result, router: str) -> Result | None:
    return next((r for r in result.get("routers", []) if r["router"] == router), None)


def _decode_bound(result: Result) -> str:
    return next((p["bound"] for p in result.get("roofline", {}).get("points", []) if p["name"] == "decode"), "")


CHALLENGES: dict[str, tuple[Challenge, ...]] = {
    "roofline": (
        Challenge(
            "Fit more than 100,000 tokens of KV on one GPU.",
            lambda r: r.get("fits", False) and r["tp"] == 1 and r["kv_capacity_tokens"] > 100_000,
            "KV capacity = (HBM × mem_util − weights) ÷ KV per token: a bigger GPU, lighter weights (fp8, "
            "int4) or fewer KV heads per token (grouped-query attention, as in llama-3-8b: 8 KV heads for 32 "
            "query heads) raise it; llama-3-8b on an H100-SXM holds about 430,000 tokens.",
            {"gpu": "H100-SXM", "model": "llama-3-8b"},
        ),
        Challenge(
            "Make a decode step compute-bound.",
            lambda r: _decode_bound(r) == "compute",
            "A decode step reads every weight once for the whole batch, so its FLOPs per byte grow with "
            "the batch: past the ridge point (peak FLOP/s ÷ bandwidth) it is compute-bound. About a thousand "
            "sequences of 128 tokens do it on the A100; long contexts add KV bytes and push it back.",
            {"batch": 1024, "context": 128},
        ),
    ),
    "schedulers": (
        Challenge(
            "Make vLLM V1's prefix hit rate fall below 10 %.",
            lambda r: _mode(r, "vllm-v1").get("prefix_hit_rate", 1.0) < 0.10,
            "Turn prefix_caching off, or serve requests that share no prefix (workload sharegpt): the cache "
            "only helps when prompts repeat a prefix, as chat turns and few-shot tasks do.",
            {"prefix_caching": False},
        ),
        Challenge(
            "Make the papers' engine preempt requests.",
            lambda r: _mode(r, "paper").get("preemptions", 0) > 0,
            "Give it more work than its memory holds: a higher rate or longer prompts. The papers' engine "
            "keeps no prefix cache, so every request brings its whole prompt's KV, and when the blocks run "
            "out the newest running request is preempted.",
            {"rate": 20.0, "requests": 200},
        ),
    ),
    "fleet": (
        Challenge(
            "Make round robin lose at least half of the single engine's prefix hits.",
            lambda r: (
                (rr := _router(r, "round-robin")) is not None
                and rr["prefix_hit_rate"] <= 0.5 * r["single_engine"]["prefix_hit_rate"]
            ),
            "Add replicas: round robin sends a conversation's turns to different replicas, each of which "
            "caches the prefix on its own, so a later turn rarely finds its history. A cache-aware router "
            "keeps a session where its prefix is.",
            {"replicas": 16},
        ),
    ),
}


def progress(lab_name: str, result: Result) -> list[tuple[Challenge, bool]]:
    """The lab's challenges, each with whether this result meets it."""
    return [(c, bool(c.met(result))) for c in CHALLENGES.get(lab_name, ())]
