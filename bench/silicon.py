"""Accuracy against measured deployments: the roofline and the measured-kernel model beside real
vLLM / SGLang runs (figures go to docs/accuracy.md).

Run: .venv/bin/python -m bench.silicon [--schedulers] [--doc]

Rows: kvweb/gpu/measured/silicon_rows.json (aiconfigurator-core 0.12.0's silicon_sample.csv, mode=agg,
vLLM and SGLang on H100/H200/B200). Each row is a closed-loop benchmark at a concurrency C with fixed
input and output lengths; every row kvweb can express is estimated three ways:

- roofline: CostModel's prefill of isl as TTFT and its decode step at batch C (context isl + osl / 2)
  as TPOT (what kvweb reported before);
- roofline, closed loop: the same CostModel through `closed_loop` (kvweb/gpu/measured.py), with the
  engine's fitted queued share and outside time;
- measured: MeasuredCost through `closed_loop`, per engine its step overhead, the queued share and the
  time outside the steps fitted here on the FIT_MODELS half (split by model, declared below) and
  reported on the other half.

With --schedulers, each row the schedulers lab can express (H100/H200: `replay_params`; every priced model
is one of kvweb.gpu.MODELS and every row's weights one of the labs' precisions, gpt-oss's as mxfp4) is also
replayed step by step through the schedulers:

- schedulers: the fleet lab's parameters (the schedulers lab's, plus `gpu` and `max_len`; the
  schedulers lab itself has no GPU choice) at cost_model=measured, the row's engine as the mode
  (vllm-v1 for vLLM, sglang for SGLang), workload=closed-loop at the row's concurrency, isl and osl,
  replay_requests(C) requests, max_seqs 1024; run through the schedulers lab's own `run_mode` and
  `figures` (the mode row of its JSON; not the fleet's router loop, whose 10 ms clock would delay
  every closed-loop hop). TTFT = its mean TTFT, which under measured pricing holds the engine's
  TTFT_OUTSIDE_S (kvweb/gpu/measured.py, the time outside the engine's steps: the labs add it to every
  TTFT); TPOT = its mean TPOT. Nothing is fitted for it: the step overhead and the outside time are the
  recorded ones.

- AIConfigurator: NVIDIA AIConfigurator's own agg estimate of the same row (bench/aic.py, derived from
  aiconfigurator-core 0.12.0 by scripts/derive_aic_estimates.py; rows it could not estimate are counted
  in the cell's n).

Per campaign (model, GPU, engine and engine version: rows measured together), the report also fits
the closed loop on the campaign's own rows (the form's in-sample ceiling) and scores the labs' one-run
calibration (kvweb/gpu/calibration.py, fitted on each row in turn, scored on the campaign's others).

Rows left out are counted by
reason: duplicates, models or layers kvweb cannot price from measured kernels, 4-bit weights (no kvweb
precision), pipeline / expert / attention-data parallelism, saturated TTFTs (marked in the rows, the
concurrency's KV not fitting kvweb's capacity, or a TTFT longer than the request's whole decode, which
no closed loop of C requests in the engine gives: requests queued before it), and the Llama-3.1-8B-Instruct-FP8
vLLM rows (suspect: their prefill is near the FP8 peak; shown apart, never fitted or summarized).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import kvweb.gpu
from bench.aic import aic_estimates
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.gpu.measured import (
    ENGINES,
    QUEUED_SHARE,
    STEP_OVERHEAD_S,
    TTFT_OUTSIDE_S,
    MeasuredCost,
    Sample,
    closed_loop,
    fit_closed_loop,
    silicon_rows,
)
from kvweb.gpu import calibration
from kvweb.gpu.calibration import BenchRun
from kvweb.gpu.measured_cost import MOE_TABLES
from kvweb.gpu.specs import GPUSpec, LLMSpec
from kvweb.lab import no_progress

DOC = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"
BANDS = Path(kvweb.gpu.__file__).parent / "measured" / "bands.json"  # the error the labs show beside a figure
# NVIDIA's B200 datasheet (HGX B200, per GPU, dense): not one of kvweb's GPUs yet; here for the roofline only
B200 = GPUSpec("B200", 180e9, 2250e12, 8000e9, 64e9, 900e9, fp8_flops=4500e12)
SYSTEMS = {"h100_sxm": GPUS["H100-SXM"], "h200_sxm": GPUS["H200"], "b200_sxm": B200}


# model_path -> kvweb model; Qwen3-235B-A22B-FP8's own config.json is refused (12,910 characters: its
# quantization block), the unquantized one has the same shape
PRICED: dict[str, LLMSpec] = {
    "meta-llama/Llama-3.1-70B": MODELS["llama-3.1-70b"],
    "meta-llama/Llama-3.1-8B-Instruct": MODELS["llama-3.1-8b"],
    "nvidia/Llama-3.1-8B-Instruct-FP8": MODELS["llama-3.1-8b"],
    "Qwen/Qwen3-32B": MODELS["qwen3-32b"],
    "Qwen/Qwen3-235B-A22B-FP8": MODELS["qwen3-235b-a22b"],
    "openai/gpt-oss-120b": MODELS["gpt-oss-120b"],
}
NOT_PRICED = {  # why the other models of the rows are not estimated
    "deepseek-ai/DeepSeek-R1": "MLA: no latent-attention kernel table here",
    "deepseek-ai/DeepSeek-V3": "MLA: no latent-attention kernel table here",
    "moonshotai/Kimi-K2.5": "MLA: no latent-attention kernel table here",
    "zhipuai/GLM-5": "sparse attention: no kvweb model",
    "Qwen/Qwen3.5-397B-A17B": "config.json refused by hf_config (image_token_id); linear attention",
    "MiniMaxAI/MiniMax-M2.5": "config.json refused by hf_config (rotary_dim)",
}
# The split, by model: the closed loop's terms (kvweb/gpu/measured.py) are fitted on these models' rows only
FIT_MODELS = ("meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-235B-A22B-FP8")
# ... on H100 and H200 only: B200's tables price an FP8 decode step 2-3x above the deployments' whole
# measured TPOT (Llama-3.1-70B tp1 C=4: 25.9 ms of kernels, 16.3 ms measured), a kernel the engines of
# the rows did not run; fitted on, they drive the overhead negative. B200 rows are still reported.
FIT_SYSTEMS = ("h100_sxm", "h200_sxm")
HELD_OUT_MODELS = ("Qwen/Qwen3-32B", "openai/gpt-oss-120b", "nvidia/Llama-3.1-8B-Instruct-FP8")
SUSPECT = ("nvidia/Llama-3.1-8B-Instruct-FP8",)
ESTIMATORS = ("roofline", "roofline closed loop", "measured", "AIConfigurator")
# the analytic estimate beside the replays, on the rows replayed
REPLAYED = ("measured", "schedulers lockstep", "schedulers staggered")
# --schedulers: what the schedulers lab can express
LAB_GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200"}
LAB_MODELS = {path: model.name for path, model in PRICED.items()}
LAB_MODES = {"vllm": "vllm-v1", "sglang": "sglang"}
MAX_LENGTH = 8191  # the serving labs' prompt_len and output_len bound: an isl or osl of 8192 is replayed at 8191
MAX_SEQS = 1024  # vLLM V1's max_num_seqs for the API server on H100/H200; SGLang sizes its own from memory


def replay_requests(concurrency: int) -> int:
    """Requests a replay serves: three per client, at least 64 (a steady state past the first
    lockstep wave), at most 2000 (time)."""
    return min(max(3 * concurrency, 64), 2000)


@dataclass
class Row:
    raw: dict
    model: LLMSpec
    gpu: GPUSpec
    measured: MeasuredCost
    roofline: CostModel
    half: str  # "fit", "held-out" or "suspect" (by model; B200 rows of fit models are reported as "fit" but not fitted)
    estimates: dict[str, tuple[float, float]]  # estimator -> (TTFT s, TPOT s)

    @property
    def group(self) -> str:
        r = self.raw
        return f"{r['model_path'].split('/')[1]} {r['system'].split('_')[0].upper()} {r['backend']}"


def _precision(r: dict) -> str | None:
    """A row's weight precision as the labs name it (MeasuredCostModel's MOE_TABLES give its kernel
    tables), None for 4-bit weights."""
    mode = r["gemm_quant_mode"]
    if r["model_path"] == "openai/gpt-oss-120b":  # MXFP4 experts, 16-bit attention (the CSV says fp4)
        return "mxfp4"
    if (
        r["model_path"] == "Qwen/Qwen3-235B-A22B-FP8"
    ):  # its config.json: weight_block_size [128, 128], whatever the row says
        return "fp8-block"
    if mode in (None, "bf16", "float16"):
        return "16-bit"
    return {"fp8": "fp8", "fp8_block": "fp8-block"}.get(mode)


def build(rows: list[dict]) -> tuple[list[Row], Counter]:
    """The rows kvweb can estimate (no estimates yet), and the others counted by reason."""
    kept, left = [], Counter()
    for r in rows:
        path = r["model_path"]
        if r["duplicate_of"] is not None:
            left["duplicate of another row"] += 1
            continue
        if path not in PRICED:
            left[f"{path.split('/')[1]}: {NOT_PRICED.get(path, 'no kvweb model')}"] += 1
            continue
        precision = _precision(r)
        if precision is None:
            left["4-bit weights (nvfp4 / int4): no kvweb precision"] += 1
            continue
        if r["pp_size"] != 1 or r["moe_ep_size"] not in (None, 1) or r["attention_dp_size"] not in (None, 1):
            left["pipeline, expert or attention-data parallelism"] += 1
            continue
        model = PRICED[path]
        gpu, tp = SYSTEMS[r["system"]], r["tp_size"]
        roofline = CostModel(gpu, model, tp=tp, weight_precision=precision)
        if r["saturated"] or r["batch_size"] * (r["isl"] + r["osl"]) > roofline.kv_capacity_tokens:
            left["saturated: TTFT grows with osl, or the concurrency's KV does not fit"] += 1
            continue
        if r["silicon_ttft_ms"] > (r["osl"] - 1) * r["silicon_tpot_ms"]:
            left["queued before the engine: the first token waited longer than the whole decode"] += 1
            continue
        try:
            weights, moe = MOE_TABLES.get(precision, (precision, None))
            measured = MeasuredCost(gpu, model, r["backend"], tp, weights, moe_precision=moe)
        except ValueError as e:
            left[f"no kernel table: {e}"] += 1
            continue
        half = "suspect" if path in SUSPECT else "fit" if path in FIT_MODELS else "held-out"
        kept.append(Row(r, model, gpu, measured, roofline, half, {}))
    return kept, left


Terms = dict[str, tuple[float, float, float]]  # engine -> (step overhead s, queued share, outside s)


def sample(row: Row) -> Sample:
    """The row as `fit_closed_loop` reads it: its kernel-only step times beside its measured figures."""
    r, kernels = row.raw, replace(row.measured, step_overhead_s=0.0)
    c, isl, osl = r["batch_size"], r["isl"], r["osl"]
    return Sample(
        kernels.prefill_cost(isl),
        kernels.decode_step_cost(c, int(c * (isl + osl / 2))),
        c,
        osl,
        r["silicon_ttft_ms"] / 1e3,
        r["silicon_tpot_ms"] / 1e3,
    )


def fit(rows: list[Row]) -> Terms:
    """Per engine, the closed loop's terms fitted on the fit half's rows (fit_closed_loop)."""
    samples: dict[str, list[Sample]] = defaultdict(list)
    for row in rows:
        if row.half == "fit" and row.raw["system"] in FIT_SYSTEMS:
            samples[row.measured.engine].append(sample(row))
    return {engine: fit_closed_loop(samples[engine]) for engine in ENGINES}


def estimate(rows: list[Row], terms: Terms) -> None:
    aic = aic_estimates()
    for row in rows:
        r = row.raw
        c, isl, osl = r["batch_size"], r["isl"], r["osl"]
        overhead, share, outside = terms[r["backend"]]
        rf = row.roofline
        row.estimates["roofline"] = (rf.prefill_cost(isl), rf.decode_step_cost(c, int(c * (isl + osl / 2))))
        row.estimates["roofline closed loop"] = closed_loop(rf, c, isl, osl, share, outside)
        m = row.measured
        cost = MeasuredCost(
            m.gpu, m.model, m.engine, m.tp, m.weight_precision, m.kv_precision, m.moe_precision, overhead
        )
        row.estimates["measured"] = closed_loop(cost, c, isl, osl, share, outside)
        if r["id"] in aic:
            row.estimates["AIConfigurator"] = aic[r["id"]]


def replay_params(row: Row) -> dict | str:
    """The fleet lab's parameters that replay `row` (module docstring), or why it cannot be expressed."""
    r = row.raw
    if r["system"] not in LAB_GPUS:
        return f"{r['system'].split('_')[0].upper()}: the replay covers H100 and H200"
    lab = _precision(r)
    c, isl, osl = r["batch_size"], min(r["isl"], MAX_LENGTH), min(r["osl"], MAX_LENGTH)
    return {
        "gpu": LAB_GPUS[r["system"]],
        "model": LAB_MODELS[r["model_path"]],
        "tp": r["tp_size"],
        "weight_precision": lab,
        "cost_model": "measured",
        "mode": LAB_MODES[r["backend"]],
        "workload": "closed-loop",
        "concurrency": c,
        "requests": replay_requests(c),
        "prompt_len": isl,
        "output_len": osl,
        "max_len": max(isl + osl, 8192),
        "scenario": "B",
        "replicas": 1,
        "routers": "round-robin",
        "max_seqs": MAX_SEQS,
    }


