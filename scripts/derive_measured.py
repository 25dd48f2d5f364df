"""Derive kvweb's measured-kernel tables and silicon rows from aiconfigurator-core 0.12.0's data.

Run with the separate venv that holds the package (never kvweb's own: it needs pandas/pyarrow):

    python3 -m venv .venv-measured && .venv-measured/bin/pip install aiconfigurator-core==0.12.0
    .venv-measured/bin/python scripts/derive_measured.py

Source: aiconfigurator-core 0.12.0 (NVIDIA, Apache-2.0), `aiconfigurator_core/systems/data/<gpu>/<op>/
<engine>/<version>/*.parquet` and `systems/silicon_sample.csv`. Only data is taken, as compact tables;
no code. Writes `kvweb/gpu/measured/<gpu>_<engine>.json` and `kvweb/gpu/measured/silicon_rows.json`.

Versions (VERSIONS): GEMM and attention come from the package's "current" query slot (vLLM 0.24.0,
SGLang 0.5.14; A100 vLLM 0.14.0), the only collection complete on every GPU here; all-reduce from
the collection nearest the measured deployments' own engines (vLLM 0.12-0.19 -> 0.19.0, SGLang
0.5.1-0.5.9 -> 0.5.9), CUDA-graph variant (what a decode step replays).

Every table is made monotone by a running maximum along each axis (a larger operation is never
priced cheaper; measurement noise otherwise inverts a few neighbours), then rounded to 4
significant digits, in microseconds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

import aiconfigurator_core

PACKAGE = "aiconfigurator-core"
PACKAGE_VERSION = "0.12.0"
LICENCE = "Apache-2.0 (NVIDIA CORPORATION & AFFILIATES)"
ROOT = Path(aiconfigurator_core.__file__).parent / "systems"
OUT = Path(__file__).resolve().parents[1] / "kvweb" / "gpu" / "measured"
SCRIPT = "scripts/derive_measured.py"

# (gpu, engine) -> op folder -> version folder
VERSIONS = {
    ("h100_sxm", "vllm"): {"gemm": "0.24.0", "attention": "0.24.0", "comm": "0.19.0", "moe": "0.24.0"},
    ("h200_sxm", "vllm"): {"gemm": "0.24.0", "attention": "0.24.0", "comm": "0.19.0", "moe": "0.24.0"},
    ("b200_sxm", "vllm"): {"gemm": "0.24.0", "attention": "0.24.0", "comm": "0.19.0", "moe": "0.24.0"},
    ("a100_sxm", "vllm"): {"gemm": "0.14.0", "attention": "0.14.0", "comm": "0.14.0", "moe": "0.14.0"},
    ("h100_sxm", "sglang"): {"gemm": "0.5.14", "attention": "0.5.14", "comm": "0.5.9", "moe": "0.5.14"},
    ("h200_sxm", "sglang"): {"gemm": "0.5.14", "attention": "0.5.14", "comm": "0.5.9", "moe": "0.5.14"},
    ("b200_sxm", "sglang"): {"gemm": "0.5.14", "attention": "0.5.14", "comm": "0.5.9", "moe": "0.5.14"},
}
GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block")
M_GRID = (
    1,
    2,
    4,
    8,
    16,
    32,
    48,
    64,
    96,
    128,
    192,
    256,
    384,
    512,
    768,
    1024,
    1536,
    2048,
    3072,
    4096,
    8192,
    16384,
    32768,
)
NK_MIN = 256  # smaller per-GPU GEMM dims are clamped to this (every model here has none below it but heads x dim)
# Attention shapes (query heads, KV heads, head dim, window) of the models kvweb ships, at tp 1, 2, 4, 8
MODEL_ATTENTION = {
    "llama-3.1-8b / mixtral-8x7b": (32, 8, 128, (0,)),
    "llama-3.1-70b / qwen3-32b / qwen2.5-72b": (64, 8, 128, (0,)),
    "llama-3.1-405b": (128, 8, 128, (0,)),
    "qwen3-235b-a22b": (64, 4, 128, (0,)),
    "qwen2.5-7b": (28, 4, 128, (0,)),
    "gpt-oss": (64, 8, 64, (0, 128)),
    "gemma-3-27b": (32, 16, 128, (0, 1024)),
    "opt-13b": (40, 40, 128, (0,)),
}
# MoE shapes (hidden, expert inter size, top k, experts, dtype) kvweb can price: gpt-oss-120b
# (MXFP4 experts), Qwen3-235B-A22B (FP8)
MOE_SHAPES = (
    (2880, 2880, 4, 128, "w4a16_mxfp4"),
    (2880, 2880, 4, 32, "w4a16_mxfp4"),
    (4096, 1536, 8, 128, "fp8"),
    (4096, 1536, 8, 128, "fp8_block"),
    (4096, 1536, 8, 128, "bfloat16"),
)
# Routing the MoE tables assume: AIConfigurator's own default for these models (sdk/models/moe.py: power law,
# alpha 1.2): skewed routing touches fewer experts at a few tokens than "balanced" (every expert gets
# tokens / experts) and loads the hottest expert more at many
MOE_ROUTING = "power_law_1.2"
SILICON_GPUS = ("h100_sxm", "h200_sxm", "b200_sxm")


def sig(a: np.ndarray) -> list:
    """Microseconds to 4 significant digits (nested lists; NaN never reaches here)."""

    def r(x: float) -> float:
        return float(f"{x:.4g}")

    return np.vectorize(r, otypes=[float])(a).tolist()


def monotone(a: np.ndarray) -> np.ndarray:
    for axis in range(a.ndim):
        a = np.maximum.accumulate(a, axis=axis)
    return a


def fill_along(a: np.ndarray, axis: int, coords: list[int]) -> np.ndarray:
    """Missing cells (shapes a kernel did not run) filled from the last measured cell before them
    along `axis`, in proportion to the coordinate (the work grows with it)."""
    a = np.moveaxis(a.copy(), axis, -1)
    for row in a.reshape(-1, a.shape[-1]):
        for j in range(1, row.size):
            if math.isnan(row[j]) and not math.isnan(row[j - 1]):
                row[j] = row[j - 1] * coords[j] / coords[j - 1]
    return np.moveaxis(a, -1, axis)


def read(gpu: str, op: str, engine: str, version: str, name: str) -> pd.DataFrame:
    return pd.read_parquet(ROOT / "data" / gpu / op / engine / version / f"{name}.parquet")


def gemm_tables(gpu: str, engine: str, version: str) -> dict:
    df = read(gpu, "gemm", engine, version, "gemm_perf")
    out = {}
    for dtype in sorted(set(df.gemm_dtype) & set(GEMM_DTYPES + ("nvfp4",))):
        # the fastest kernel the engine ships for each shape (fp8_block has several)
        d = df[df.gemm_dtype == dtype].groupby(["m", "n", "k"]).latency.min()
        ms = [m for m in M_GRID if m in d.index.levels[0]]
        ns = [n for n in sorted(d.index.levels[1]) if n >= NK_MIN]
        ks = [k for k in sorted(d.index.levels[2]) if k >= NK_MIN]
        grid = np.full((len(ms), len(ns), len(ks)), np.nan)
        for i, m in enumerate(ms):
            for j, n in enumerate(ns):
                for l, k in enumerate(ks):
                    grid[i, j, l] = d.get((m, n, k), np.nan)
        for axis, coords in enumerate((ms, ns, ks)):  # fp8_block kernels skip some shapes
            grid = fill_along(grid, axis, coords)
        if np.isnan(grid).any():
            continue
        out[dtype] = {"m": ms, "n": ns, "k": ks, "us": sig(monotone(grid) * 1e3)}
    return out


def attention_shapes() -> set[tuple[int, int, int, int]]:
    shapes = set()
    for heads, kv, dim, windows in MODEL_ATTENTION.values():
        for tp in (1, 2, 4, 8):
            if heads % tp == 0:
                shapes |= {(heads // tp, -(-kv // tp), dim, w) for w in windows}
    return shapes


def attention_tables(gpu: str, engine: str, version: str) -> tuple[dict, dict]:
    # A100's tables predate sliding windows: all of their rows are full attention
    ctx, gen = (
        read(gpu, "attention", engine, version, name)
        for name in ("context_attention_perf", "generation_attention_perf")
    )
    ctx, gen = (d if "window_size" in d else d.assign(window_size=0) for d in (ctx, gen))
    context, generation = {}, {}
    for heads, kv, dim, window in sorted(attention_shapes()):
        for kv_dtype in ("bfloat16", "fp8"):
            key = f"h{heads}_kv{kv}_d{dim}_w{window}_{kv_dtype}"
            sel = lambda d: d[
                (d.num_heads == heads)
                & (d.num_key_value_heads == kv)
                & (d.head_dim == dim)  # noqa: E731
                & (d.window_size == window)
                & (d.kv_cache_dtype == kv_dtype)
            ]
            c = sel(ctx)
            c = c[c.batch_size == 1].groupby("isl").latency.min()
            if len(c) >= 4:
                context[key] = {"s": [int(s) for s in c.index], "us": sig(monotone(c.to_numpy()) * 1e3)}
            g = sel(gen)
            if len(g):
                g = g.assign(kv_len=g.isl + g.step).groupby(["batch_size", "kv_len"]).latency.min()
                bs, ls = sorted(g.index.levels[0]), sorted(g.index.levels[1])
                grid = np.array([[g.get((b, s), np.nan) for s in ls] for b in bs])
                grid = fill_along(fill_along(grid, 1, ls), 0, bs)
                if not np.isnan(grid).any():
                    generation[key] = {
                        "batch": [int(b) for b in bs],
                        "kv_len": [int(s) for s in ls],
                        "us": sig(monotone(grid) * 1e3),
                    }
    return context, generation


def allreduce_tables(gpu: str, engine: str, version: str) -> dict:
    df = read(gpu, "comm", engine, version, "custom_allreduce_perf")
    df = df[df.kernel_source.str.endswith("graph")]
    out = {}
    for tp, d in df.groupby("num_gpus"):
        d = d.groupby("message_size").latency.min()
        # message_size counts bf16 elements (the collector's tensors are [tokens, 4096] of them)
        out[str(int(tp))] = {"bytes": [int(2 * s) for s in d.index], "us": sig(monotone(d.to_numpy()) * 1e3)}
    return out


def moe_tables(gpu: str, engine: str, version: str) -> dict:
    path = ROOT / "data" / gpu / "moe" / engine / version / "moe_perf.parquet"
    if not path.exists():
        return {}
    df = pd.read_parquet(path)
    df = df[(df.distribution == MOE_ROUTING) & (df.moe_ep_size == 1)]
    out = {}
    for hidden, inter, topk, experts, dtype in MOE_SHAPES:
        d = df[
            (df.hidden_size == hidden)
            & (df.inter_size == inter)
            & (df.topk == topk)
            & (df.num_experts == experts)
            & (df.moe_dtype == dtype)
        ]
        for tp, t in d.groupby("moe_tp_size"):
            t = t.groupby("num_tokens").latency.min()
            if len(t) >= 4:
                out[f"h{hidden}_i{inter}_k{topk}_e{experts}_{dtype}_tp{int(tp)}"] = {
                    "tokens": [int(n) for n in t.index],
                    "us": sig(monotone(t.to_numpy()) * 1e3),
                }
    return out


def header(what: str, files: list[str]) -> dict:
    return {
        "what": what,
        "package": PACKAGE,
        "package_version": PACKAGE_VERSION,
        "licence": LICENCE,
        "files": files,
        "script": SCRIPT,
        "units": "microseconds per call on one GPU",
    }


def kernel_file(gpu: str, engine: str) -> dict:
    v = VERSIONS[(gpu, engine)]
    context, generation = attention_tables(gpu, engine, v["attention"])
    files = [f"systems/data/{gpu}/{op}/{engine}/{ver}/" for op, ver in v.items()]
    return {
        "source": header(f"kernel latencies, {engine} on {gpu}", files),
        "gpu": gpu,
        "engine": engine,
        "versions": v,
        "gemm": gemm_tables(gpu, engine, v["gemm"]),
        "context_attention": context,
        "generation_attention": generation,
        "allreduce": allreduce_tables(gpu, engine, v["comm"]),
        "moe": moe_tables(gpu, engine, v["moe"]),
    }


SILICON_KEEP = [
    "id",
    "backend",
    "backend_version",
    "system",
    "model_path",
    "precision",
    "gemm_quant_mode",
    "moe_quant_mode",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
]
SAME_RUN = [c for c in SILICON_KEEP if c not in ("id", "model_path")]
SATURATED_RATIO = 2.0


def silicon_rows() -> dict:
    """Aggregated vLLM / SGLang rows on H100, H200, B200, each with two marks (never dropped):
    `duplicate_of`: the id of an earlier row with the same run and the same measured figures under
    another id or model name (every DeepSeek-V3 SGLang row on H200 copies an R1 row);
    `saturated`: its TTFT is at least SATURATED_RATIO x the smallest TTFT of the rows that differ from
    it only in output length. In a closed loop at a fixed concurrency the first token should not wait
    longer because the others decode longer; when it does, requests queued for KV room."""
    df = pd.read_csv(ROOT / "silicon_sample.csv")
    df = df[(df["mode"] == "agg") & df.backend.isin(["vllm", "sglang"]) & df.system.isin(SILICON_GPUS)][SILICON_KEEP]
    key = df[SAME_RUN].apply(lambda r: "|".join(map(str, r)), axis=1)
    first = {}
    dup = []
    for i, k in zip(df.id, key):
        dup.append(first.get(k))
        first.setdefault(k, i)
    df = df.assign(duplicate_of=dup)
    group = [c for c in SAME_RUN if c not in ("osl", "silicon_ttft_ms", "silicon_tpot_ms")] + ["model_path"]
    low = df.groupby(group, dropna=False).silicon_ttft_ms.transform("min")
    df = df.assign(saturated=df.silicon_ttft_ms >= SATURATED_RATIO * low)
    counts = ["isl", "osl", "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"]
    df = df.astype({c: "Int64" for c in counts}).round({"silicon_ttft_ms": 4, "silicon_tpot_ms": 4})
    table = json.loads(df.to_json(orient="split", index=False))
    return {
        "source": header(
            "measured deployments, mode=agg, vLLM and SGLang on H100/H200/B200", ["systems/silicon_sample.csv"]
        )
        | {
            "units": "ms",
            "columns_note": "batch_size is the client's concurrency; AIConfigurator's own estimate is not in the CSV",
            "saturated_ratio": SATURATED_RATIO,
        },
        "columns": table["columns"],
        "rows": table["data"],
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for gpu, engine in VERSIONS:
        data = kernel_file(gpu, engine)
        path = OUT / f"{gpu}_{engine}.json"
        path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
        print(
            f"{path.name}: {path.stat().st_size / 1e3:.0f} kB, gemm {list(data['gemm'])}, "
            f"{len(data['context_attention'])} context / {len(data['generation_attention'])} generation shapes, "
            f"moe {len(data['moe'])}"
        )
    rows = silicon_rows()
    path = OUT / "silicon_rows.json"
    path.write_text(json.dumps(rows, separators=(",", ":")) + "\n")
    print(f"{path.name}: {len(rows['rows'])} rows, {path.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
