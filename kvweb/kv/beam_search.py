"""Beam search of width k, sharing prefixes through the paged store's fork and free.

Each step extends every beam by every token, keeps the k best totals of log-probabilities,
frees the beams nobody extends, lets the first kept child of a beam continue in the beam's
own sequence and forks the others (so they share all of the beam's blocks, and copy only the
partly filled last one when they write). `beam_search_naive` is the same search recomputing
every beam from scratch each step: the reference the paged one must equal. `lineage` turns a
traced search into the beams' tree (fork, survive, freed), each node with the blocks it holds.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvweb.kv.contiguous_store import ContiguousStore
from kvweb.kv.model import MiniModel, decode
from kvweb.kv.paged_store import PagedStore, StepHook


@dataclass
class Beam:
    seq_id: int
    tokens: list[int]
    score: float  # sum of the log-probabilities of `tokens`


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def best_extensions(beams: Seq[Beam], logits: np.ndarray, width: int) -> list[tuple[int, int, float]]:
    """The `width` best (beam index, token, total score); ties go to the earlier beam, then the
    smaller token id, so that both searches choose alike."""
    totals = (np.array([b.score for b in beams])[:, None] + log_softmax(logits)).ravel()
    vocab = logits.shape[-1]
    return [(int(i) // vocab, int(i) % vocab, float(totals[i])) for i in np.argsort(-totals, kind="stable")[:width]]


def beam_search(
    model: MiniModel, store: PagedStore, prompt: Seq[int], width: int, steps: int, on_step: StepHook | None = None
) -> list[Beam]:
    """The final beams, best first. Sequence 0 prefills the prompt; forks take fresh ids."""
    store.add(0)
    logits = model.forward_batch(store, [0], [list(prompt)])
    beams, next_id = [Beam(0, [], 0.0)], 1
    if on_step:
        on_step(
            {
                "step": 0,
                "dropped": [],
                "beams": [{"seq": 0, "parent": None, "token": None, "score": 0.0}],
                "tokens": {0: list(prompt)},
            }
        )
    for step in range(1, steps + 1):
        chosen = best_extensions(beams, logits, width)
        kept = {parent for parent, _, _ in chosen}
        parents = [beams[parent].seq_id for parent, _, _ in chosen]
        dropped = [b.seq_id for i, b in enumerate(beams) if i not in kept]
        for seq in dropped:
            store.free(seq)
        new: list[Beam] = []
        continued: set[int] = set()
        for parent, token, score in chosen:
            seq = beams[parent].seq_id
            if parent in continued:
                store.fork(seq, next_id)
                seq, next_id = next_id, next_id + 1
            continued.add(parent)
            new.append(Beam(seq, beams[parent].tokens + [token], score))
        beams = new
        logits = model.forward_batch(store, [b.seq_id for b in beams], [[b.tokens[-1]] for b in beams])
        if on_step:
            on_step(
                {
                    "step": step,
                    "dropped": dropped,
                    "beams": [
                        {"seq": b.seq_id, "parent": parent, "token": b.tokens[-1], "score": b.score}
                        for b, parent in zip(beams, parents)
                    ],
                    "tokens": {b.seq_id: [*prompt, *b.tokens] for b in beams},
                }
            )
    for b in beams:
        store.free(b.seq_id)
    return beams


def lineage(steps: Seq[dict[str, Any]]) -> list[dict[str, Any]]:
    """The beams of a traced search as a tree: one node per beam per step (its rank, best
    first), linked to its parent at the step before (`parent_rank`). `kind` says how it came:
    the prompt ("root"), its beam's own sequence extended ("survive") or a fork ("fork");
    `fate` what happens next: "extended", "freed" (nobody extends it) or "final"; `blocks` is
    its block table at that step."""
    nodes: list[dict[str, Any]] = []
    rank_of: dict[int, int] = {}
    for i, step in enumerate(steps):
        tables = {s["seq"]: s["block_table"] for s in step["sequences"]}
        dropped = set(steps[i + 1]["dropped"]) if i + 1 < len(steps) else set()
        for rank, b in enumerate(step["beams"]):
            parent = b["parent"]
            nodes.append(
                {
                    "step": step["step"],
                    "seq": b["seq"],
                    "rank": rank,
                    "parent_rank": None if parent is None else rank_of[parent],
                    "text": "" if b["token"] is None else decode([b["token"]]),
                    "score": b["score"],
                    "kind": "root" if parent is None else "survive" if parent == b["seq"] else "fork",
                    "fate": "final" if i + 1 == len(steps) else "freed" if b["seq"] in dropped else "extended",
                    "blocks": tables[b["seq"]],
                }
            )
        rank_of = {b["seq"]: rank for rank, b in enumerate(step["beams"])}
    return nodes


def beam_search_naive(model: MiniModel, prompt: Seq[int], width: int, steps: int) -> list[Beam]:
    """The same search with no cache kept between steps: every beam is recomputed from its
    prompt each step (sequence ids are meaningless here: -1)."""
    beams = [Beam(-1, [], 0.0)]
    for _ in range(steps):
        logits = np.stack([_logits_from_scratch(model, [*prompt, *b.tokens]) for b in beams])
        beams = [
            Beam(-1, beams[parent].tokens + [token], score)
            for parent, token, score in best_extensions(beams, logits, width)
        ]
    return beams


def _logits_from_scratch(model: MiniModel, tokens: list[int]) -> np.ndarray:
    store = ContiguousStore(model.config.layers)
    store.add(0)
    return model.forward_batch(store, [0], [tokens])[0]