def replay(params: dict, engine: str, ramp_s: float = 0.0) -> tuple[float, float, dict]:
    """(TTFT s, which holds the engine's outside time, TPOT s, the mode's figures) of one replay; with
    `ramp_s`, client k's first request is sent at k ramp_s / C, not at 0 (`replay_all`)."""
    from kvweb.labs.fleet import FleetLab  # the labs import the app-facing parts: only when replaying

    lab = FleetLab(**params)
    lab.check()
    mode, c = params["mode"], params["concurrency"]
    requests = [r.arriving(r.id * ramp_s / c) if r.after is None else r for r in lab.requests_at(lab.rate)]
    figures = lab.figures(lab.run_mode(mode, requests, no_progress))
    assert figures["ttft_outside_s"] == TTFT_OUTSIDE_S[engine]  # the lab's own, as the analytic estimate's
    return figures["ttft_s"]["mean"], figures["tpot_s"]["mean"], figures


def replay_all(rows: list[Row]) -> Counter:
    """Replays every expressible row twice; the others counted by reason. `schedulers lockstep`: the
    lab's closed loop as it is, every client's first request at 0 (with fixed lengths a wave's
    requests finish together and the next wave's prefills meet again: the lockstep persists);
    `schedulers staggered`: the clients' first requests spread evenly over one request's life in the
    engine as the analytic `measured` estimate has it (its TTFT less the outside time, plus osl - 1
    TPOTs), so prefills seldom meet. Real runs lie between (the fitted queued share: 0.09 for vLLM,
    0.20 for SGLang)."""
    skipped = Counter()
    for row in rows:
        params = replay_params(row)
        if isinstance(params, str):
            skipped[params] += 1
            continue
        engine = row.raw["backend"]
        ttft, tpot = row.estimates["measured"]
        life = ttft - TTFT_OUTSIDE_S[engine] + (params["output_len"] - 1) * tpot
        row.estimates["schedulers lockstep"] = replay(params, engine)[:2]
        row.estimates["schedulers staggered"] = replay(params, engine, life)[:2]
    return skipped


