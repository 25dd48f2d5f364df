"""The lecture's exercises (SPEC 8), each answered by running a lab.

An `Exercise` is data: a question, the lab and parameters it starts from (the app makes a
share URL of them with `kvweb.query.to_query`), which of those parameters the reader may
change, an explanation, `solve`, which runs the lab (and variants of it) and returns an
`Answer`: named numbers (for tests) and (label, value) lines (for people), and a `Check`:
what the reader answers first, and how close counts as right.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.jsonable import jsonable
from kvweb.lab import Lab, Progress, no_progress, shown
from kvweb.parsing import make, to_number
from kvweb.kv.model import VOCAB
from kvweb.reproduce import ms, pct, times

RESERVED_LEN = 2048  # what a reservation-based server sets aside per request (OPT's max length)


@dataclass(frozen=True)
class Answer:
    values: dict[str, Any]  # named figures, for tests and downloads
    lines: list[tuple[str, str]]  # (label, value) for people


@dataclass(frozen=True)
class Verdict:
    correct: bool
    expected: str  # the library's answer, as the reader would type it
    tolerance: float  # how far off still counts as right (0: exactly)


@dataclass(frozen=True)
class Check:
    """The reader's first answer: a number within `tolerance` (absolute, in the prompt's unit)
    of the library's, or one of `choices`."""

    prompt: str
    expected: Callable[[Answer], float | str] = field(repr=False)
    tolerance: float = 0.0
    choices: tuple[str, ...] = ()

    def judge(self, expected: float | str, given: str) -> Verdict:
        """Compare the reader's text with the library's answer; ValueError (a plain message
        naming what is allowed) if the text is no answer at all."""
        text = given.strip()
        if self.choices:
            if text not in self.choices:
                raise ValueError(f"answer: {shown(text)} is not allowed; expected one of {', '.join(self.choices)}")
            return Verdict(text == expected, str(expected), 0.0)
        number = to_number(text.replace(",", "").removesuffix("%").strip())
        if number is None:
            raise ValueError(f"answer: {shown(text)} is not allowed; expected a number")
        value = float(expected)
        text = f"{value:,.0f}" if value.is_integer() else f"{value:,.1f}"
        return Verdict(abs(number - value) <= self.tolerance + 1e-9 * abs(value), text, self.tolerance)


@dataclass(frozen=True)
class Exercise:
    key: str
    title: str
    question: str
    lab: str
    params: Mapping[str, str]  # the prefilled parameters, as text (like a URL)
    inputs: tuple[str, ...]  # the parameters the reader may change
    explanation: str
    solve: Callable[[Lab, Progress], Answer] = field(repr=False)
    check: Check

    def make_lab(self, changes: Mapping[str, str] | None = None) -> Lab:
        """The exercise's lab with the reader's changes (validated like a URL or the CLI)."""
        return make(self.lab, {**self.params, **(changes or {})})

    def answer(self, changes: Mapping[str, str] | None = None, progress: Progress = no_progress) -> Answer:
        return self.solve(self.make_lab(changes), progress)


def solved(exercise: Exercise, lab: Lab, progress: Progress = no_progress) -> dict[str, Any]:
    """An exercise's answer on `lab` as plain JSON: the answer's lines and the check's value."""
    answer = exercise.solve(lab, progress)
    return {"lines": [list(line) for line in answer.lines], "expected": exercise.check.expected(answer)}


def preset_answers(progress: Progress = no_progress) -> dict[str, dict[str, Any]]:
    """Every exercise's answer at its preset inputs (the static site ships them, computed at build:
    WebAssembly would take half a minute to open the exercises page otherwise)."""
    answers = {}
    for i, exercise in enumerate(EXERCISES):
        progress(i / len(EXERCISES), exercise.key)
        answers[exercise.key] = solved(exercise, exercise.make_lab(), progress)
    return answers


def variant(lab: Lab, **changes: Any) -> Lab:
    """The same lab with some parameters changed (each answer may compare a few runs)."""
    return type(lab)(**{**lab.values(), **changes})


def run(lab: Lab, progress: Progress = no_progress) -> dict[str, Any]:
    return jsonable(lab.run(progress))


# -- answers -------------------------------------------------------------------------


