"""Write the trace presets kvweb ships (kvweb/serving/load/trace_presets/): synthetic traces in the published formats of
Mooncake, Azure's LLM inference traces and BurstGPT, drawn from seeded random numbers. They are NOT excerpts of
those traces (this machine reaches no copy of them; docs/traces.md): their columns follow each format's schema, and
their means are round figures of the order the traces' papers and READMEs publish.

    .venv/bin/python scripts/trace_presets.py                  # rewrite the presets
    .venv/bin/python scripts/trace_presets.py --mooncake-rows 12031 --duration 3600 --out /tmp/conv.jsonl
        # a whole-trace-sized Mooncake-format file (the size of Mooncake's conversation trace) for a timing run
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from kvweb.serving.load.traces import HASH_BLOCK, PRESETS_DIR

SCENARIO_A, SCENARIO_B = 2048, 8192  # the scenarios' limits on prompt + output: a preset keeps within one


def lognormal(rng: np.random.Generator, mean: float, sigma: float, n: int, low: int, high: int) -> np.ndarray:
    return np.clip(np.rint(rng.lognormal(np.log(mean) - sigma * sigma / 2, sigma, n)), low, high).astype(int)


def mooncake(
    rows: int,
    duration_s: float,
    seed: int,
    system_blocks: tuple[int, ...],
    prompt_mean: float,
    output_mean: float,
    turns_mean: float,
    max_total: int,
) -> list[dict]:
    """Chat sessions: each turn's prompt is the last turn's prompt (its full blocks keep their hashes: a
    hash names its whole prefix) plus new blocks; sessions open on one of a few shared system prompts.
    Prompt + output stay within `max_total`."""
    rng = np.random.default_rng(seed)
    next_hash = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_hash
        next_hash += n
        return list(range(next_hash - n, next_hash))

    systems = [fresh(n) for n in system_blocks]
    out: list[dict] = []
    while len(out) < rows:
        start = rng.uniform(0, duration_s)
        system = systems[rng.integers(len(systems))]
        length = len(system) * HASH_BLOCK
        hashes = list(system)
        for turn in range(max(1, int(rng.geometric(1 / turns_mean)))):
            kept = hashes[: length // HASH_BLOCK]  # the last turn's full blocks (the system prompt's, at first)
            length = min(max_total - 64, length + int(lognormal(rng, prompt_mean / 4, 0.8, 1, 32, max_total)[0]))
            hashes = kept + fresh(-(-length // HASH_BLOCK) - len(kept))
            output = int(lognormal(rng, output_mean, 0.9, 1, 1, max_total - length)[0])
            out.append(
                {
                    "timestamp": int(1000 * (start + 30 * turn + rng.exponential(20))),
                    "input_length": length,
                    "output_length": output,
                    "hash_ids": hashes,
                }
            )
            if len(out) == rows:
                break
    out.sort(key=lambda r: r["timestamp"])
    first = out[0]["timestamp"]
    return [{**r, "timestamp": r["timestamp"] - first} for r in out]


def azure(
    rows: int, duration_s: float, seed: int, context_mean: float, generated_mean: float, day: datetime, max_total: int
) -> list[str]:
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0, duration_s, rows))
    context = lognormal(rng, context_mean, 1.0, rows, 1, max_total - 64)
    generated = np.minimum(lognormal(rng, generated_mean, 1.0, rows, 0, max_total), max_total - context)
    stamps = [(day + timedelta(seconds=float(t))).strftime("%Y-%m-%d %H:%M:%S.%f") + "0" for t in times]
    return ["TIMESTAMP,ContextTokens,GeneratedTokens", *(f"{s},{c},{g}" for s, c, g in zip(stamps, context, generated))]


def burstgpt(rows: int, seed: int, max_total: int) -> list[str]:
    """Bursty arrivals (gamma gaps of shape 0.3), ChatGPT and GPT-4, conversation and API logs; about 3 %
    failed (0 response tokens), as BurstGPT logs them."""
    rng = np.random.default_rng(seed)
    times = np.floor(np.cumsum(rng.gamma(0.3, 3.0, rows)))
    request = lognormal(rng, 600, 1.0, rows, 1, max_total - 64)
    response = np.minimum(lognormal(rng, 250, 0.9, rows, 1, max_total), max_total - request)
    response[rng.random(rows) < 0.03] = 0
    models = np.where(rng.random(rows) < 0.8, "ChatGPT", "GPT-4")
    logs = np.where(rng.random(rows) < 0.7, "Conversation log", "API log")
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    lines += [f"{int(t)},{m},{q},{r},{q + r},{lg}" for t, m, q, r, lg in zip(times, models, request, response, logs)]
    return lines


def write_presets(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    conversation = mooncake(500, 150, 1, (1, 2), 1200, 340, 3.0, SCENARIO_A)
    toolagent = mooncake(500, 75, 2, (4, 6), 4000, 180, 2.0, SCENARIO_B)
    for name, rows in (("mooncake-conversation-synthetic", conversation), ("mooncake-toolagent-synthetic", toolagent)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    day = datetime(2023, 11, 16, 18, 15, 0)
    (folder / "azure-code-synthetic.csv").write_text("\n".join(azure(400, 120, 3, 2000, 28, day, SCENARIO_B)) + "\n")
    (folder / "azure-conversation-synthetic.csv").write_text(
        "\n".join(azure(400, 60, 4, 1150, 210, day, SCENARIO_A)) + "\n"
    )
    (folder / "burstgpt-synthetic.csv").write_text("\n".join(burstgpt(500, 5, SCENARIO_A)) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mooncake-rows", type=int, default=0, help="write one Mooncake-format file of this many rows")
    parser.add_argument("--duration", type=float, default=3600.0, help="its seconds")
    parser.add_argument("--prompt-mean", type=float, default=5000.0, help="its prompts' growth per turn x 4, tokens")
    parser.add_argument("--max-total", type=int, default=SCENARIO_B, help="its longest prompt + output, tokens")
    parser.add_argument("--out", type=Path, default=None, help="its path")
    args = parser.parse_args()
    if args.mooncake_rows:
        rows = mooncake(args.mooncake_rows, args.duration, 7, (2, 4, 6), args.prompt_mean, 340, 3.0, args.max_total)
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        write_presets(PRESETS_DIR)


if __name__ == "__main__":
    main()
