"""AIConfigurator's own estimate (TTFT, TPOT) of each measured deployment in kvweb's silicon rows, the
column bench/silicon.py shows beside kvweb's estimates.

Run with the separate venv that holds aiconfigurator-core (never kvweb's own):

    .venv-measured/bin/python scripts/derive_aic_estimates.py

Reads kvweb/gpu/measured/silicon_rows.json, writes bench/data/aic_silicon.json: one row per
non-duplicate row of the models kvweb prices (MODELS), [id, TTFT ms, TPOT ms, database version],
rounded to 4 significant digits, sorted by id; the rows AIConfigurator refuses, by id with its error.
Only its figures are kept; none of its code.

How AIConfigurator is called: as its own `aiconfigurator cli estimate --mode agg` does
(`cli_estimate` -> `_run_agg_estimate` in the aiconfigurator 0.12.0 application package), and as its
silicon-accuracy harnesses call that on these very rows (tools/accuracy_regression_testing/
predict_silicon_sample.py, tools/accuracy_tracking/run_silicon.py): the row's model, system, backend,
isl, osl, batch_size (its concurrency), tp/pp/attention-dp/MoE tp/ep and GEMM and MoE quantization;
everything else at AIConfigurator's defaults: database mode SILICON, ctx_tokens = isl (cli_estimate's
default context budget for an agg point), KV cache, FMHA and communication precision inferred from
the model's config, no prefix, no speculative decoding, the backend's default memory fraction. One
exception: gpt-oss-120b's quantization (QUANT_FROM_CONFIG). Only aiconfigurator-core is needed: the
application's agg path is the core calls made here in the same order (ModelConfig, context FMHA /
DeepSeek-V4 / NVFP4 resolution, get_model, the backend's run_agg); a point that does not fit in memory
is refused, as cli_estimate refuses it. Checked once against the application's own cli_estimate
(aiconfigurator 0.12.0): the same TTFT and TPOT on every row, to the file's rounding, and the same
refusals (bench/data/README-aic.md).

Database version: the row's backend_version where the package serves it, else AIConfigurator's
default for that system and backend (get_latest_database_version: the "current" slot, vLLM 0.24.0 and
SGLang 0.5.14 here), as its harnesses fall back. No row's engine version is a served slot in 0.12.0
(it refuses raw versions such as vLLM 0.12.0 unless told to read unmaintained data), so every row
here is estimated with the default; the version used is recorded per row.

Model configs: AIConfigurator reads a model's config.json from its bundled copies or, for others, from
the Hugging Face hub, which this machine cannot reach. Rows naming a model it does not bundle are
given the bundled config of the same checkpoint under its other name (CONFIG_OF), as a local model
directory named like the row's model path, so the model path AIConfigurator sees is the row's own:
meta-llama/Llama-3.1-70B is meta-llama/Meta-Llama-3.1-70B renamed; Llama-3.1-8B-Instruct and
nvidia/Llama-3.1-8B-Instruct-FP8 have the architecture of Meta-Llama-3.1-8B (the FP8 checkpoint's
hf_quant_config is not bundled: its KV cache is taken as 16-bit, the weights FP8 as the row says).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

import aiconfigurator_core
from aiconfigurator_core.sdk.backends.factory import get_backend
from aiconfigurator_core.sdk.config import ModelConfig, RuntimeConfig
from aiconfigurator_core.sdk.config_builders import apply_nextn, build_model_config
from aiconfigurator_core.sdk.models import get_model
from aiconfigurator_core.sdk.models.helpers import (
    check_is_moe,
    resolve_context_fmha_by_data,
    resolve_dsv4_moe_arch,
    resolve_nvfp4_for_system,
)
from aiconfigurator_core.sdk.perf_database import get_database_view, get_latest_database_version

PACKAGE = "aiconfigurator-core 0.12.0 (NVIDIA, Apache-2.0)"
INSTALLED = Path(aiconfigurator_core.__file__).parent  # its bundled model configs; cut from refusals' paths
ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "kvweb" / "gpu" / "measured" / "silicon_rows.json"
OUT = ROOT / "bench" / "data" / "aic_silicon.json"
# the models bench/silicon.py prices (its PRICED): their rows are the ones compared
MODELS = (
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "nvidia/Llama-3.1-8B-Instruct-FP8",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-235B-A22B-FP8",
    "openai/gpt-oss-120b",
)
CONFIG_OF = {  # a row's model path -> the bundled config of the same architecture (module docstring)
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama/Meta-Llama-3.1-8B",
}
# rows whose quantization label is not the checkpoint's: the CSV says nvfp4 for gpt-oss-120b, whose experts are
# MXFP4 and other GEMMs 16-bit (bench/silicon.py reads them so too); AIConfigurator has no nvfp4 data for its
# shapes on any GPU here and refuses the label, so the quantization is left to it to infer from the model's config
QUANT_FROM_CONFIG = ("openai/gpt-oss-120b",)
AGG_FIELDS = ("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def _database(system: str, backend: str, version: str | None):
    """AIConfigurator's SILICON database for the row's version, else its default (module docstring)."""
    if version is not None:
        try:
            database = get_database_view(system, backend, version, database_mode="SILICON")
            if database is not None:
                return database
        except ValueError:  # a version the package does not serve
            pass
    default = get_latest_database_version(system=system, backend=backend)
    database = get_database_view(system, backend, default, database_mode="SILICON") if default else None
    if database is None:
        raise ValueError(f"no database for {system} {backend}")
    return database


def estimate(row: dict) -> tuple[float, float, str]:
    """(TTFT ms, TPOT ms, database version) of one agg row, as cli_estimate(mode="agg") gives them."""
    path = row["model_path"]
    size = {field: row[field] for field in AGG_FIELDS if row[field]}
    tp, pp, dp = size.get("tp_size", 1), size.get("pp_size", 1), size.get("attention_dp_size", 1)
    moe_tp, moe_ep = size.get("moe_tp_size"), size.get("moe_ep_size")
    if check_is_moe(path):
        moe_tp, moe_ep = ModelConfig(
            tp_size=tp, attention_dp_size=dp, moe_tp_size=moe_tp, moe_ep_size=moe_ep
        ).resolve_moe_parallelism()
    gemm, moe = (None, None) if path in QUANT_FROM_CONFIG else (row["gemm_quant_mode"], row["moe_quant_mode"])
    config = build_model_config(tp, pp, dp, moe_tp, moe_ep, gemm, None, None, moe, None)
    apply_nextn(config, 0)
    database = _database(row["system"], row["backend"], row["backend_version"])
    resolve_context_fmha_by_data(config, path, database, row["backend"], is_context_role=True)
    resolve_dsv4_moe_arch(config, path, system_name=row["system"], backend_name=row["backend"])
    resolve_nvfp4_for_system(config, row["system"], path, backend_name=row["backend"])
    runtime = RuntimeConfig(isl=row["isl"], osl=row["osl"], batch_size=size.get("batch_size", 128))
    model = get_model(path, config, row["backend"])
    summary = get_backend(row["backend"]).run_agg(
        model, database, runtime, ctx_tokens=row["isl"], decode_tokens_per_iteration=1.0
    )
    if summary.check_oom():
        raise RuntimeError(f"OOM: does not fit in GPU memory at tp={tp}, pp={pp}, dp={dp}")
    result = summary.get_result_dict()
    return result["ttft"], result["tpot"], database.version


def _configs(workdir: Path) -> None:
    """The CONFIG_OF models as local model directories under `workdir`, named like the rows' model paths."""
    for path, bundled in CONFIG_OF.items():
        (workdir / path).mkdir(parents=True)
        bundled_config = INSTALLED / "model_configs" / f"{bundled.replace('/', '--')}_config.json"
        shutil.copy(bundled_config, workdir / path / "config.json")


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def main() -> None:
    logging.disable(logging.WARNING)
    raw = json.loads(ROWS.read_text())
    rows = [
        r
        for r in (dict(zip(raw["columns"], values)) for values in raw["rows"])
        if r["duplicate_of"] is None and r["model_path"] in MODELS
    ]
    done, failed = [], {}
    start = time.perf_counter()
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as workdir:
        _configs(Path(workdir))
        os.chdir(workdir)  # the relative model paths of CONFIG_OF resolve to the local directories
        try:
            for r in rows:
                try:
                    with redirect_stdout(sys.stderr):
                        ttft, tpot, version = estimate(r)
                    if not (math.isfinite(ttft) and math.isfinite(tpot) and ttft > 0 and tpot > 0):
                        raise ValueError(f"not a positive estimate: TTFT {ttft}, TPOT {tpot}")
                    done.append([r["id"], _sig(ttft), _sig(tpot), version])
                except Exception as e:  # AIConfigurator's refusal, recorded as its reason
                    reason = str(e).splitlines()[0].replace(str(INSTALLED), "aiconfigurator_core")
                    failed[r["id"]] = f"{type(e).__name__}: {reason[:200]}"
        finally:
            os.chdir(here)
    seconds = time.perf_counter() - start
    source = (
        f"{PACKAGE}: its agg estimate (aiconfigurator cli estimate --mode agg: ctx_tokens = isl, the row's "
        "parallelism and GEMM / MoE quantization, defaults otherwise; gpt-oss-120b's quantization from its "
        "config) of every non-duplicate row of kvweb/gpu/measured/silicon_rows.json "
        f"for {', '.join(MODELS)}; scripts/derive_aic_estimates.py; ms"
    )
    out = {
        "source": source,
        "columns": ["id", "ttft_ms", "tpot_ms", "database_version"],
        "rows": sorted(done),
        "failed": dict(sorted(failed.items())),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("{" + ",\n".join(f"{json.dumps(k)}: {_lines(v)}" for k, v in out.items()) + "}\n")
    print(f"{len(done)} rows estimated, {len(failed)} refused, in {seconds:.1f} s -> {OUT.relative_to(ROOT)}")


def _lines(value: object) -> str:
    """Rows and refusals one a line: small diffs when the figures move."""
    if isinstance(value, list):
        return "[\n" + ",\n".join(json.dumps(r) for r in value) + "\n]"
    if isinstance(value, dict):
        return "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()) + "\n}"
    return json.dumps(value)


if __name__ == "__main__":
    main()