def block_arithmetic(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    per_token, b = r["kv_bytes_per_token_total"], lab.block_size
    v = {
        "kv_bytes_per_token": per_token,
        "block_bytes": r["kv_bytes_per_block_total"],
        "blocks": r["kv_capacity_blocks"],
        "capacity_tokens": r["kv_capacity_tokens"],
        "paged_worst_waste_bytes": (b - 1) * per_token,
        "reserved_worst_waste_bytes": (RESERVED_LEN - 1) * per_token,
        "reserved_requests": r["kv_capacity_tokens"] // RESERVED_LEN,
    }
    return Answer(
        v,
        [
            ("KV bytes per token", f"{per_token:,} B"),
            ("one block", f"{v['block_bytes'] / 1e6:.2f} MB"),
            ("blocks that fit (tokens)", f"{v['blocks']:,} ({v['capacity_tokens']:,})"),
            ("worst waste per request, paged (B - 1 tokens)", f"{v['paged_worst_waste_bytes'] / 1e6:.2f} MB"),
            (
                f"worst waste per request, reserving {RESERVED_LEN} tokens",
                f"{v['reserved_worst_waste_bytes'] / 1e9:.2f} GB",
            ),
            (f"requests that fit when each reserves {RESERVED_LEN} tokens", str(v["reserved_requests"])),
        ],
    )


def parallel_blocks(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    lp, lo, n, b = lab.prompt_len, lab.output_len, lab.n, lab.block_size
    full = lp // b  # prompt blocks that stay shared
    exact = full + n * -(-(lp + lo - full * b) // b)
    v = {
        "blocks_shared": r["blocks_shared"],
        "blocks_unshared": r["blocks_unshared"],
        "exact_shared": exact,
        "exact_unshared": n * -(-(lp + lo) // b),
        "saving": r["saving"],
        "estimate": r["estimate"],
        "full_block_estimate": (n - 1) * full * b / (n * (lp + lo)),
        "copies": r["copies"],
        "partial_rows": lp % b,
    }
    return Answer(
        v,
        [
            ("blocks with sharing: measured / by block arithmetic", f"{v['blocks_shared']} / {exact}"),
            ("blocks without sharing", str(v["blocks_unshared"])),
            ("saving: measured / block-free estimate", f"{pct(v['saving'])} / {pct(v['estimate'])}"),
            ("estimate counting only full prompt blocks as shared", pct(v["full_block_estimate"])),
            (
                "copy-on-write copies of the prompt's last block (its rows / block size)",
                f"{v['copies']} ({v['partial_rows']} / {b})",
            ),
        ],
    )


def watermark_sweep(lab: Lab, progress: Progress) -> Answer:
    rows = run(lab, progress)["rows"]
    best = max(rows, key=lambda r: r["throughput_tok_s"])
    v = {
        "watermarks": [r["watermark"] for r in rows],
        "preemptions": [r["preemptions"] for r in rows],
        "throughput": [r["throughput_tok_s"] for r in rows],
        "best_watermark": best["watermark"],
    }
    return Answer(
        v,
        [
            ("preemptions by watermark", ", ".join(f"{pct(r['watermark'])}: {r['preemptions']}" for r in rows)),
            ("tokens/s by watermark", ", ".join(f"{pct(r['watermark'])}: {r['throughput_tok_s']:.0f}" for r in rows)),
            ("best watermark (throughput)", pct(best["watermark"])),
        ],
    )


def swap_or_recompute(lab: Lab, progress: Progress) -> Answer:
    """Llama-3-70B's 141 GB of weights fit no single GPU here: the lecture's "assume it fits" is
    run as the labelled what-if `ignore_weights`, never silently."""
    v: dict[str, Any] = {}
    lines = []
    for i, model in enumerate(("llama-3-8b", "llama-3-70b")):

        def part(f: float, m: str, i: int = i) -> None:
            progress((i + f) / 2, m)

        r = run(variant(lab, model=model), part)
        fits = r["fits"]
        if not fits:
            r = run(variant(lab, model=model, ignore_weights=True), part)
        name = model if r["fit_note"] is None else f"{model}, weights ignored (what-if)"
        swap, recompute = r["swap_s"]["16"], r["recompute_s"]
        v[model] = {"swap_s": swap, "recompute_s": recompute, "kv_bytes": r["kv_bytes"], "fits": fits}
        lines += [
            (f"{name}: swap out + in at block 16 / recompute", f"{ms(swap)} / {ms(recompute)}"),
            (f"{name}: recompute / swap", times(recompute / swap)),
        ]
    return Answer(v, lines)


def radix_too_small(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    roomy = run(variant(lab, capacity=max(lab.capacity, 100 * r["longest_request"])))
    v = {"hit_rate": r["hit_rate"], "longest_request": r["longest_request"], "roomy_hit_rate": roomy["hit_rate"]}
    return Answer(
        v,
        [
            ("longest request (prompt + output tokens)", str(r["longest_request"])),
            ("hit rate at this capacity", pct(r["hit_rate"])),
            ("hit rate when everything fits", pct(roomy["hit_rate"])),
        ],
    )


def hash_vs_radix(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    v = {
        "radix_hit_rate": r["radix_hit_rate"],
        "hash_hit_rate": r["hash_hit_rate"],
        "radix_paged_hit_rate": r["radix_paged_hit_rate"],
    }
    return Answer(
        v,
        [
            ("radix tree (any prefix, to the token)", pct(v["radix_hit_rate"])),
            ("chained block hashes (whole blocks only)", pct(v["hash_hit_rate"])),
            ("radix tree with pages of the block size", pct(v["radix_paged_hit_rate"])),
        ],
    )


def shared_pool(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    longest = r["longest_request"]
    split = run(variant(lab, capacity=max(1, lab.capacity - longest))) if lab.capacity > longest else {"hit_rate": 0.0}
    v = {
        "shared_hit_rate": r["hit_rate"],
        "split_hit_rate": split["hit_rate"],
        "longest_request": longest,
        "max_wait": r["max_wait"],
    }
    return Answer(
        v,
        [
            ("longest request (prompt + output tokens)", str(longest)),
            ("one shared pool: hit rate", pct(v["shared_hit_rate"])),
            ("cache partition beside room for the longest request: hit rate", pct(v["split_hit_rate"])),
            ("longest wait (steps)", str(v["max_wait"])),
        ],
    )


def template_ambiguity(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    dfa = lab.compile().dfa
    letters = [i for i, c in enumerate(VOCAB) if c.isalpha() and c.islower()]
    digits = [i for i, c in enumerate(VOCAB) if c.isdigit()]
    both = [s for s in range(dfa.states) if dfa.allowed(s)[letters].any() and dfa.allowed(s)[digits].any()]
    chains = [c["text"] for c in r["graph"]["chains"]]
    v = {
        "dfa_states": r["dfa_states"],
        "nfa_states": r["nfa_states"],
        "ambiguous_states": len(both),
        "jump_edges": r["jump_edges"],
        "chains": chains,
        "all_match": r["all_match"],
        "forwards_plain": r["forwards_plain"],
        "forwards_compressed": r["forwards_compressed"],
    }
    return Answer(
        v,
        [
            ("DFA states (NFA states)", f"{v['dfa_states']} ({v['nfa_states']})"),
            ("states where a letter and a digit are both legal", str(len(both))),
            ("jump chains", ", ".join(repr(c) for c in chains) or "-"),
            ("every output matches", "yes" if v["all_match"] else "no"),
            ("forwards plain / compressed", f"{v['forwards_plain']} / {v['forwards_compressed']}"),
        ],
    )


def aging_tradeoff(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    runs = {**r["runs"], "aging": {"hit_rate": r["hit_rate"], "max_wait": r["max_wait"]}}
    v = {p: {"hit_rate": x["hit_rate"], "max_wait": x["max_wait"]} for p, x in runs.items()}
    return Answer(
        v, [(f"{p}: hit rate / longest wait (steps)", f"{pct(x['hit_rate'])} / {x['max_wait']}") for p, x in v.items()]
    )


def full_prompt_check(lab: Lab, progress: Progress) -> Answer:
    """vLLM V1 with the full-prompt admission check and without it (older vLLM), same requests."""
    v = {}
    for i, check in enumerate((True, False)):
        row = mode_row(run(variant(lab, full_prompt_check=check), part_of(progress, i, 2)))
        v["on" if check else "off"] = {k: row[k] for k in ("preemptions", "recomputed_tokens", "throughput_tok_s")}
    return Answer(
        v,
        [
            (
                f"full-prompt check {k}: preemptions / tokens recomputed / tokens per second",
                f"{x['preemptions']} / {x['recomputed_tokens']:,} / {x['throughput_tok_s']:.0f}",
            )
            for k, x in v.items()
        ],
    )


def part_of(progress: Progress, i: int, n: int) -> Progress:
    """The progress of the i-th of n runs an answer makes, as a share of the whole answer."""
    return lambda f, m: progress((i + f) / n, m)


def mode_row(result: dict[str, Any], mode: str = "vllm-v1") -> dict[str, Any]:
    """One mode's figures from a `schedulers` result."""
    return next(m for m in result["modes"] if m["mode"] == mode)


def lora_slots(lab: Lab, progress: Progress) -> Answer:
    """The lab's max_loras against one slot for every adapter (max_loras = loras), same requests: what
    the slots take from the KV cache, and what waiting for a slot costs the first token."""
    v = {}
    for i, (name, slots) in enumerate((("yours", lab.max_loras), ("every_adapter", lab.loras))):
        r = run(variant(lab, max_loras=slots), part_of(progress, i, 2))
        lora = mode_row(r)["lora"]
        v[name] = {
            "max_loras": slots,
            "kv_blocks": lora["kv_blocks"],
            "loads": lora["loads"],
            "ttft_p50_s": mode_row(r)["ttft_s"]["p50"],
        }
    v["kv_blocks_without"] = r["kv_blocks"]
    v["slot_bytes"] = lora["slot_bytes"]
    v["slot_blocks"] = lora["slot_bytes"] / (lab.setup().cost_model().kv_bytes_per_token_per_gpu * lab.block_size)
    yours, every = v["yours"], v["every_adapter"]
    return Answer(
        v,
        [
            (
                "one adapter slot: bytes / KV blocks",
                f"{v['slot_bytes']:,} ({v['slot_bytes'] / 2**20:.0f} MiB) / {v['slot_blocks']:.1f}",
            ),
            (
                "KV blocks: without adapters / your max_loras / a slot for every adapter",
                f"{v['kv_blocks_without']:,} / {yours['kv_blocks']:,} / {every['kv_blocks']:,}",
            ),
            ("max_loras: yours / every adapter", f"{yours['max_loras']} / {every['max_loras']}"),
            ("adapters loaded: yours / every adapter", f"{yours['loads']:,} / {every['loads']:,}"),
            ("TTFT p50: yours / every adapter", f"{ms(yours['ttft_p50_s'])} / {ms(every['ttft_p50_s'])}"),
        ],
    )


def same_image(lab: Lab, progress: Progress) -> Answer:
    """The lab's images against every request's image its own (a pool larger than the requests): the
    embeddings the encoder computed, the encoder cache's hits, the prefix hit rate and the first token."""
    v = {}
    for i, (name, pool) in enumerate((("yours", lab.image_pool), ("all_distinct", 100_000))):
        row = mode_row(run(variant(lab, image_pool=pool), part_of(progress, i, 2)))
        v[name] = {
            "image_pool": pool,
            "computed": row["encoder"]["computed"],
            "hits": row["encoder"]["hits"],
            "prefix_hit_rate": row["prefix_hit_rate"],
            "ttft_p50_s": row["ttft_s"]["p50"],
        }
    yours, distinct = v["yours"], v["all_distinct"]
    return Answer(
        v,
        [
            ("distinct images: yours / every request its own", f"{yours['image_pool']:,} / {distinct['image_pool']:,}"),
            (
                "embeddings the encoder computed: yours / every request its own",
                f"{yours['computed']:,} / {distinct['computed']:,}",
            ),
            ("encoder cache hits: yours / every request its own", f"{yours['hits']:,} / {distinct['hits']:,}"),
            (
                "prefix hit rate: yours / every request its own",
                f"{pct(yours['prefix_hit_rate'])} / {pct(distinct['prefix_hit_rate'])}",
            ),
            (
                "TTFT p50: yours / every request its own",
                f"{ms(yours['ttft_p50_s'])} / {ms(distinct['ttft_p50_s'])}",
            ),
        ],
    )


def draft_length(lab: Lab, progress: Progress) -> Answer:
    """The lab's draft-length sweep of vLLM V1 (the exercise's engine; SGLang is swept beside it): TPOT
    p50 and throughput at each k, and the k that pays most."""
    swept = run(variant(lab, spec_sweep=True), progress)["spec_sweep"]["vllm-v1"]
    points = {p["k"]: p for p in swept["points"]}
    best, longest = swept["best_k"], max(points)
    v = {"best_k": best, "points": swept["points"]}
    return Answer(
        v,
        [
            ("draft length with the lowest TPOT p50", f"k = {best}"),
            (
                "TPOT p50: no drafts / the best k / the longest k",
                " / ".join(ms(points[k]["tpot_p50_s"]) for k in (0, best, longest)),
            ),
            (
                "tokens/s: no drafts / the best k / the longest k",
                " / ".join(f"{points[k]['throughput_tok_s']:.0f}" for k in (0, best, longest)),
            ),
            (
                "tokens kept per request a step: the best k / the longest k",
                f"{points[best]['tokens_per_step']:.2f} / {points[longest]['tokens_per_step']:.2f}",
            ),
        ],
    )


def max_concurrency(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    row = mode_row(r)
    per_request = r["kv_blocks"] / r["max_concurrency"]
    v = {
        "kv_blocks": r["kv_blocks"],
        "max_len": r["max_len"],
        "blocks_per_max_request": per_request,
        "max_concurrency": r["max_concurrency"],
        "max_batch": row["max_batch"],
        "mean_batch": row["mean_batch"],
    }
    return Answer(
        v,
        [
            (
                "KV blocks on the GPU / blocks of one request of the maximum length",
                f"{r['kv_blocks']:,} / {per_request:,.0f}",
            ),
            ("maximum concurrency at the maximum length (vLLM's start-up line)", f"{r['max_concurrency']:.2f}x"),
            ("most requests vLLM V1 ran at once", str(row["max_batch"])),
            ("mean batch", f"{row['mean_batch']:.1f}"),
        ],
    )


def kv_grows(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    steps = r["steps"]
    used = [s["used_blocks"] for s in steps]
    grew = [s["step"] for s in steps[1:] if any(e["kind"] == "allocate" for e in s["events"])]
    v = {"after_prompts": used[0], "at_end": used[-1], "used": used, "grew_at": grew, "num_blocks": r["num_blocks"]}
    return Answer(
        v,
        [
            ("blocks held after the prompts (step 0) / in the pool", f"{used[0]} / {r['num_blocks']}"),
            ("blocks held at the end", str(used[-1])),
            ("blocks held, step by step", " ".join(map(str, used))),
            ("steps in which a request took a new block", ", ".join(map(str, grew)) or "-"),
        ],
    )


def gqa_bytes(lab: Lab, progress: Progress) -> Answer:
    """The same model with one KV head per query head (no GQA) is the `custom` model of its sizes."""
    r = run(lab, progress)
    m = lab.llm()
    mha = run(
        variant(
            lab,
            model="custom",
            custom_layers=m.layers,
            custom_d_model=m.d_model,
            custom_heads=m.heads,
            custom_kv_heads=m.heads,
            custom_head_dim=m.head_dim,
            custom_d_ff=m.d_ff,
            custom_vocab=m.vocab,
        )
    )
    per_token, without = r["kv_bytes_per_token_total"], mha["kv_bytes_per_token_total"]
    v = {
        "kv_bytes_per_token": per_token,
        "without_gqa": without,
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "heads": m.heads,
        "head_dim": m.head_dim,
        "d_model": m.d_model,
        "capacity_tokens": r.get("kv_capacity_tokens"),
    }
    return Answer(
        v,
        [
            (
                "layers, query heads, KV heads, head_dim, hidden size",
                f"{m.layers}, {m.heads}, {m.kv_heads}, {m.head_dim}, {m.d_model}",
            ),
            ("KV bytes per token (2 x layers x KV heads x head_dim x bytes)", f"{per_token:,} B"),
            ("KV bytes per token if every query head had its own KV head (no GQA)", f"{without:,} B"),
            (
                "tokens of KV that fit beside the weights",
                "-" if v["capacity_tokens"] is None else f"{v['capacity_tokens']:,}",
            ),
        ],
    )


def usage_after_finish(lab: Lab, progress: Progress) -> Answer:
    row = mode_row(run(lab, progress))
    v = {
        "end_usage": row["end_usage_frac"],
        "end_cached": row["end_cached_frac"],
        "hit_rate": row["prefix_hit_rate"],
        "finished": row["finished"],
    }
    return Answer(
        v,
        [
            ("KV cache usage once every request finished (blocks requests hold)", pct(v["end_usage"])),
            ("blocks that still hold cached KV: free, and reusable", pct(v["end_cached"])),
            ("prefix hit rate (prompt tokens)", pct(v["hit_rate"])),
        ],
    )


def short_prefix(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    v = {"radix_hit_rate": r["radix_hit_rate"], "hash_hit_rate": r["hash_hit_rate"]}
    return Answer(
        v,
        [
            ("shared system prompt / block size (tokens)", f"{lab.system_len} / {lab.block_size}"),
            ("radix tree (any prefix, to the token)", pct(v["radix_hit_rate"])),
            ("chained block hashes (whole blocks only)", pct(v["hash_hit_rate"])),
        ],
    )


def budget_itl(lab: Lab, progress: Progress) -> Answer:
    """The lab's token budget against vLLM's default for the GPU (`token_budget=0`), same requests."""
    v = {}
    for i, (name, budget) in enumerate((("yours", lab.token_budget), ("default", 0))):
        r = run(variant(lab, token_budget=budget), part_of(progress, i, 2))
        row = mode_row(r)
        v[name] = {
            "token_budget": r["token_budget"],
            "itl_p99_s": row["itl_s"]["p99"],
            "itl_max_s": row["itl_s"]["max"],
            "ttft_mean_s": row["ttft_s"]["mean"],
            "throughput_tok_s": row["throughput_tok_s"],
        }
    yours, default = v["yours"], v["default"]
    return Answer(
        v,
        [
            (
                "token budget: yours / vLLM's default for the GPU",
                f"{yours['token_budget']:,} / {default['token_budget']:,}",
            ),
            ("inter-token latency p99 / max, your budget", f"{ms(yours['itl_p99_s'])} / {ms(yours['itl_max_s'])}"),
            (
                "inter-token latency p99 / max, default budget",
                f"{ms(default['itl_p99_s'])} / {ms(default['itl_max_s'])}",
            ),
            ("mean TTFT: yours / default", f"{ms(yours['ttft_mean_s'])} / {ms(default['ttft_mean_s'])}"),
            (
                "throughput (tokens/s): yours / default",
                f"{yours['throughput_tok_s']:.0f} / {default['throughput_tok_s']:.0f}",
            ),
        ],
    )


def answers_cached(lab: Lab, progress: Progress) -> Answer:
    on, off = (run(variant(lab, cache_answers=flag), part_of(progress, i, 2)) for i, flag in enumerate((True, False)))
    v = {"with_answers": on["hit_rate"], "prompts_only": off["hit_rate"], "prompt_tokens": on["prompt_tokens"]}
    return Answer(
        v,
        [
            ("hit rate, answers cached too (vLLM, SGLang)", pct(v["with_answers"])),
            ("hit rate, only prompts cached", pct(v["prompts_only"])),
        ],
    )


def preemption_throughput(lab: Lab, progress: Progress) -> Answer:
    """vLLM V1 as set, then capped at the maximum concurrency (whole max-length requests that fit):
    requests that can never outgrow memory are never preempted."""
    r = run(lab, part_of(progress, 0, 2))
    cap = max(1, int(r["max_concurrency"]))
    capped = run(variant(lab, max_seqs=cap), part_of(progress, 1, 2))
    v = {
        name: {
            k: row[k] for k in ("preemptions", "recomputed_tokens", "prompt_tokens", "throughput_tok_s", "mean_batch")
        }
        for name, row in (("preempting", mode_row(r)), ("capped", mode_row(capped)))
    }
    v["cap"] = cap
    v["faster"] = max(("preempting", "capped"), key=lambda k: v[k]["throughput_tok_s"])
    pre, cut = v["preempting"], v["capped"]

    def figures(x: dict[str, Any]) -> str:
        return (
            f"{x['preemptions']:,} / {x['recomputed_tokens']:,} / {x['mean_batch']:.1f} / {x['throughput_tok_s']:.0f}"
        )

    return Answer(
        v,
        [
            ("as set: preemptions / tokens recomputed / mean batch / tokens per second", figures(pre)),
            (
                "as set: tokens recomputed per prompt token",
                f"{pre['recomputed_tokens'] / max(1, pre['prompt_tokens']):.2f}",
            ),
            ("max_num_seqs capped at the maximum concurrency (rounded down)", str(cap)),
            ("capped: preemptions / tokens recomputed / mean batch / tokens per second", figures(cut)),
        ],
    )


# -- the exercises ----------------------------------------------------------------------

EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "block-arithmetic",
        "Block arithmetic",
        "How big is one KV block, how many blocks fit beside the weights, and what is the worst "
        f"internal waste of one request with paging, against reserving {RESERVED_LEN} tokens per request?",
        "roofline",
        {"model": "opt-13b-like", "gpu": "A100-40GB", "block_size": "16"},
        ("model", "gpu", "block_size", "mem_util"),
        "A block holds block_size tokens of K and V for every layer: block_size x 2 x layers x KV heads x "
        "head_dim x bytes. Capacity is (usable HBM - weights) / bytes per token. Paging wastes at most the "
        "unfilled rows of each request's last block (B - 1 tokens); a reservation wastes everything it set "
        "aside but never wrote, up to the whole reservation for a request that stops at once.",
        block_arithmetic,
        Check("How many KV blocks fit beside the weights?", lambda a: a.values["blocks"], tolerance=1),
    ),
    Exercise(
        "parallel-blocks",
        "Parallel sampling: the exact block count",
        "n answers share one prompt. Count the blocks in use when every answer is complete, with sharing "
        "and without, and say where the block-free estimate (n-1)Lp / (n(Lp+Lo)) goes wrong.",
        "parallel-sampling",
        {"prompt_len": "20", "output_len": "12", "n": "4", "block_size": "8"},
        ("prompt_len", "output_len", "n", "block_size"),
        "Only the floor(Lp/B) full prompt blocks stay shared. The prompt's last block holds Lp mod B rows and "
        "is written by every answer, so n-1 answers copy it (copy-on-write). Each sequence then holds "
        "ceil((Lp+Lo - floor(Lp/B)B) / B) blocks of its own: total floor(Lp/B) + n x that, against "
        "n ceil((Lp+Lo)/B) without sharing. The estimate counts all Lp prompt tokens as shared, and ignores "
        "that every sequence's last block is rounded up.",
        parallel_blocks,
        Check(
            "How many blocks are in use with sharing once every answer is complete?",
            lambda a: a.values["blocks_shared"],
        ),
    ),
    Exercise(
        "watermark",
        "Admission watermark sweep",
        "Sweep the admission watermark from 0 to 20 % in the memory-tight scenario: what happens to "
        "preemptions and throughput, and which watermark serves best?",
        "sweep",
        {"sweep": "watermark", "scenario": "A", "rate": "10", "requests": "500"},
        ("scenario", "rate", "requests", "preemption"),
        "Admitting a request only while a fraction of blocks stays free leaves room for the running "
        "requests to grow, so fewer of them are preempted (and recomputed or swapped). Too high a "
        "watermark keeps memory idle: the batch shrinks and throughput falls. A few percent is the sweet spot. "
        "The rate is 10 requests/s, not the sweep lab's 2: at 2 requests/s these 500 requests never keep memory "
        "full, every watermark serves the same tokens per second and there is no best one to find.",
        watermark_sweep,
        Check(
            "Which watermark (in %) serves the most tokens per second?",
            lambda a: round(100 * a.values["best_watermark"], 6),
        ),
    ),
    Exercise(
        "swap-recompute",
        "Swap vs recompute for 8B and 70B models",
        "A preempted request holds `tokens` tokens of KV (4096 to start with, as in the lecture). Is it cheaper to swap it out and "
        "back over the host link, or to recompute it with one prefill, for Llama-3-8B and for Llama-3-70B?",
        "recovery",
        {"model": "llama-3-8b", "gpu": "H100-SXM", "tokens": "4096"},
        ("gpu", "tokens", "block_overhead_us", "swap_copies"),
        "Swap moves KV bytes: 2 x layers x KV heads x head_dim x 2 B per token, which grouped-query attention "
        "keeps small (8 KV heads in both models: 128 KiB vs 320 KiB per token). Recompute pays prefill "
        "FLOPs, about 2 x parameters per token: 8.8x more for 70B. So the bigger model makes swapping "
        "relatively cheaper; both grow linearly with the tokens. The 70B's 141 GB of weights fit no single "
        "GPU here, so its answer is a what-if that leaves the weights out of memory (ignore_weights). Each block "
        "copied costs a fixed 10 us on top of the bytes, as in the lecture's swap_cost (block_overhead_us; 0 "
        "leaves only the link's bandwidth). With swap_copies per-layer-kv (vLLM V0: one copy per layer for K and "
        "for V) small blocks make swapping slow.",
        swap_or_recompute,
        Check(
            "For Llama-3-70B, which is cheaper: swap or recompute?",
            lambda a: (
                "swap" if a.values["llama-3-70b"]["swap_s"] < a.values["llama-3-70b"]["recompute_s"] else "recompute"
            ),
            choices=("swap", "recompute"),
        ),
    ),
    Exercise(
        "radix-too-small",
        "A radix cache smaller than a request",
        "The pool holds fewer tokens than the longest request (prompt + output). What hit rate does the "
        "radix cache reach, under any scheduling order?",
        "cache-schedule",
        {"workload": "few-shot", "capacity": "500", "policy": "lspf"},
        ("capacity", "policy", "workload"),
        "The cache and the running request share one pool. A request longer than the pool cannot keep its "
        "own tokens cached, so it leaves nothing behind for the next one: the hit rate is 0 whatever the "
        "order. The offline depth-first order (the optimum, not the online dfs-rank policy) is optimal only "
        "once the cache holds at least the longest request.",
        radix_too_small,
        Check(
            "What hit rate (in %) does the radix cache reach at this capacity?",
            lambda a: 100 * a.values["hit_rate"],
            tolerance=1,
        ),
    ),
    Exercise(
        "hash-vs-radix",
        "Chained block hashes vs a radix tree",
        "vLLM's automatic prefix caching hashes whole blocks, each hash chained with the previous one; "
        "SGLang's radix tree matches prefixes to the token. On the same few-shot workload with room for "
        "everything, how much does each reuse?",
        "prefix-hash",
        {"workload": "few-shot", "capacity": "100000", "block_size": "16"},
        ("block_size", "capacity", "workload"),
        "A chained hash identifies a block by its tokens and everything before it, so only whole blocks of "
        "a common prefix are found: a 100-token system prompt gives 6 blocks of 16 (96 tokens), the 500-token "
        "task prefix 31 blocks (496 tokens). The radix tree reuses all 100 and 500. The gap grows with the "
        "block size; a radix tree with pages of the same size loses the same tail.",
        hash_vs_radix,
        Check(
            "What hit rate (in %) do chained block hashes reach?",
            lambda a: 100 * a.values["hash_hit_rate"],
            tolerance=1,
        ),
    ),
    Exercise(
        "shared-pool",
        "One shared memory pool",
        "SGLang keeps cached prefixes and running requests in one pool, with no fixed cache partition. "
        "Compare its hit rate with a cache that must leave room for the longest request beside it. What "
        "does one pool cost?",
        "cache-schedule",
        {"workload": "multi-turn", "capacity": "2000", "policy": "lspf"},
        ("capacity", "workload", "policy"),
        "One pool lets the cache use every token the running work does not need, with nothing to tune. "
        "The price: when running requests need memory, cached prefixes are evicted exactly when the server "
        "is busiest; a prefix in use is locked and cannot be evicted, so a new request may wait for memory; "
        "and every allocation goes through the cache's eviction.",
        shared_pool,
        Check(
            "What hit rate (in %) does the one shared pool reach?",
            lambda a: 100 * a.values["shared_hit_rate"],
            tolerance=1,
        ),
    ),
    Exercise(
        "template-fsm",
        "Ambiguity in a template FSM",
        "Why can a template that generates the field [a-z]{1,8} and then appends the fixed text 'and' "
        "not handle [a-z]{1,8}and[0-9], and how does the DFA?",
        "fsm",
        {"preset": "ambiguous", "samples": "4"},
        ("samples", "seed"),
        "The field's letters include a, n and d: after 'band' the text may be the field 'band' still growing, "
        "or the field 'b' followed by the literal 'and'. A template must decide where the field ends before "
        "it sees what follows, so it rejects valid strings or writes invalid ones. Subset construction "
        "tracks every reading at once: a DFA state is a set of NFA states, and in the states counted here a "
        "letter (the field goes on) and a digit (the literal is done) are both legal. 'and' becomes a forced "
        "jump only after 8 letters, when the field cannot grow.",
        template_ambiguity,
        Check("In how many DFA states are a letter and a digit both legal?", lambda a: a.values["ambiguous_states"]),
    ),
    Exercise(
        "full-prompt-check",
        "Why vLLM checks the whole prompt before admitting it",
        "Long prompts (about 3,000 tokens) arrive faster than the GPU serves them, and vLLM V1 prefills "
        "them in chunks of its token budget. How often does V1 preempt a request when only a prompt's "
        "first chunk must fit in free memory at admission (older vLLM), and how often with today's rule "
        "that the whole prompt must fit?",
        "schedulers",
        {"workload": "long-context", "rate": "20", "requests": "100", "full_prompt_check": "true"},
        ("rate", "requests", "token_budget", "mem_util"),
        "Checking only the first chunk admits a long prompt into memory that cannot hold the rest of it. "
        "Its next chunks then take the blocks the running requests need to grow, and the scheduler "
        "preempts the latest request, often the one it just admitted, whose computed chunks are thrown "
        "away and computed again later. vLLM (scheduler_reserve_full_isl, on by default since PR #37307) "
        "admits a request only if the blocks for its whole uncached prompt are free: it waits instead, "
        "and little work is done twice.",
        full_prompt_check,
        Check(
            "How many preemptions does vLLM V1 make when only the first chunk must fit?",
            lambda a: a.values["off"]["preemptions"],
        ),
    ),
    Exercise(
        "aging",
        "An aging scheduler and its trade-off",
        "Longest-shared-prefix-first maximises cache hits but can starve a request. Aging serves by "
        "match length + alpha x steps waited. Compare hit rate and longest wait with FCFS and LSPF.",
        "cache-schedule",
        {"workload": "few-shot", "capacity": "2000", "policy": "aging", "alpha": "20"},
        ("alpha", "capacity", "queue"),
        "FCFS never makes a request wait longer than the queue length minus one but ignores the cache. LSPF "
        "serves whoever shares the longest prefix, so a request of a task that is not cached can wait a long "
        "time. Aging adds alpha for every step waited: alpha = 0 is LSPF, a large alpha is FCFS. It bounds the "
        "longest wait at the price of some hits.",
        aging_tradeoff,
        Check(
            "Which policy has the shortest longest wait?",
            lambda a: min(a.values, key=lambda p: a.values[p]["max_wait"]),
            choices=("fcfs", "lspf", "aging"),
        ),
    ),
    Exercise(
        "max-concurrency",
        "How many requests fit at once?",
        'At start-up vLLM logs "Maximum concurrency for 2048 tokens per request": its KV blocks over the '
        "blocks of one request of the model's maximum length. Serve the memory-tight scenario (OPT-13B-like on an "
        "A100-40GB) at 20 requests per second: how many maximum-length requests fit, and how many requests does "
        "vLLM V1 actually run at once?",
        "schedulers",
        {"workload": "scenario", "scenario": "A", "rate": "20", "requests": "300"},
        ("rate", "requests", "mem_util", "block_size"),
        "Maximum concurrency = KV blocks / ceil(max_len / block_size): a lower bound that assumes every request "
        "grows to the maximum length. Real requests are shorter (ShareGPT-like: a few hundred tokens), and paged "
        "memory gives each one blocks only as its tokens arrive, so many more run at once. When they outgrow "
        "memory, the scheduler preempts; max_num_seqs (256) is the only hard cap.",
        max_concurrency,
        Check(
            "How many requests of the maximum length (2048 tokens) fit in KV memory at once?",
            lambda a: a.values["max_concurrency"],
            tolerance=0.1,
        ),
    ),
    Exercise(
        "kv-grows",
        "Is KV reserved up front or grown per step?",
        "vLLM sets aside its whole KV pool at start-up (gpu_memory_utilization). Does a request then get blocks "
        "for its maximum length when it is admitted, or as it generates? Follow two requests' block tables.",
        "block-tables",
        {"prompt_a": "20", "prompt_b": "24", "decode_steps": "12", "block_size": "8"},
        ("prompt_a", "prompt_b", "decode_steps", "block_size"),
        "The pool is allocated once, but a request holds only the blocks its tokens fill: ceil(prompt / "
        "block_size) after its prompt, then one more block each time its last block is full while it decodes. "
        "So KV is never reserved for tokens not yet generated; at most one block per request is partly empty. "
        "(vLLM V1 also checks at admission that its whole prompt fits, not its output.)",
        kv_grows,
        Check(
            "How many blocks do the two requests hold together right after their prompts are prefilled?",
            lambda a: a.values["after_prompts"],
        ),
    ),
    Exercise(
        "gqa-bytes",
        "KV bytes per token with grouped-query attention",
        "How many bytes of KV cache does one token of Llama-3-8B take? A common estimate multiplies by the "
        "hidden size: 2 x layers x hidden size x 2 bytes. Why is it 4x too high?",
        "roofline",
        {"model": "llama-3-8b", "gpu": "H100-SXM"},
        ("model", "kv_precision"),
        "Each layer stores K and V for its KV heads only: 2 x layers x KV heads x head_dim x bytes. With "
        "grouped-query attention several query heads share one KV head (Llama-3-8B: 32 query heads, 8 KV "
        "heads), so the KV is heads / KV heads times smaller than the hidden size suggests, and that many "
        "more tokens fit. The hidden-size formula is right only without GQA, when KV heads x head_dim = "
        "hidden size.",
        gqa_bytes,
        Check(
            "How many bytes of KV cache does one token take (all layers, K and V)?",
            lambda a: a.values["kv_bytes_per_token"],
        ),
    ),
    Exercise(
        "usage-zero",
        "KV cache usage reads 0 % with prefix caching on",
        "With prefix caching on, vLLM's KV cache usage falls to 0 % as soon as the last request finishes, "
        "although the cache still holds the conversations. What does usage count, and where did the cached "
        "blocks go?",
        "schedulers",
        {"workload": "multi-turn", "requests": "60", "rate": "2"},
        ("requests", "rate", "prefix_caching", "mem_util"),
        "Usage counts the blocks requests hold (1 - free blocks / all blocks). A finished request's blocks go "
        "back to the free queue with their hashes: free, yet still found by the prefix cache until an "
        "allocation takes them (least recently used first). So usage reads 0 % while almost every block still "
        "holds reusable KV, which the hit rate shows.",
        usage_after_finish,
        Check(
            "What KV cache usage (%) does vLLM V1 report once every request has finished?",
            lambda a: 100 * a.values["end_usage"],
            tolerance=1,
        ),
    ),
    Exercise(
        "short-prefix",
        "A shared prompt shorter than one block",
        "Every request starts with the same 12-token system prompt, then its own question. Why does vLLM's "
        "prefix cache, with blocks of 16 tokens, never hit, while a radix tree reuses the 12 tokens?",
        "prefix-hash",
        {"workload": "few-shot", "capacity": "100000", "block_size": "16", "system_len": "12", "examples_len": "0"},
        ("system_len", "block_size", "examples_len"),
        "vLLM hashes only full blocks, each hash chained with the one before it. The first block holds the 12 "
        "shared tokens and 4 tokens of each request's own question, so its hash differs for every request and "
        "no block is ever reused. Shared prefixes are reused in whole blocks: raise the system prompt to 16 "
        "tokens (or lower block_size) and the hits appear.",
        short_prefix,
        Check(
            "What hit rate (in %) do chained block hashes reach?",
            lambda a: 100 * a.values["hash_hit_rate"],
            tolerance=1,
        ),
    ),
    Exercise(
        "budget-itl",
        "A smaller token budget, a smoother decode",
        "Long prompts (Llama-3-8B on an H100) arrive while other requests decode. Why does lowering vLLM's "
        "max_num_batched_tokens from its default 8192 to 512 cut the inter-token latency?",
        "schedulers",
        {"workload": "long-context", "scenario": "B", "rate": "5", "requests": "100", "token_budget": "512"},
        ("token_budget", "rate", "requests"),
        "Every step decodes each running request once and fills the rest of the budget with prefill chunks. "
        "With 8192 tokens a step may prefill about 8,000 prompt tokens, roughly 0.2 s of compute on an H100, "
        "and every decoding request waits that long for its next token. With 512 a step is a few milliseconds "
        "longer than a plain decode step, so tokens flow evenly; prompts take more steps, so the time to the "
        "first token grows a little.",
        budget_itl,
        Check(
            "About how long (ms) is the longest wait for a next token at the default budget (8192 tokens)?",
            lambda a: 1000 * a.values["default"]["itl_max_s"],
            tolerance=20,
        ),
    ),
    Exercise(
        "answers-cached",
        "Cache the answers for the next chat turn",
        "Each chat turn's prompt is the whole conversation so far: the last prompt, the model's answer, and a "
        "new question. What hit rate does a prefix cache reach when it keeps each answer's tokens, and when it "
        "keeps only the prompts?",
        "cache-schedule",
        {"workload": "multi-turn", "capacity": "100000", "output_len": "200"},
        ("output_len", "turns", "capacity"),
        "The next turn matches the cache token by token from its start. Its prompt holds the last answer right "
        "after the last prompt, so a cache without the answer's tokens stops matching there, and the answer and "
        "everything after it is computed again, every turn. vLLM caches generated tokens' full blocks and "
        "SGLang inserts the output into the radix tree when a request finishes, so the next turn reuses the "
        "whole conversation.",
        answers_cached,
        Check(
            "What hit rate (in %) does the cache reach when it keeps only the prompts?",
            lambda a: 100 * a.values["prompts_only"],
            tolerance=1,
        ),
    ),
    Exercise(
        "preemption-throughput",
        "What preemption does to throughput",
        "vLLM warns when it preempts requests for lack of KV blocks. In the memory-tight scenario at 20 "
        "requests per second, what do preemptions cost, and does capping max_num_seqs at the maximum "
        "concurrency (so that nothing is ever preempted) serve more tokens per second?",
        "schedulers",
        {"workload": "scenario", "scenario": "A", "rate": "20", "requests": "300"},
        ("rate", "requests", "mem_util"),
        "A preempted request drops its KV and is computed again later: its recomputed tokens are wasted prefill "
        "work, and its latency suffers. But decode steps are memory-bound, so tokens per second grow with the "
        "batch: capping the batch at what fits at the maximum length avoids every preemption and serves far "
        "fewer tokens. Preemption is the price of a batch that fills memory; fewer preemptions come from more "
        "KV memory (gpu_memory_utilization, FP8 KV, more GPUs), not a smaller batch.",
        preemption_throughput,
        Check(
            "Which serves more tokens per second: vLLM V1 as set (preempting) or capped (never preempting)?",
            lambda a: a.values["faster"],
            choices=("preempting", "capped"),
        ),
    ),
    Exercise(
        "lora-slots",
        "How many LoRA adapters fit beside the KV cache?",
        "You serve eight LoRA adapters of rank 16 on Llama-3.1-8B's q, k, v and o from one H100 with vLLM. How "
        "much of the KV cache does an adapter slot take, and what limits you: the memory or max_loras?",
        "schedulers",
        {
            "scenario": "B",
            "model": "llama-3.1-8b",
            "workload": "multi-turn",
            "rate": "4",
            "requests": "200",
            "loras": "8",
            "max_loras": "1",
            "lora_rank": "16",
        },
        ("loras", "max_loras", "lora_rank", "rate"),
        "A slot holds A (rank x in) and B (out x rank) for each target module in each layer: 16 x (4096 + 4096) "
        "for q and o, 16 x (4096 + 1024) for k and v, 425,984 parameters a layer, 32 layers, 2 bytes each: "
        "27,262,976 bytes, the KV of 208 tokens (131,072 bytes each), 13 blocks of 16. vLLM allocates max_loras "
        "slots before sizing the KV cache, so eight slots cost 104 of about 28,000 blocks. The limit is "
        "max_loras: with its default 1 a batch serves one adapter at a time, requests of the others wait "
        "(vLLM skips them in the waiting queue) and every switch copies an adapter over the host link.",
        lora_slots,
        Check(
            "How many KV blocks of 16 tokens does one adapter slot take?",
            lambda a: a.values["slot_blocks"],
            tolerance=0.5,
        ),
    ),
    Exercise(
        "same-image",
        "Why is the second request with the same image faster?",
        "Your users send the same image of 576 tokens with different questions after a shared system prompt, "
        "and vLLM answers the second request much sooner than the first. Which caches make it faster, and how "
        "many image embeddings does the vision encoder compute over 200 such requests?",
        "schedulers",
        {
            "workload": "few-shot",
            "requests": "200",
            "rate": "2",
            "images": "1",
            "image_tokens": "576",
            "image_pool": "1",
        },
        ("image_pool", "image_tokens", "rate", "prefix_caching", "encoder_cache"),
        "Two caches. The prefix cache: a block holding an image's placeholder tokens is hashed with the image's "
        "hash (vLLM's _gen_mm_extra_hash_keys), so a request with the same text before the image and the same "
        "image finds the KV of its blocks through the image and prefills none of them. The encoder cache: a "
        "request whose cached prefix stops before the image's end still finds the image's embeddings by its "
        "hash (EncoderCacheManager.check_and_update_cache) and skips the vision encoder. So the encoder computes "
        "the 576 embeddings once: the cache keeps them until their room is needed, and one image never needs "
        "more. With every request's image its own, the encoder computes 200 x 576 = 115,200, the prefix cache "
        "hits only the system prompt before the image, and the first token waits seconds.",
        same_image,
        Check(
            "How many image embeddings does the encoder compute over the 200 requests?",
            lambda a: a.values["yours"]["computed"],
        ),
    ),
    Exercise(
        "draft-length",
        "Why does TPOT get worse with a longer draft under load?",
        "You run vLLM with EAGLE drafts on a busy OPT-13B server (ShareGPT-like traffic at 20 requests/s) whose "
        "drafts are accepted only 30 % of the time. Which number of draft tokens per step gives the lowest TPOT, "
        "and why does a longer draft make it worse?",
        "schedulers",
        {
            "workload": "sharegpt",
            "rate": "20",
            "requests": "300",
            "spec_tokens": "5",
            "acceptance": "0.3",
            "spec_sweep": "true",
        },
        ("spec_tokens", "acceptance", "rate"),
        "A draft position is kept only if every one before it was: at 0.3 the k-th draft token survives with "
        "0.3**k (0.3, 0.09, 0.027, ...), so a request keeps at most about 1.43 tokens a step however long the "
        "draft. But every draft token is paid whether kept or not: the target verifies 1 + k tokens of every "
        "decoding request in one step (all in the token budget), the drafter runs k passes a step, and the "
        "request holds KV slots ahead for them. Under load the batch is large, so those extra tokens make every "
        "step longer: here k = 2 pays most, and from k = 5 drafting is slower than no drafts at all. With a "
        "higher acceptance (try 0.7) the longer drafts keep paying.",
        draft_length,
        Check("Which draft length (k) gives the lowest TPOT p50?", lambda a: a.values["best_k"], tolerance=0),
    ),
)

BY_KEY = {e.key: e for e in EXERCISES}
