"""kvweb's radix cache replays what SGLang's own RadixCache did (sglang 0.5.23, recorded by
scripts/parity/record_sglang.py) on the same operations, and must do the same at every step:
match lengths, tokens inserted and evicted, sizes, free slots, the tree's shape, the LRU order of
the evictable leaves and which runs lost their KV. Its scheduler replays SGLang's prefill rounds
(SchedulePolicy order, PrefillAdder admissions), with LoRA adapters too (`can_schedule_lora_req`
skipping a request whose adapter would exceed max_loras_per_batch). SGLang itself is not needed here; see
scripts/parity/README-sglang.md."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.prefix.radix_cache import RadixCache, TreeNode
from kvweb.serving.memory.lora import LoraConfig, radix_key
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, RadixScheduler
from kvweb.serving.loop.sequence import Seq
from kvweb.serving.load.workload import Request

from kvweb.labs.schedulers import CHECKED
from parity import sglang_workloads  # scripts/parity/ (pytest's pythonpath holds scripts/)

ROOT = Path(__file__).resolve().parent.parent

DATA = ROOT / "tests" / "data" / "parity" / "sglang-0.5.23-radix.json.gz"
FIELDS = (
    "result",
    "evicted",
    "evictable",
    "protected",
    "free",
    "nodes",
    "edge lengths",
    "shape",
    "LRU leaves",
    "cached per run",
)


class KvwebCache:
    """sglang_workloads.Cache over kvweb's RadixCache."""

    def __init__(self, pool: int, page: int) -> None:
        self.cache = RadixCache(pool, page)
        self.page = page
        self.root = self.cache.root
        self.evicted = 0
        evict = self.cache.evict

        def counted(n: int) -> int:  # alloc evicts through it too
            freed = evict(n)
            self.evicted += freed
            return freed

        self.cache.evict = counted  # type: ignore[method-assign]

    def match(self, tokens: list[int]) -> tuple[int, TreeNode]:
        match = self.cache.match_prefix(tokens)
        return match.length, match.node

    def lock(self, node: TreeNode) -> None:
        self.cache.lock(node)

    def unlock(self, node: TreeNode) -> None:
        self.cache.unlock(node)

    def alloc(self, n: int) -> np.ndarray | None:
        return self.cache.alloc(n)

    def free(self, slots: np.ndarray) -> None:
        self.cache.pool.free(slots)

    def path_slots(self, node: TreeNode) -> np.ndarray:
        parts = []
        while node is not self.root:
            parts.append(node.value)
            node = node.parent
        return np.concatenate(parts[::-1]) if parts else np.zeros(0, dtype=np.int64)

    def insert(self, tokens: list[int], parts: list[np.ndarray], own: int) -> int:
        return self.cache.insert(tokens, np.concatenate(parts))  # frees the copies and the tail itself

    def split(self, tokens: list[int]) -> None:
        """Insert a cached run with the tree's own slots (so nothing is freed)."""
        node, i, parts = self.root, 0, []
        while i < len(tokens):
            node = next(c for c in node.children.values() if c.key[: self.page].tolist() == tokens[i : i + self.page])
            parts.append(node.value[: len(tokens) - i])
            i += len(node.key)
        self.cache.insert(tokens, np.concatenate(parts))

    def evict(self, n: int) -> int:
        return self.cache.evict(n)

    def sizes(self) -> tuple[int, int, int, int]:
        return self.cache.evictable_size, self.cache.protected_size, self.cache.pool.available, self.evicted

    def children(self, node: TreeNode) -> list[TreeNode]:
        return list(node.children.values())

    def key(self, node: TreeNode) -> list[int]:
        return node.key.tolist()

    def lock_ref(self, node: TreeNode) -> int:
        return node.lock_ref

    def stamp(self, node: TreeNode) -> tuple[int, int]:
        return node.last_access, node.id  # eviction's order: ties go to the older node


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    with gzip.open(DATA, "rt") as f:
        return json.load(f)


def test_recorded_operations_are_the_workloads(recorded: dict[str, Any]) -> None:
    """The recording was made from these definitions (else: bash scripts/parity/record-sglang.sh)."""
    works = sglang_workloads.workloads()
    assert recorded["ops_digest"] == sglang_workloads.digest(works)
    assert sorted(recorded["runs"]) == sorted(w["name"] for w in works)


