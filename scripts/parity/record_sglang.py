"""Drive SGLang's own RadixCache (and its token-to-KV pool allocator, on the CPU) through the
workloads of sglang_workloads.py and write what it did to tests/data/parity/, for
tests/test_parity_sglang.py to replay on kvweb's radix cache. Runs in the venv that
setup-sglang.sh makes (.parity/sglang); see README-sglang.md.
"""

from __future__ import annotations

import ast
import gzip
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import itertools
import json
import sys
import time
import types
from array import array
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import sglang_workloads  # noqa: E402

OUT = HERE.parent.parent / "tests" / "data" / "parity" / "sglang-0.5.23-radix.json.gz"


class _Placeholder(type):
    def __getattr__(cls, attr: str) -> type:
        return cls


class _NoTorchvision(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """sglang.srt.configs imports torchvision.transforms (multimodal preprocessing) when the radix
    cache is imported. The registry's torchvision wheels load only against CUDA torch (libtorch_cuda.so),
    so an empty stand-in is imported instead; nothing on the radix cache's path calls it. Probes
    (importlib.util.find_spec, as transformers asks) still find no torchvision."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != "torchvision" and not name.startswith("torchvision."):
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code is importlib.util.find_spec.__code__:
                return None
            frame = frame.f_back
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda attr: _Placeholder(attr, (), {})
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


sys.meta_path.insert(0, _NoTorchvision())

import torch  # noqa: E402
from sglang.srt.mem_cache import radix_cache  # noqa: E402
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator  # noqa: E402
from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator  # noqa: E402
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams  # noqa: E402
from sglang.srt.mem_cache.cache_init_params import CacheInitParams  # noqa: E402
from sglang.srt import runtime_context  # noqa: E402
from sglang.srt.managers.schedule_batch import Req  # noqa: E402
from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder, SchedulePolicy  # noqa: E402
from sglang.srt.sampling.sampling_params import SamplingParams  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402


class _Clock:
    """radix_cache's `time`: monotonic() is a counter. LRU order is the order of the calls, as with an
    ideal clock; the real one can return the same value twice, and such ties fall to set order."""

    def __init__(self) -> None:
        self._tick = itertools.count(1)

    def monotonic(self) -> float:
        return float(next(self._tick))

    def perf_counter(self) -> float:
        return time.perf_counter()


class SGLangCache:
    """sglang_workloads.Cache over SGLang's RadixCache, called the way its scheduler calls it."""

    def __init__(self, pool: int, page: int) -> None:
        radix_cache.time = _Clock()
        if page == 1:
            self.allocator = TokenToKVPoolAllocator(pool, torch.int64, "cpu", None, need_sort=True)
        else:
            self.allocator = PagedTokenToKVPoolAllocator(pool, page, torch.int64, "cpu", None, need_sort=True)
        self.page = page
        self.tree = radix_cache.RadixCache(
            CacheInitParams(
                disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=self.allocator, page_size=page
            )
        )
        self.root = self.tree.root_node
        self.evicted = 0
        evict = self.tree.evict

        def counted(params: EvictParams) -> Any:  # evict_for_alloc calls self.evict as well
            result = evict(params)
            self.evicted += result.num_tokens_evicted
            return result

        self.tree.evict = counted

    def _key(self, tokens: list[int], extra_key: str | None = None) -> radix_cache.RadixKey:
        return radix_cache.RadixKey(array("q", tokens), extra_key=extra_key).page_aligned(self.page)

    def match(self, tokens: list[int]) -> tuple[int, Any]:
        result = self.tree.match_prefix(MatchPrefixParams(key=radix_cache.RadixKey(array("q", tokens))))
        return result.device_prefix_len, result.last_device_node

    def lock(self, node: Any) -> None:
        self.tree.inc_lock_ref(node)

    def unlock(self, node: Any) -> None:
        self.tree.dec_lock_ref(node)

    def alloc(self, n: int) -> torch.Tensor | None:
        need = -(-n // self.page) * self.page
        self.allocator.evict_to_free_tokens(self.tree, need)  # the scheduler's evict_from_tree_cache
        return self.allocator.alloc(need)

    def free(self, slots: torch.Tensor) -> None:
        self.allocator.free(slots)

    def path_slots(self, node: Any) -> torch.Tensor:
        return self.tree.path_device_indices(node)

    def insert(self, tokens: list[int], parts: list[torch.Tensor], own: int, extra_key: str | None = None) -> int:
        """RadixCache._insert_cache: insert, then free the row's copies of what was cached already
        (from the protected prefix on); release_kv_cache frees the row past the last whole page.
        `extra_key`: a LoRA request's (its lora_id), which keys every token of the run."""
        row = torch.cat(parts)
        key = self._key(tokens, extra_key)
        already = self.tree.insert(InsertParams(key=key, value=row[: len(key)].clone())).prefix_len
        self.allocator.free(row[own:already])
        self.allocator.free(row[len(key) :])
        return already

    def split(self, tokens: list[int]) -> None:
        self.tree.insert(InsertParams(key=self._key(tokens), value=None))

    def evict(self, n: int) -> int:
        return self.tree.evict(EvictParams(num_tokens=n)).num_tokens_evicted

    def sizes(self) -> tuple[int, int, int, int]:
        return self.tree.evictable_size(), self.tree.protected_size(), self.allocator.available_size(), self.evicted

    def children(self, node: Any) -> list[Any]:
        return list(node.children.values())

    def key(self, node: Any) -> list[int]:
        return list(node.key)

    def lock_ref(self, node: Any) -> int:
        return node.lock_ref

    def stamp(self, node: Any) -> float:
        return node.last_access_time


def _sglang_method(path: str, cls: str, name: str) -> Any:
    """A method of SGLang's, compiled from the wheel's own source: `Scheduler.can_schedule_lora_req`
    and `LoRAManager.validate_lora_batch` are plain Python, but importing sglang.srt.managers.scheduler
    or sglang.srt.lora.lora_manager imports sglang.srt.layers.moe (fused_moe_triton ->
    eplb.expert_distribution), which imports einops and GPU kernels beyond requirements-sglang.txt."""
    source = Path(radix_cache.__file__).parent.parent.joinpath(path).read_text()
    klass = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls)
    method = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {"Optional": Any}
    exec(compile(ast.Module([method], []), path, "exec"), namespace)
    return namespace[name]


def lora_scheduler(max_loras: int) -> types.SimpleNamespace:
    """What `Scheduler.can_schedule_lora_req` reads of the scheduler, its own code bound to it: no
    drainer, no overlap loading, and the tp worker's LoRA manager with `max_loras_per_batch` slots and
    no pinned adapter, whose `validate_lora_batch` is SGLang's."""
    manager = types.SimpleNamespace(
        max_loras_per_batch=max_loras,
        num_pinned_loras=0,
        memory_pool=types.SimpleNamespace(max_loras_per_batch=max_loras),
    )
    manager.validate_lora_batch = types.MethodType(
        _sglang_method("lora/lora_manager.py", "LoRAManager", "validate_lora_batch"), manager
    )
    scheduler = types.SimpleNamespace(
        lora_drainer=None,
        enable_lora_overlap_loading=False,
        tp_worker=types.SimpleNamespace(model_runner=types.SimpleNamespace(lora_manager=manager)),
    )
    scheduler.can_schedule_lora_req = types.MethodType(
        _sglang_method("managers/scheduler.py", "Scheduler", "can_schedule_lora_req"), scheduler
    )
    return scheduler


def _lora_id(adapter: int) -> str | None:
    return f"lora{adapter}" if adapter else None


def _req(rid: str, tokens: list[int], max_new: int, generated: int = 0, adapter: int = 0) -> Req:
    req = Req(rid, "", array("q", tokens), SamplingParams(max_new_tokens=max_new), lora_id=_lora_id(adapter))
    req.output_ids.extend([0] * generated)
    return req


def prefill_round(r: dict[str, Any]) -> dict[str, Any]:
    """One pass of Scheduler._get_new_batch_prefill_raw, with nothing chunked before it and the
    features kvweb does not model off (HiCache, priorities, mamba): SchedulePolicy.calc_priority,
    then per request in that order init_next_round_input (the match, stopping a token short) and
    PrefillAdder.add_one_req, until the batch is full or the adder says stop. A round with adapters
    (`max_loras`) runs with enable_lora: the cached runs and requests carry lora ids (their radix
    keys the extra_key), and a request `can_schedule_lora_req` refuses is skipped (`continue`)."""
    lora = r.get("max_loras")
    cache = SGLangCache(r["pool"], 1)
    for run in r["cached"]:
        adapter, run = run if lora else (0, run)
        cache.insert(run, [cache.alloc(len(run))], 0, _lora_id(adapter))
    cache.alloc(r["held"])  # the running requests' own KV
    running = [_req(f"run{i}", [1] * p, out, gen, *a) for i, (p, out, gen, *a) in enumerate(r["running"])]
    waiting = [_req(str(i), tokens, out, 0, *a) for i, (tokens, out, *a) in enumerate(r["waiting"])]
    scheduler = lora_scheduler(lora) if lora else None
    running_loras = {req.lora_id for req in running}
    SchedulePolicy(r["policy"], cache.tree, False, False, False).calc_priority(waiting)
    adder = PrefillAdder(
        1,
        cache.tree,
        cache.allocator,
        types.SimpleNamespace(reqs=running),
        r["ratio"],
        r["max_prefill"],
        r["chunk"],
        max_running_requests=r["max_running"],
    )
    stop, full = "queue", False
    for req in waiting:
        if adder.budget_state() == AddReqResult.OTHER:
            stop = "OTHER"
            break
        if scheduler and not scheduler.can_schedule_lora_req(req, running_loras):
            continue
        if len(adder.can_run_list) >= r["max_running"] - len(running):  # get_num_allocatable_reqs
            stop, full = "running", True
            break
        req.init_next_round_input(cache.tree)
        res = adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None)
        running_loras.add(req.lora_id)
        if res != AddReqResult.CONTINUE:
            stop = res.name
            if res == AddReqResult.NO_TOKEN:
                full = len(adder.can_run_list) > 0 or len(running) > 0
            break
    return {
        "order": [int(req.rid) for req in waiting],
        "admitted": [[int(req.rid), req.prefix_len, req.extend_end - req.prefix_len] for req in adder.can_run_list],
        "chunked": None if adder.new_chunked_req is None else int(adder.new_chunked_req.rid),
        "stop": stop,
        "batch_is_full": full,
    }


