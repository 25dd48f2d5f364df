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


def variant(lab: Lab, **changes: Any) -> Lab:
    """The same lab with some parameters changed (each answer may compare a few runs)."""
    return type(lab)(**{**lab.values(), **changes})


def run(lab: Lab, progress: Progress = no_progress) -> dict[str, Any]:
    return jsonable(lab.run(progress))


# -- answers -------------------------------------------------------------------------

def block_arithmetic(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    per_token, b = r["kv_bytes_per_token_total"], lab.block_size
    v = {"kv_bytes_per_token": per_token, "block_bytes": r["kv_bytes_per_block_total"],
         "blocks": r["kv_capacity_blocks"], "capacity_tokens": r["kv_capacity_tokens"],
         "paged_worst_waste_bytes": (b - 1) * per_token,
         "reserved_worst_waste_bytes": (RESERVED_LEN - 1) * per_token,
         "reserved_requests": r["kv_capacity_tokens"] // RESERVED_LEN}
    return Answer(v, [
        ("KV bytes per token", f"{per_token:,} B"),
        ("one block", f"{v['block_bytes'] / 1e6:.2f} MB"),
        ("blocks that fit (tokens)", f"{v['blocks']:,} ({v['capacity_tokens']:,})"),
        ("worst waste per request, paged (B - 1 tokens)", f"{v['paged_worst_waste_bytes'] / 1e6:.2f} MB"),
        (f"worst waste per request, reserving {RESERVED_LEN} tokens", f"{v['reserved_worst_waste_bytes'] / 1e9:.2f} GB"),
        (f"requests that fit when each reserves {RESERVED_LEN} tokens", str(v["reserved_requests"])),
    ])


def parallel_blocks(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    lp, lo, n, b = lab.prompt_len, lab.output_len, lab.n, lab.block_size
    full = lp // b  # prompt blocks that stay shared
    exact = full + n * -(-(lp + lo - full * b) // b)
    v = {"blocks_shared": r["blocks_shared"], "blocks_unshared": r["blocks_unshared"], "exact_shared": exact,
         "exact_unshared": n * -(-(lp + lo) // b), "saving": r["saving"], "estimate": r["estimate"],
         "full_block_estimate": (n - 1) * full * b / (n * (lp + lo)), "copies": r["copies"],
         "partial_rows": lp % b}
    return Answer(v, [
        ("blocks with sharing: measured / by block arithmetic", f"{v['blocks_shared']} / {exact}"),
        ("blocks without sharing", str(v["blocks_unshared"])),
        ("saving: measured / block-free estimate", f"{pct(v['saving'])} / {pct(v['estimate'])}"),
        ("estimate counting only full prompt blocks as shared", pct(v["full_block_estimate"])),
        ("copy-on-write copies of the prompt's last block (its rows / block size)",
         f"{v['copies']} ({v['partial_rows']} / {b})"),
    ])


def watermark_sweep(lab: Lab, progress: Progress) -> Answer:
    rows = run(lab, progress)["rows"]
    best = max(rows, key=lambda r: r["throughput_tok_s"])
    v = {"watermarks": [r["watermark"] for r in rows], "preemptions": [r["preemptions"] for r in rows],
         "throughput": [r["throughput_tok_s"] for r in rows], "best_watermark": best["watermark"]}
    return Answer(v, [("preemptions by watermark", ", ".join(f"{pct(r['watermark'])}: {r['preemptions']}" for r in rows)),
                      ("tokens/s by watermark", ", ".join(f"{pct(r['watermark'])}: {r['throughput_tok_s']:.0f}" for r in rows)),
                      ("best watermark (throughput)", pct(best["watermark"]))])


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
        lines += [(f"{name}: swap out + in at block 16 / recompute", f"{ms(swap)} / {ms(recompute)}"),
                  (f"{name}: recompute / swap", times(recompute / swap))]
    return Answer(v, lines)


def radix_too_small(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    roomy = run(variant(lab, capacity=max(lab.capacity, 100 * r["longest_request"])))
    v = {"hit_rate": r["hit_rate"], "longest_request": r["longest_request"], "roomy_hit_rate": roomy["hit_rate"]}
    return Answer(v, [("longest request (prompt + output tokens)", str(r["longest_request"])),
                      ("hit rate at this capacity", pct(r["hit_rate"])),
                      ("hit rate when everything fits", pct(roomy["hit_rate"]))])


def hash_vs_radix(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    v = {"radix_hit_rate": r["radix_hit_rate"], "hash_hit_rate": r["hash_hit_rate"],
         "radix_paged_hit_rate": r["radix_paged_hit_rate"]}
    return Answer(v, [("radix tree (any prefix, to the token)", pct(v["radix_hit_rate"])),
                      ("chained block hashes (whole blocks only)", pct(v["hash_hit_rate"])),
                      ("radix tree with pages of the block size", pct(v["radix_paged_hit_rate"]))])


def shared_pool(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    longest = r["longest_request"]
    split = run(variant(lab, capacity=max(1, lab.capacity - longest))) if lab.capacity > longest else {"hit_rate": 0.0}
    v = {"shared_hit_rate": r["hit_rate"], "split_hit_rate": split["hit_rate"], "longest_request": longest,
         "max_wait": r["max_wait"]}
    return Answer(v, [("longest request (prompt + output tokens)", str(longest)),
                      ("one shared pool: hit rate", pct(v["shared_hit_rate"])),
                      ("cache partition beside room for the longest request: hit rate", pct(v["split_hit_rate"])),
                      ("longest wait (steps)", str(v["max_wait"]))])


def template_ambiguity(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    dfa = lab.compile().dfa
    letters = [i for i, c in enumerate(VOCAB) if c.isalpha() and c.islower()]
    digits = [i for i, c in enumerate(VOCAB) if c.isdigit()]
    both = [s for s in range(dfa.states) if dfa.allowed(s)[letters].any() and dfa.allowed(s)[digits].any()]
    chains = [c["text"] for c in r["graph"]["chains"]]
    v = {"dfa_states": r["dfa_states"], "nfa_states": r["nfa_states"], "ambiguous_states": len(both),
         "jump_edges": r["jump_edges"], "chains": chains, "all_match": r["all_match"],
         "forwards_plain": r["forwards_plain"], "forwards_compressed": r["forwards_compressed"]}
    return Answer(v, [("DFA states (NFA states)", f"{v['dfa_states']} ({v['nfa_states']})"),
                      ("states where a letter and a digit are both legal", str(len(both))),
                      ("jump chains", ", ".join(repr(c) for c in chains) or "-"),
                      ("every output matches", "yes" if v["all_match"] else "no"),
                      ("forwards plain / compressed", f"{v['forwards_plain']} / {v['forwards_compressed']}")])


def aging_tradeoff(lab: Lab, progress: Progress) -> Answer:
    r = run(lab, progress)
    runs = {**r["runs"], "aging": {"hit_rate": r["hit_rate"], "max_wait": r["max_wait"]}}
    v = {p: {"hit_rate": x["hit_rate"], "max_wait": x["max_wait"]} for p, x in runs.items()}
    return Answer(v, [(f"{p}: hit rate / longest wait (steps)", f"{pct(x['hit_rate'])} / {x['max_wait']}")
                      for p, x in v.items()])


def full_prompt_check(lab: Lab, progress: Progress) -> Answer:
    """vLLM V1 with the full-prompt admission check and without it (older vLLM), same requests."""
    v = {}
    for i, check in enumerate((True, False)):
        def part(f: float, m: str, i: int = i) -> None:
            progress((i + f) / 2, m)

        row = next(m for m in run(variant(lab, full_prompt_check=check), part)["modes"] if m["mode"] == "vllm-v1")
        v["on" if check else "off"] = {k: row[k] for k in ("preemptions", "recomputed_tokens", "throughput_tok_s")}
    return Answer(v, [(f"full-prompt check {k}: preemptions / tokens recomputed / tokens per second",
                       f"{x['preemptions']} / {x['recomputed_tokens']:,} / {x['throughput_tok_s']:.0f}")
                      for k, x in v.items()])


# -- the exercises ----------------------------------------------------------------------

EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "block-arithmetic", "Block arithmetic",
        "How big is one KV block, how many blocks fit beside the weights, and what is the worst "
        f"internal waste of one request with paging, against reserving {RESERVED_LEN} tokens per request?",
        "roofline", {"model": "opt-13b-like", "gpu": "A100-40GB", "block_size": "16"},
        ("model", "gpu", "block_size", "mem_util"),
        "A block holds block_size tokens of K and V for every layer: block_size x 2 x layers x KV heads x "
        "head_dim x bytes. Capacity is (usable HBM - weights) / bytes per token. Paging wastes at most the "
        "unfilled rows of each request's last block (B - 1 tokens); a reservation wastes everything it set "
        "aside but never wrote, up to the whole reservation for a request that stops at once.",
        block_arithmetic,
        Check("How many KV blocks fit beside the weights?", lambda a: a.values["blocks"], tolerance=1)),
    Exercise(
        "parallel-blocks", "Parallel sampling: the exact block count",
        "n answers share one prompt. Count the blocks in use when every answer is complete, with sharing "
        "and without, and say where the block-free estimate (n-1)Lp / (n(Lp+Lo)) goes wrong.",
        "parallel-sampling", {"prompt_len": "20", "output_len": "12", "n": "4", "block_size": "8"},
        ("prompt_len", "output_len", "n", "block_size"),
        "Only the floor(Lp/B) full prompt blocks stay shared. The prompt's last block holds Lp mod B rows and "
        "is written by every answer, so n-1 answers copy it (copy-on-write). Each sequence then holds "
        "ceil((Lp+Lo - floor(Lp/B)B) / B) blocks of its own: total floor(Lp/B) + n x that, against "
        "n ceil((Lp+Lo)/B) without sharing. The estimate counts all Lp prompt tokens as shared, and ignores "
        "that every sequence's last block is rounded up.",
        parallel_blocks,
        Check("How many blocks are in use with sharing once every answer is complete?",
              lambda a: a.values["blocks_shared"])),
    Exercise(
        "watermark", "Admission watermark sweep",
        "Sweep the admission watermark from 0 to 20 % in the memory-tight scenario: what happens to "
        "preemptions and throughput, and which watermark serves best?",
        "sweep", {"sweep": "watermark", "scenario": "A", "rate": "10", "requests": "500"},
        ("scenario", "rate", "requests", "preemption"),
        "Admitting a request only while a fraction of blocks stays free leaves room for the running "
        "requests to grow, so fewer of them are preempted (and recomputed or swapped). Too high a "
        "watermark keeps memory idle: the batch shrinks and throughput falls. A few percent is the sweet spot. "
        "The rate is 10 requests/s, not the sweep lab's 2: at 2 requests/s these 500 requests never keep memory "
        "full, every watermark serves the same tokens per second and there is no best one to find.",
        watermark_sweep,
        Check("Which watermark (in %) serves the most tokens per second?",
              lambda a: round(100 * a.values["best_watermark"], 6))),
    Exercise(
        "swap-recompute", "Swap vs recompute for 8B and 70B models",
        "A preempted request holds `tokens` tokens of KV (4096 to start with, as in the lecture). Is it cheaper to swap it out and "
        "back over the host link, or to recompute it with one prefill, for Llama-3-8B and for Llama-3-70B?",
        "recovery", {"model": "llama-3-8b", "gpu": "H100-SXM", "tokens": "4096"},
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
        Check("For Llama-3-70B, which is cheaper: swap or recompute?",
              lambda a: "swap" if a.values["llama-3-70b"]["swap_s"] < a.values["llama-3-70b"]["recompute_s"]
              else "recompute", choices=("swap", "recompute"))),
    Exercise(
        "radix-too-small", "A radix cache smaller than a request",
        "The pool holds fewer tokens than the longest request (prompt + output). What hit rate does the "
        "radix cache reach, under any scheduling order?",
        "cache-schedule", {"workload": "few-shot", "capacity": "500", "policy": "lspf"},
        ("capacity", "policy", "workload"),
        "The cache and the running request share one pool. A request longer than the pool cannot keep its "
        "own tokens cached, so it leaves nothing behind for the next one: the hit rate is 0 whatever the "
        "order. The offline depth-first order (the optimum, not the online dfs-rank policy) is optimal only "
        "once the cache holds at least the longest request.",
        radix_too_small,
        Check("What hit rate (in %) does the radix cache reach at this capacity?",
              lambda a: 100 * a.values["hit_rate"], tolerance=1)),
    Exercise(
        "hash-vs-radix", "Chained block hashes vs a radix tree",
        "vLLM's automatic prefix caching hashes whole blocks, each hash chained with the previous one; "
        "SGLang's radix tree matches prefixes to the token. On the same few-shot workload with room for "
        "everything, how much does each reuse?",
        "prefix-hash", {"workload": "few-shot", "capacity": "100000", "block_size": "16"},
        ("block_size", "capacity", "workload"),
        "A chained hash identifies a block by its tokens and everything before it, so only whole blocks of "
        "a common prefix are found: a 100-token system prompt gives 6 blocks of 16 (96 tokens), the 500-token "
        "task prefix 31 blocks (496 tokens). The radix tree reuses all 100 and 500. The gap grows with the "
        "block size; a radix tree with pages of the same size loses the same tail.",
        hash_vs_radix,
        Check("What hit rate (in %) do chained block hashes reach?", lambda a: 100 * a.values["hash_hit_rate"],
              tolerance=1)),
    Exercise(
        "shared-pool", "One shared memory pool",
        "SGLang keeps cached prefixes and running requests in one pool, with no fixed cache partition. "
        "Compare its hit rate with a cache that must leave room for the longest request beside it. What "
        "does one pool cost?",
        "cache-schedule", {"workload": "multi-turn", "capacity": "2000", "policy": "lspf"},
        ("capacity", "workload", "policy"),
        "One pool lets the cache use every token the running work does not need, with nothing to tune. "
        "The price: when running requests need memory, cached prefixes are evicted exactly when the server "
        "is busiest; a prefix in use is locked and cannot be evicted, so a new request may wait for memory; "
        "and every allocation goes through the cache's eviction.",
        shared_pool,
        Check("What hit rate (in %) does the one shared pool reach?", lambda a: 100 * a.values["shared_hit_rate"],
              tolerance=1)),
    Exercise(
        "template-fsm", "Ambiguity in a template FSM",
        "Why can a template that generates the field [a-z]{1,8} and then appends the fixed text 'and' "
        "not handle [a-z]{1,8}and[0-9], and how does the DFA?",
        "fsm", {"preset": "ambiguous", "samples": "4"},
        ("samples", "seed"),
        "The field's letters include a, n and d: after 'band' the text may be the field 'band' still growing, "
        "or the field 'b' followed by the literal 'and'. A template must decide where the field ends before "
        "it sees what follows, so it rejects valid strings or writes invalid ones. Subset construction "
        "tracks every reading at once: a DFA state is a set of NFA states, and in the states counted here a "
        "letter (the field goes on) and a digit (the literal is done) are both legal. 'and' becomes a forced "
        "jump only after 8 letters, when the field cannot grow.",
        template_ambiguity,
        Check("In how many DFA states are a letter and a digit both legal?", lambda a: a.values["ambiguous_states"])),
    Exercise(
        "full-prompt-check", "Why vLLM checks the whole prompt before admitting it",
        "Long prompts (about 3,000 tokens) arrive faster than the GPU serves them, and vLLM V1 prefills "
        "them in chunks of its token budget. How often does V1 preempt a request when only a prompt's "
        "first chunk must fit in free memory at admission (older vLLM), and how often with today's rule "
        "that the whole prompt must fit?",
        "schedulers", {"workload": "long-context", "rate": "20", "requests": "100", "full_prompt_check": "true"},
        ("rate", "requests", "token_budget", "mem_util"),
        "Checking only the first chunk admits a long prompt into memory that cannot hold the rest of it. "
        "Its next chunks then take the blocks the running requests need to grow, and the scheduler "
        "preempts the latest request, often the one it just admitted, whose computed chunks are thrown "
        "away and computed again later. vLLM (scheduler_reserve_full_isl, on by default since PR #37307) "
        "admits a request only if the blocks for its whole uncached prompt are free: it waits instead, "
        "and little work is done twice.",
        full_prompt_check,
        Check("How many preemptions does vLLM V1 make when only the first chunk must fit?",
              lambda a: a.values["off"]["preemptions"])),
    Exercise(
        "aging", "An aging scheduler and its trade-off",
        "Longest-shared-prefix-first maximises cache hits but can starve a request. Aging serves by "
        "match length + alpha x steps waited. Compare hit rate and longest wait with FCFS and LSPF.",
        "cache-schedule", {"workload": "few-shot", "capacity": "2000", "policy": "aging", "alpha": "20"},
        ("alpha", "capacity", "queue"),
        "FCFS never makes a request wait longer than the queue length minus one but ignores the cache. LSPF "
        "serves whoever shares the longest prefix, so a request of a task that is not cached can wait a long "
        "time. Aging adds alpha for every step waited: alpha = 0 is LSPF, a large alpha is FCFS. It bounds the "
        "longest wait at the price of some hits.",
        aging_tradeoff,
        Check("Which policy has the shortest longest wait?",
              lambda a: min(a.values, key=lambda p: a.values[p]["max_wait"]), choices=("fcfs", "lspf", "aging"))),
)

BY_KEY = {e.key: e for e in EXERCISES}