def errors(rows: list[Row], estimator: str, metric: int) -> list[float]:
    """Signed relative errors (estimate / measured - 1) of TTFT (metric 0) or TPOT (1)."""
    key = ("silicon_ttft_ms", "silicon_tpot_ms")[metric]
    return [row.estimates[estimator][metric] * 1e3 / row.raw[key] - 1 for row in rows]


def summary(errs: list[float]) -> str:
    """MAPE, mean signed error, worst (signed), in percent."""
    worst = max(errs, key=abs)
    return f"{100 * statistics.fmean(map(abs, errs)):.0f} / {100 * statistics.fmean(errs):+.0f} / {100 * worst:+.0f}"


def cell(rows: list[Row], estimator: str, metric: int) -> str:
    """`summary` over the rows the estimator estimated; how many, when not all of them."""
    mine = [r for r in rows if estimator in r.estimates]
    if not mine:
        return "-"
    return summary(errors(mine, estimator, metric)) + (f" (n {len(mine)})" if len(mine) < len(rows) else "")


def table(rows: list[Row], key: Callable[[Row], str], estimators: tuple[str, ...] = ESTIMATORS) -> list[str]:
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    head = (
        "| rows | n | "
        + " | ".join(f"TPOT {e}" for e in estimators)
        + " | "
        + " | ".join(f"TTFT {e}" for e in estimators)
        + " |"
    )
    lines = [head, "|" + "---|" * (2 + 2 * len(estimators))]
    for name in sorted(groups):
        g = groups[name]
        cells = [cell(g, e, m) for m in (1, 0) for e in estimators]
        lines.append(f"| {name} | {len(g)} | " + " | ".join(cells) + " |")
    return lines