def main() -> None:
    works = sglang_workloads.workloads()
    started = time.perf_counter()
    runs = {w["name"]: sglang_workloads.replay(w, SGLangCache(w["pool"], w["page_size"])) for w in works}
    # PrefillAdder reads the server config (get_exec, get_schedule): SGLang's defaults, published as in its tests
    runtime_context.publish(ServerArgs(model_path="dummy", device="cpu"), role="test")
    rounds = {r["name"]: prefill_round(r) for r in sglang_workloads.rounds()}
    data = {
        "sglang": importlib.metadata.version("sglang"),
        "torch": importlib.metadata.version("torch"),
        "ops_digest": sglang_workloads.digest(works),
        "rounds_digest": sglang_workloads.digest(sglang_workloads.rounds()),
        "runs": runs,
        "rounds": rounds,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(OUT, "wb", compresslevel=9, mtime=0) as f:  # mtime 0: the same data, the same bytes
        f.write(json.dumps(data, separators=(",", ":")).encode())
    n = sum(len(r) for r in runs.values())
    print(
        f"{len(runs)} workloads, {n} operations, {len(rounds)} prefill rounds in {time.perf_counter() - started:.1f} s -> "
        f"{OUT.relative_to(HERE.parent.parent)} ({OUT.stat().st_size} bytes)"
    )


if __name__ == "__main__":
    main()