@pytest.mark.parametrize("work", sglang_workloads.workloads(), ids=lambda w: w["name"])
def test_kvweb_radix_cache_does_what_sglang_did(work: dict[str, Any], recorded: dict[str, Any]) -> None:
    theirs = recorded["runs"][work["name"]]
    ours = sglang_workloads.replay(work, KvwebCache(work["pool"], work["page_size"]))
    for i, (op, a, b) in enumerate(zip(work["ops"], theirs, ours)):
        if a != b:
            diff = {f: (x, y) for f, x, y in zip(FIELDS, a, b) if x != y}
            context = [o[0] for o in work["ops"][max(0, i - 5) : i]]
            pytest.fail(
                f"{work['name']} operation {i} {op[0]} {op[1:]}: first divergence (sglang, kvweb): {diff}; "
                f"the operations before it: {context}"
            )
    assert len(theirs) == len(ours) == len(work["ops"])


def kvweb_round(r: dict[str, Any]) -> dict[str, Any]:
    """The same prefill round on kvweb's RadixScheduler: its tree, running requests and waiting
    queue set as SGLang's were (with adapters: runs cached under theirs, requests of theirs), then
    one `_prefill_batch`."""
    lora = r.get("max_loras")
    tree = RadixCache(r["pool"])
    for run in r["cached"]:
        adapter, run = run if lora else (0, run)
        tree.insert(radix_key(np.array(run), adapter), tree.alloc(len(run)))
    tree.alloc(r["held"])
    sched = RadixScheduler(
        CostModel(GPUS["A100-40GB"], MODELS["opt-13b-like"]),
        tree,
        RadixConfig(
            max_len=1 << 20,
            max_seqs=r["max_running"],
            chunk_size=r["chunk"],
            max_prefill_tokens=r["max_prefill"],
            policy=r["policy"],
            lora=LoraConfig(lora) if lora else None,
        ),
    )
    sched.ratio = r["ratio"]
    for i, (prompt, output, generated, *adapter) in enumerate(r["running"]):
        seq = Seq(Request(1000 + i, 0.0, prompt, output, adapter=adapter[0] if adapter else 0))
        seq.gen0 = generated
        sched.running[seq.id] = seq
        if lora:
            sched.adapters.join(seq.req.adapter)
    for i, (tokens, output, *adapter) in enumerate(r["waiting"]):
        tokens = np.array(tokens + [0] * output)
        req = Request(i, 0.0, len(tokens) - output, output, tokens=tokens, adapter=adapter[0] if adapter else 0)
        sched.waiting.append(Seq(req))
    order: list[int] = []
    ordered = sched._ordered

    def noted() -> list[Seq]:  # the policy's order, noted on the way
        seqs = ordered()
        order[:] = [seq.id for seq in seqs]
        return seqs

    sched._ordered = noted  # type: ignore[method-assign]
    batch = sched._prefill_batch() or []
    return {
        "order": order,
        "admitted": [[seq.id, seq.hit, n] for seq, n in batch],
        "chunked": None if sched.chunked is None else sched.chunked.id,
        "batch_is_full": sched.batch_is_full,
    }


def test_recorded_rounds_are_the_definitions(recorded: dict[str, Any]) -> None:
    assert recorded["rounds_digest"] == sglang_workloads.digest(sglang_workloads.rounds())


@pytest.mark.parametrize("r", sglang_workloads.rounds(), ids=lambda r: r["name"])
def test_kvweb_radix_scheduler_admits_what_sglang_admitted(r: dict[str, Any], recorded: dict[str, Any]) -> None:
    theirs = dict(recorded["rounds"][r["name"]])
    stop = theirs.pop("stop")
    ours = kvweb_round(r)
    assert ours == theirs, f"{r['name']} (SGLang stopped at {stop}): sglang {theirs}, kvweb {ours}"


def test_the_lab_says_what_was_checked(recorded: dict[str, Any]) -> None:
    operations = sum(map(len, recorded["runs"].values()))
    assert (
        f"SGLang {recorded['sglang']}'s own RadixCache: {len(recorded['runs'])} workloads, {operations:,} operations "
        f"and {len(recorded['rounds'])} admission rounds"
    ) in CHECKED