def _terms(overhead: float, share: float, outside: float) -> str:
    return f"step overhead {overhead * 1e3:.2f} ms, queued share {share:.2f}, outside {outside * 1e3:.1f} ms"


def replay_report(rows: list[Row], skipped: Counter, seconds: float) -> list[str]:
    """The replayed rows' errors, the analytic `measured` estimate beside the schedulers'."""
    replayed = [r for r in rows if "schedulers lockstep" in r.estimates]
    out = [
        "### Through the schedulers (--schedulers)",
        "",
        f"{len(replayed)} rows replayed in {seconds:.0f} s (this machine, both replays); cells as above, `measured` "
        "the analytic closed loop on the same rows, `schedulers lockstep` and `staggered` the replays (`replay_all`), "
        "their TTFT with the engine's TTFT_OUTSIDE_S in it, as the labs add it "
        f"({', '.join(f'{e} {TTFT_OUTSIDE_S[e] * 1e3:.1f} ms' for e in ENGINES)}).",
        "",
    ]
    summarized = [r for r in replayed if r.half != "suspect"]
    out += table(
        summarized, lambda r: f"{r.half}: {r.raw['backend']} {r.raw['system'].split('_')[0].upper()}", REPLAYED
    )
    out += ["", "By model:", ""] + table(summarized, lambda r: f"{r.half}: {r.group}", REPLAYED)
    suspect = [r for r in replayed if r.half == "suspect"]
    if suspect:
        out += ["", "Suspect rows (not in the table above):", ""] + table(suspect, lambda r: r.group, REPLAYED)
    out += ["", f"Rows not replayed ({sum(skipped.values())}):", ""]
    out += [f"- {n}: {reason}" for reason, n in skipped.most_common()]
    return out


def campaign(row: Row) -> str:
    """The measurement campaign a row belongs to: model, GPU, engine and the engine's version (the
    rows of one campaign share a benchmark set-up that the CSV does not record)."""
    return f"{row.half}: {row.group} {row.raw['backend_version'] or 'version not recorded'}"


def _mape(pairs: list[tuple[float, float]]) -> str:
    """TTFT / TPOT MAPE in percent of (estimated, measured) pairs of (TTFT, TPOT)."""
    return " / ".join(f"{100 * statistics.fmean(abs(e[m] / y[m] - 1) for e, y in pairs):.0f}" for m in (0, 1))


def campaign_report(rows: list[Row]) -> list[str]:
    """Why one fit cannot meet the goals on every campaign: per campaign, the closed loop fitted on
    the campaign's own rows (in-sample: the best `closed_loop`'s form reaches there), the labs' one-run
    calibration (kvweb/gpu/calibration.py: fitted on each row in turn, scored on the campaign's other
    rows), and the engine's fit from the fit half (`measured`), TTFT / TPOT MAPE each."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.half != "suspect":
            groups[campaign(row)].append(row)
    out = [
        "### Per campaign: the closed loop's ceiling and one-run calibration",
        "",
        "A campaign is one model, GPU, engine and engine version. Cells: TTFT / TPOT MAPE in percent.",
        "",
        "| campaign | n | its own terms | own fit (in-sample) | one-run calibration | measured | AIConfigurator |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in sorted(groups):
        g = groups[name]
        truth = [(r.raw["silicon_ttft_ms"] / 1e3, r.raw["silicon_tpot_ms"] / 1e3) for r in g]
        overhead, share, outside = fit_closed_loop([sample(r) for r in g])
        own = [
            closed_loop(
                replace(r.measured, step_overhead_s=overhead),
                r.raw["batch_size"],
                r.raw["isl"],
                r.raw["osl"],
                share,
                outside,
            )
            for r in g
        ]
        calibrated = []
        for i, r in enumerate(g):
            cal = calibration.fit(
                (BenchRun(r.raw["backend"], r.raw["batch_size"], r.raw["isl"], r.raw["osl"], *truth[i]),), r.measured
            )
            calibrated += [
                (
                    closed_loop(
                        replace(o.measured, step_overhead_s=cal.step_overhead_s),
                        o.raw["batch_size"],
                        o.raw["isl"],
                        o.raw["osl"],
                        cal.queued_share,
                        cal.outside_s,
                    ),
                    truth[j],
                )
                for j, o in enumerate(g)
                if j != i
            ]
        aic = [(r.estimates["AIConfigurator"], y) for r, y in zip(g, truth) if "AIConfigurator" in r.estimates]
        out.append(
            f"| {name} | {len(g)} | {_terms(overhead, share, outside)} | {_mape(list(zip(own, truth)))} | "
            f"{_mape(calibrated) if calibrated else '-'} | "
            f"{_mape([(r.estimates['measured'], y) for r, y in zip(g, truth)])} | {_mape(aic) if aic else '-'} |"
        )
    return out


def bands(rows: list[Row], estimator: str = "measured") -> dict[str, dict[str, float]]:
    """An estimator's held-out error by GPU and engine ("H100 vllm"), by engine ("vllm") and over all
    held-out rows it estimated (""): TPOT and TTFT MAPE in percent and the rows' count. The labs show
    the nearest one beside a measured figure (kvweb/gpu/measured_cost.py `error_band`)."""
    held = [r for r in rows if r.half == "held-out" and estimator in r.estimates]
    keys: dict[str, list[Row]] = defaultdict(list)
    for r in held:
        gpu, engine = r.raw["system"].split("_")[0].upper(), r.raw["backend"]
        for key in (f"{gpu} {engine}", engine, ""):
            keys[key].append(r)
    return {
        key: {
            "tpot_pct": round(100 * statistics.fmean(map(abs, errors(g, estimator, 1))), 1),
            "ttft_pct": round(100 * statistics.fmean(map(abs, errors(g, estimator, 0))), 1),
            "rows": len(g),
        }
        for key, g in sorted(keys.items())
    }


def report(rows: list[Row], left: Counter, terms: Terms) -> list[str]:
    fit_rows = [r for r in rows if r.half == "fit" and r.raw["system"] in FIT_SYSTEMS]
    out = [f"Fitted on {', '.join(FIT_MODELS)} on H100 and H200, per engine:", ""]
    for engine in ENGINES:
        recorded = STEP_OVERHEAD_S[engine], QUEUED_SHARE[engine], TTFT_OUTSIDE_S[engine]
        out.append(
            f"- {engine} ({sum(r.raw['backend'] == engine for r in fit_rows)} rows): {_terms(*terms[engine])} "
            f"(recorded in kvweb/gpu/measured.py: {_terms(*recorded)})"
        )
    out += ["", "Cells: MAPE / mean signed error / worst signed error, in percent of the measured figure.", ""]
    summarized = [r for r in rows if r.half != "suspect"]
    out += ["### By half, engine and GPU", ""]
    out += table(summarized, lambda r: f"{r.half}: {r.raw['backend']} {r.raw['system'].split('_')[0].upper()}")
    out += ["", "### By half", ""] + table(summarized, lambda r: r.half)
    out += ["", "### By half, model, GPU and engine", ""] + table(summarized, lambda r: f"{r.half}: {r.group}")
    suspect = [r for r in rows if r.half == "suspect"]
    if suspect:
        out += ["", "### Suspect rows (not fitted, not in the summaries above)", ""]
        out += table(suspect, lambda r: r.group)
    out += ["", *campaign_report(rows)]
    out += ["", f"### Rows left out ({sum(left.values())} of {sum(left.values()) + len(rows)})", ""]
    out += [f"- {n}: {reason}" for reason, n in left.most_common()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", action="store_true", help="write the figures into docs/accuracy.md")
    parser.add_argument(
        "--schedulers",
        action="store_true",
        help="also replay each expressible H100/H200 row through the schedulers (closed-loop workload)",
    )
    args = parser.parse_args()
    rows, left = build(silicon_rows())
    terms = fit(rows)
    estimate(rows, terms)
    lines = report(rows, left, terms)
    if args.schedulers:
        start = time.perf_counter()
        skipped = replay_all(rows)
        lines += ["", *replay_report(rows, skipped, time.perf_counter() - start)]
    print("\n".join(lines))
    for engine, (overhead, share, outside) in terms.items():
        if (
            abs(overhead - STEP_OVERHEAD_S[engine]) > 0.01 * STEP_OVERHEAD_S[engine]
            or abs(share - QUEUED_SHARE[engine]) > 0.005
            or abs(outside - TTFT_OUTSIDE_S[engine]) > 0.01 * TTFT_OUTSIDE_S[engine]
        ):
            print(
                f"\nnote: the {engine} fit differs from the figures recorded in kvweb/gpu/measured.py; record the new ones"
            )
    if args.doc:
        text = DOC.read_text()
        begin, end = "<!-- bench.silicon: begin -->", "<!-- bench.silicon: end -->"
        flags = " --schedulers" if args.schedulers else ""
        stamp = f"`.venv/bin/python -m bench.silicon{flags} --doc`, {datetime.date.today().isoformat()}"
        figures = "\n".join([begin, "", stamp, "", *lines, "", end])
        DOC.write_text(text[: text.index(begin)] + figures + text[text.index(end) + len(end) :])
        # the labs' closed-loop runs are the lockstep replay: its band where it ran, else the last one written
        replay = (
            bands(rows, "schedulers lockstep")
            if args.schedulers
            else json.loads(BANDS.read_text()).get("held_out_replay_mape", {})
        )
        BANDS.write_text(
            json.dumps({"source": stamp, "held_out_mape": bands(rows), "held_out_replay_mape": replay}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
