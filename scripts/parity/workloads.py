"""Fixed, seeded workloads for the scheduler parity recordings (stdlib only).

Importable from plain CPython without vLLM or kvweb: `scripts/parity/record_vllm.py` drives vLLM's
real V1 scheduler on them, and the replay test rebuilds the same requests for kvweb's `vllm-v1`.

Token ids. Every prompt and every output is a list of segments `[seed, length]`; a segment's
tokens are

    [1 + (seed * 1_000_003 + i * 7_919) % 30_000 for i in range(length)]

(`segment_tokens` below), and a prompt's or output's tokens are its segments' tokens
concatenated (`tokens`). Equal segments give equal tokens, so a shared prefix is the same
segment. 7_919 is prime to 30_000, so a segment does not repeat within 30_000 tokens; distinct
seeds below 10_000 give distinct segments (1_000_003 = 3 mod 30_000), and every seed used here is
below 10_000 and, unless shared on purpose, used once per workload.

Arrivals. A request with `arrival_step` s is added to the scheduler before the schedule() call of
0-based index s. A later chat turn carries `after: [earlier_id, delay]` instead of a fixed step:
it arrives `delay` steps after the step at which the earlier request is reported finished
(the step whose update processed its last token); its `arrival_step` is then resolved by the run
(the recorder writes the step at which each request arrived into the run's step records as
`arrived`, and the resolved steps of every run under `arrivals`).

Config keys follow vLLM's names: block_size, num_gpu_blocks (the KV cache holds exactly this many
blocks, block 0 of which vLLM reserves as its null block), max_num_seqs, max_num_batched_tokens
(the token budget), enable_prefix_caching, max_model_len.

Speculative decoding (`SPEC_WORKLOADS`, recorded apart from `WORKLOADS`). Such a workload also
has `spec: {method, spec_tokens, acceptance, seed}`: vLLM's drafter method ("eagle": EAGLE's
head, which reserves `spec_tokens` lookahead slots and drops the last block of a prefix-cache hit;
"ngram": prompt lookup, neither; "draft_model": a separate draft model, `spec_tokens` lookahead
slots, blocks hashed as without drafts, and one token of the budget more for each request it
schedules), the draft tokens a step (k), each draft position's acceptance
rate given the ones before it were accepted (k rates), and the seed of the draws
(`accepted_drafts`).

LoRA adapters (`LORA_WORKLOADS`, recorded apart). Such a workload's config also has `max_loras`
(vLLM's `LoRAConfig.max_loras`: distinct adapters in one batch) and each request an `adapter`
(0: the base model; else vLLM's `LoRARequest(f"lora-{i}", i, f"/lora/{i}")`, its name and path in
every block's hash).

Images (`MM_WORKLOADS`, recorded apart). Such a workload's config also has `encoder_budget` (vLLM's
`max_num_encoder_input_tokens`: embeddings the encoder computes in one step) and `encoder_cache`
(`encoder_cache_size`: embeddings the encoder cache holds), and each request `images`:
`[offset, length, mm_hash]` in prompt order, one embedding per placeholder token. An image's
placeholders are the prompt segment `[PLACEHOLDER + length, length]`, the same tokens for every
image of that length, so only the mm hash tells two images apart (as vLLM's placeholder token ids).
"""

from __future__ import annotations

import random

TOKEN_FORMULA = "segment [seed, length] -> [1 + (seed * 1_000_003 + i * 7_919) % 30_000 for i in range(length)]"


def segment_tokens(seed: int, length: int) -> list[int]:
    return [1 + (seed * 1_000_003 + i * 7_919) % 30_000 for i in range(length)]


def tokens(segments: list[list[int]]) -> list[int]:
    out: list[int] = []
    for seed, length in segments:
        out += segment_tokens(seed, length)
    return out


def total(segments: list[list[int]]) -> int:
    return sum(length for _, length in segments)


class _Builder:
    """Requests of one workload; hands out fresh segment seeds."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_seed = 1
        self.requests: list[dict] = []

    def seg(self, length: int) -> list[int]:
        s = self.next_seed
        self.next_seed += 1
        assert s < 10_000
        return [s, length]

    def add(self, arrival: int | None, prompt: list[list[int]], out_len: int, after: list[int] | None = None) -> dict:
        req = {"id": len(self.requests), "arrival_step": arrival, "prompt": prompt, "output": [self.seg(out_len)]}
        if after is not None:
            req["after"] = after
        self.requests.append(req)
        return req


def _config(
    block_size=16,
    num_gpu_blocks=1000,
    max_num_seqs=32,
    max_num_batched_tokens=512,
    enable_prefix_caching=True,
    max_model_len=2048,
) -> dict:
    return {
        "block_size": block_size,
        "num_gpu_blocks": num_gpu_blocks,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": max_num_batched_tokens,
        "enable_prefix_caching": enable_prefix_caching,
        "max_model_len": max_model_len,
    }


def _random(name, seed, n, prompt, out, spread, cfg, category) -> dict:
    b = _Builder(seed)
    r = b.rng
    for _ in range(n):
        b.add(r.randint(0, spread), [b.seg(r.randint(*prompt))], r.randint(*out))
    b.requests.sort(key=lambda q: (q["arrival_step"], q["id"]))
    for i, q in enumerate(b.requests):
        q["id"] = i
    return {"name": name, "category": category, "config": cfg, "requests": b.requests}


def _staggered(name, seed, n, prompt, out, gap, cfg) -> dict:
    """Arrivals every `gap` steps on average, with pauses long enough to leave idle steps."""
    b = _Builder(seed)
    r = b.rng
    step = 0
    for i in range(n):
        b.add(step, [b.seg(r.randint(*prompt))], r.randint(*out))
        step += r.randint(0, 2 * gap)
        if i % 7 == 6:
            step += 60  # a pause: everything finishes, the scheduler idles
    return {"name": name, "category": "staggered", "config": cfg, "requests": b.requests}


def _few_shot(name, seed, tasks, per_task, system, shots, question, out, spread, cfg) -> dict:
    """Each request = a system prompt shared by all + its task's examples + its own question."""
    b = _Builder(seed)
    r = b.rng
    sys_seg = b.seg(system) if system else None
    task_segs = [b.seg(r.randint(*shots)) for _ in range(tasks)]
    reqs = []
    for t in range(tasks):
        for _ in range(per_task):
            reqs.append((r.randint(0, spread), t))
    reqs.sort()
    for arrival, t in reqs:
        prompt = ([sys_seg] if sys_seg else []) + [task_segs[t], b.seg(r.randint(*question))]
        b.add(arrival, prompt, r.randint(*out))
    return {"name": name, "category": "few_shot", "config": cfg, "requests": b.requests}


def _multi_turn(name, seed, convs, turns, system, first, question, out, spread, delay, cfg) -> dict:
    """Conversations: turn k's prompt = turn k-1's prompt + its output + a new question; it
    arrives `delay` steps after turn k-1 is reported finished."""
    b = _Builder(seed)
    r = b.rng
    sys_seg = b.seg(system) if system else None
    for _ in range(convs):
        prompt = ([sys_seg] if sys_seg else []) + [b.seg(r.randint(*first))]
        req = b.add(r.randint(0, spread), prompt, r.randint(*out))
        for _ in range(turns - 1):
            prompt = req["prompt"] + req["output"] + [b.seg(r.randint(*question))]
            req = b.add(None, prompt, r.randint(*out), after=[req["id"], r.randint(*delay)])
    return {"name": name, "category": "multi_turn", "config": cfg, "requests": b.requests}


def _long(name, seed, n, prompt, out, spread, cfg, shared=0) -> dict:
    b = _Builder(seed)
    r = b.rng
    common = b.seg(shared) if shared else None
    for _ in range(n):
        length = r.randint(*prompt)
        p = [common, b.seg(length - shared)] if common else [b.seg(length)]
        b.add(r.randint(0, spread), p, r.randint(*out))
    b.requests.sort(key=lambda q: (q["arrival_step"], q["id"]))
    for i, q in enumerate(b.requests):
        q["id"] = i
    return {"name": name, "category": "long_prompt", "config": cfg, "requests": b.requests}


def _repeats(name, seed, lengths, repeats, out, spread, cfg) -> dict:
    """The same prompts sent again and again (retries, parallel samples): a prompt of whole blocks
    is found cached only up to its last block (one token must be computed), so each repeat computes
    that block again, a copy of a cached one."""
    b = _Builder(seed)
    r = b.rng
    prompts = [b.seg(length) for length in lengths]
    reqs = sorted((r.randint(0, spread), i) for i in range(len(prompts)) for _ in range(repeats))
    for arrival, i in reqs:
        b.add(arrival, [prompts[i]], r.randint(*out))
    return {"name": name, "category": "copies", "config": cfg, "requests": b.requests}


def _build() -> list[dict]:
    w: list[dict] = []
    # random lengths, enough memory (no preemption)
    w.append(_random("random-1", 101, 24, (16, 400), (8, 120), 30, _config(num_gpu_blocks=1200), "random"))
    w.append(
        _random(
            "random-2",
            102,
            30,
            (1, 600),
            (1, 200),
            60,
            _config(num_gpu_blocks=2000, max_num_batched_tokens=1024),
            "random",
        )
    )
    w.append(
        _random("random-3", 103, 20, (50, 900), (20, 150), 10, _config(block_size=32, num_gpu_blocks=800), "random")
    )
    w.append(
        _random(
            "random-4",
            104,
            30,
            (8, 300),
            (8, 100),
            40,
            _config(block_size=8, num_gpu_blocks=2500, enable_prefix_caching=False),
            "random",
        )
    )
    w.append(
        _random(
            "random-5",
            105,
            16,
            (100, 1500),
            (10, 60),
            5,
            _config(num_gpu_blocks=1600, max_num_batched_tokens=2048),
            "random",
        )
    )
    # tight memory: preemptions
    w.append(_random("tight-1", 201, 20, (30, 300), (60, 250), 10, _config(num_gpu_blocks=60), "tight"))
    w.append(
        _random(
            "tight-2",
            202,
            24,
            (10, 200),
            (100, 300),
            5,
            _config(num_gpu_blocks=50, max_num_batched_tokens=256),
            "tight",
        )
    )
    w.append(
        _random(
            "tight-3",
            203,
            16,
            (100, 500),
            (50, 200),
            0,
            _config(num_gpu_blocks=70, enable_prefix_caching=False),
            "tight",
        )
    )
    w.append(_random("tight-4", 204, 20, (20, 400), (80, 200), 20, _config(block_size=8, num_gpu_blocks=120), "tight"))
    w.append(
        _random(
            "tight-5",
            205,
            18,
            (200, 700),
            (30, 120),
            15,
            _config(num_gpu_blocks=80, max_num_batched_tokens=1024),
            "tight",
        )
    )
    w.append(
        _random(
            "tight-6",
            206,
            24,
            (16, 160),
            (150, 400),
            0,
            _config(block_size=32, num_gpu_blocks=30, max_num_seqs=16),
            "tight",
        )
    )
    # staggered arrivals, with idle gaps
    w.append(_staggered("staggered-1", 301, 21, (20, 300), (10, 60), 4, _config(num_gpu_blocks=600)))
    w.append(
        _staggered(
            "staggered-2", 302, 28, (5, 500), (5, 80), 2, _config(num_gpu_blocks=400, max_num_batched_tokens=256)
        )
    )
    w.append(_staggered("staggered-3", 303, 14, (100, 900), (20, 50), 8, _config(num_gpu_blocks=300)))
    w.append(_staggered("staggered-4", 304, 21, (10, 200), (30, 120), 3, _config(num_gpu_blocks=80)))
    # few-shot: many prompts sharing a long prefix (prefix caching on)
    w.append(_few_shot("few-shot-1", 401, 1, 24, 0, (700, 700), (10, 60), (5, 40), 40, _config(num_gpu_blocks=600)))
    w.append(_few_shot("few-shot-2", 402, 4, 8, 200, (300, 800), (20, 100), (10, 60), 50, _config(num_gpu_blocks=800)))
    w.append(_few_shot("few-shot-3", 403, 3, 10, 96, (500, 1200), (10, 50), (10, 80), 20, _config(num_gpu_blocks=220)))
    w.append(
        _few_shot(
            "few-shot-4",
            404,
            2,
            12,
            0,
            (1000, 1500),
            (5, 30),
            (5, 30),
            0,
            _config(num_gpu_blocks=500, max_num_batched_tokens=2048),
        )
    )
    w.append(
        _few_shot(
            "few-shot-5", 405, 6, 5, 160, (200, 400), (8, 40), (20, 100), 30, _config(block_size=8, num_gpu_blocks=500)
        )
    )
    # multi-turn: a later turn = earlier prompt + its output + a new question
    w.append(
        _multi_turn(
            "multi-turn-1", 501, 6, 4, 100, (50, 200), (10, 60), (10, 60), 20, (1, 5), _config(num_gpu_blocks=800)
        )
    )
    w.append(
        _multi_turn(
            "multi-turn-2", 502, 8, 3, 0, (100, 400), (20, 80), (20, 100), 30, (2, 8), _config(num_gpu_blocks=250)
        )
    )
    w.append(
        _multi_turn(
            "multi-turn-3",
            503,
            5,
            5,
            300,
            (20, 100),
            (10, 40),
            (5, 40),
            10,
            (1, 3),
            _config(num_gpu_blocks=1000, max_model_len=4096),
        )
    )
    w.append(
        _multi_turn(
            "multi-turn-4",
            504,
            10,
            3,
            64,
            (30, 150),
            (10, 50),
            (30, 120),
            40,
            (1, 6),
            _config(block_size=8, num_gpu_blocks=300),
        )
    )
    w.append(
        _multi_turn(
            "multi-turn-5",
            505,
            6,
            4,
            0,
            (200, 500),
            (20, 60),
            (10, 50),
            5,
            (3, 10),
            _config(num_gpu_blocks=400, max_num_batched_tokens=256, max_model_len=4096),
        )
    )
    # long prompts, budget 2048, memory pressure (the full-prompt admission check matters)
    long_cfg = dict(max_num_batched_tokens=2048, max_model_len=10000)
    w.append(_long("long-1", 601, 6, (3000, 9000), (10, 60), 20, _config(num_gpu_blocks=1200, **long_cfg)))
    w.append(_long("long-2", 602, 8, (3000, 6000), (20, 100), 10, _config(num_gpu_blocks=800, **long_cfg)))
    w.append(_long("long-3", 603, 6, (4000, 9000), (5, 40), 0, _config(num_gpu_blocks=700, **long_cfg)))
    w.append(
        _long(
            "long-4",
            604,
            8,
            (3000, 8000),
            (20, 80),
            30,
            _config(num_gpu_blocks=1000, enable_prefix_caching=False, **long_cfg),
        )
    )
    w.append(_long("long-5", 605, 8, (3000, 7000), (10, 50), 15, _config(num_gpu_blocks=900, **long_cfg), shared=2000))
    w.append(
        _long("long-6", 606, 10, (3000, 5000), (50, 200), 5, _config(num_gpu_blocks=600, max_num_seqs=64, **long_cfg))
    )
    # max_num_seqs binding
    w.append(
        _random("seqs-1", 701, 30, (8, 100), (10, 80), 10, _config(num_gpu_blocks=600, max_num_seqs=4), "max_num_seqs")
    )
    w.append(
        _random(
            "seqs-2",
            702,
            40,
            (1, 60),
            (1, 40),
            20,
            _config(num_gpu_blocks=400, max_num_seqs=8, max_num_batched_tokens=64),
            "max_num_seqs",
        )
    )
    w.append(
        _random("seqs-3", 703, 20, (50, 300), (20, 100), 0, _config(num_gpu_blocks=500, max_num_seqs=2), "max_num_seqs")
    )
    w.append(
        _random("seqs-4", 704, 30, (10, 200), (30, 90), 5, _config(num_gpu_blocks=150, max_num_seqs=6), "max_num_seqs")
    )
    # token budget binding
    w.append(
        _random(
            "budget-1",
            801,
            20,
            (50, 400),
            (10, 60),
            10,
            _config(num_gpu_blocks=600, max_num_seqs=16, max_num_batched_tokens=32),
            "token_budget",
        )
    )
    w.append(
        _random(
            "budget-2",
            802,
            24,
            (100, 600),
            (5, 40),
            20,
            _config(num_gpu_blocks=800, max_num_batched_tokens=128),
            "token_budget",
        )
    )
    w.append(
        _random(
            "budget-3",
            803,
            16,
            (200, 800),
            (20, 80),
            0,
            _config(num_gpu_blocks=120, max_num_seqs=8, max_num_batched_tokens=100),
            "token_budget",
        )
    )
    w.append(
        _random(
            "budget-4",
            804,
            20,
            (16, 300),
            (10, 50),
            5,
            _config(block_size=8, num_gpu_blocks=900, max_num_seqs=64, max_num_batched_tokens=64),
            "token_budget",
        )
    )
    # prefix caching off on sharing workloads, and on with preemptions refinding their blocks
    w.append(
        _few_shot(
            "pc-off-few-shot",
            901,
            2,
            12,
            100,
            (400, 800),
            (10, 50),
            (10, 60),
            30,
            _config(num_gpu_blocks=300, enable_prefix_caching=False),
        )
    )
    w[-1]["category"] = "prefix_caching"
    w.append(
        _multi_turn(
            "pc-off-multi-turn",
            902,
            6,
            3,
            0,
            (100, 300),
            (10, 50),
            (20, 80),
            20,
            (1, 5),
            _config(num_gpu_blocks=250, enable_prefix_caching=False),
        )
    )
    w[-1]["category"] = "prefix_caching"
    w.append(_few_shot("pc-on-tight", 903, 2, 10, 64, (300, 500), (10, 40), (60, 200), 5, _config(num_gpu_blocks=90)))
    w[-1]["category"] = "prefix_caching"
    w.append(
        _random(
            "pc-on-tight-random",
            904,
            20,
            (100, 500),
            (50, 200),
            0,
            _config(block_size=8, num_gpu_blocks=200),
            "prefix_caching",
        )
    )
    # repeated prompts of whole blocks: blocks computed again are copies of cached ones
    w.append(_repeats("copies-1", 1001, [320], 12, (20, 100), 40, _config(num_gpu_blocks=120)))
    w.append(_repeats("copies-2", 1002, [256, 480, 512], 6, (10, 80), 60, _config(num_gpu_blocks=100)))
    w.append(_repeats("copies-3", 1003, [200, 96], 8, (30, 120), 20, _config(block_size=8, num_gpu_blocks=150)))
    w.append(
        _repeats("copies-4", 1004, [640, 128], 6, (5, 60), 30, _config(num_gpu_blocks=90, max_num_batched_tokens=256))
    )
    for wl in w:
        _check(wl)
    return w


def _check(wl: dict) -> None:
    cfg = wl["config"]
    assert cfg["max_num_batched_tokens"] >= cfg["max_num_seqs"], wl["name"]
    usable = cfg["num_gpu_blocks"] - 1  # vLLM's null block
    for q in wl["requests"]:
        n = total(q["prompt"]) + total(q["output"])
        assert n <= cfg["max_model_len"], (wl["name"], q["id"], n)
        if "spec" in wl:  # its last step's slots: its drafts and the lookahead past its last token
            n = min(n + 2 * wl["spec"]["spec_tokens"], cfg["max_model_len"])
        assert -(-n // cfg["block_size"]) <= usable, (wl["name"], q["id"], "never fits")
        assert (q["arrival_step"] is None) == ("after" in q), (wl["name"], q["id"])


WORKLOADS: list[dict] = _build()


def accepted_drafts(u: float, acceptance: list[float], drafts: int) -> int:
    """Drafts accepted of `drafts` verified, from one uniform draw `u` in [0, 1): position j is
    accepted while u < the product of the first j + 1 rates (each position's rate given the ones
    before it were accepted). The rule kvweb's `SpecV1Scheduler` draws with; the recording keeps
    the counts, so the replay does not depend on the order of the draws."""
    p, accepted = 1.0, 0
    for rate in acceptance[:drafts]:
        p *= rate
        accepted += u < p
    return accepted


def _one(seed: int, prompt: int, out: int, cfg: dict) -> dict:
    b = _Builder(seed)
    b.add(0, [b.seg(prompt)], out)
    return {"name": "", "category": "", "config": cfg, "requests": b.requests}


def _spec(wl: dict, name: str, method: str, k: int, acceptance: list[float], seed: int) -> dict:
    assert method in ("eagle", "ngram", "draft_model") and 1 <= k <= 4 and len(acceptance) == k
    spec = {"method": method, "spec_tokens": k, "acceptance": acceptance, "seed": seed}
    return {**wl, "name": name, "category": "spec", "spec": spec}


def _build_spec() -> list[dict]:
    """k in 1-4, one rate or one per position, EAGLE, n-gram and a draft model, prefix caching on and off, memory
    that preempts, budgets that cut drafts, prompts that fill max_model_len."""
    c = _config
    w = [
        _spec(_random("", 2001, 24, (20, 300), (20, 150), 30, c(), ""), "spec-k1", "eagle", 1, [0.7], 11),
        _spec(
            _random("", 2002, 24, (20, 300), (20, 150), 30, c(enable_prefix_caching=False), ""),
            "spec-k2-off",
            "eagle",
            2,
            [0.5, 0.5],
            12,
        ),
        _spec(
            _random("", 2003, 24, (20, 300), (20, 150), 30, c(block_size=8), ""), "spec-k3", "eagle", 3, [0.6] * 3, 13
        ),
        _spec(
            _random("", 2004, 24, (20, 300), (20, 150), 30, c(block_size=32), ""),
            "spec-k4-per-position",
            "eagle",
            4,
            [0.9, 0.7, 0.5, 0.3],
            14,
        ),
        _spec(
            _random("", 2005, 30, (50, 400), (50, 200), 10, c(num_gpu_blocks=120, enable_prefix_caching=False), ""),
            "spec-tight-1",
            "eagle",
            3,
            [0.6] * 3,
            15,
        ),
        _spec(
            _random("", 2006, 30, (50, 300), (50, 200), 10, c(block_size=8, num_gpu_blocks=200), ""),
            "spec-tight-2",
            "eagle",
            2,
            [0.8, 0.6],
            16,
        ),
        _spec(
            _random("", 2007, 20, (2, 20), (60, 150), 3, c(max_num_seqs=16, max_num_batched_tokens=30), ""),
            "spec-budget-1",
            "eagle",
            3,
            [0.7] * 3,
            17,
        ),
        _spec(
            _random("", 2008, 20, (2, 30), (60, 150), 3, c(max_num_seqs=12, max_num_batched_tokens=42), ""),
            "spec-budget-2",
            "eagle",
            4,
            [0.95, 0.8, 0.6, 0.4],
            18,
        ),
        _spec(
            _few_shot("", 2009, 3, 8, 100, (200, 400), (10, 50), (20, 80), 20, c(num_gpu_blocks=400)),
            "spec-few-shot",
            "eagle",
            3,
            [0.6] * 3,
            19,
        ),
        _spec(
            _multi_turn("", 2010, 5, 3, 60, (50, 200), (10, 40), (20, 60), 10, (1, 5), c(num_gpu_blocks=300)),
            "spec-multi-turn",
            "eagle",
            2,
            [0.7, 0.5],
            20,
        ),
        _spec(
            _few_shot("", 2015, 3, 8, 100, (200, 400), (10, 50), (20, 80), 20, c(num_gpu_blocks=400)),
            "spec-draft-model-few-shot",
            "draft_model",
            3,
            [0.6] * 3,
            25,
        ),
        _spec(
            _random("", 2016, 30, (50, 300), (50, 200), 10, c(block_size=8, num_gpu_blocks=200), ""),
            "spec-draft-model-tight",
            "draft_model",
            2,
            [0.8, 0.6],
            26,
        ),
        _spec(_random("", 2011, 24, (20, 300), (20, 150), 30, c(), ""), "spec-ngram-k3", "ngram", 3, [0.6] * 3, 21),
        _spec(
            _random("", 2012, 30, (50, 300), (50, 200), 10, c(block_size=8, num_gpu_blocks=180), ""),
            "spec-ngram-tight",
            "ngram",
            2,
            [0.7, 0.7],
            22,
        ),
        _spec(
            _few_shot("", 2013, 3, 8, 100, (200, 400), (10, 50), (20, 80), 20, c(num_gpu_blocks=400)),
            "spec-ngram-few-shot",
            "ngram",
            4,
            [0.8, 0.6, 0.5, 0.4],
            23,
        ),
        _spec(
            _random("", 2014, 16, (20, 200), (20, 100), 20, c(max_num_batched_tokens=64), ""),
            "spec-all-accepted",
            "eagle",
            3,
            [1.0] * 3,
            24,
        ),
        _spec(
            _random("", 2015, 16, (20, 200), (20, 100), 20, c(max_num_batched_tokens=64), ""),
            "spec-none-accepted",
            "eagle",
            2,
            [0.0] * 2,
            25,
        ),
        _spec(
            _random("", 2016, 16, (150, 200), (20, 56), 20, c(max_model_len=256, num_gpu_blocks=150), ""),
            "spec-model-len",
            "eagle",
            4,
            [0.8] * 4,
            26,
        ),
        _spec(
            _staggered("", 2017, 20, (20, 200), (20, 80), 4, c(max_num_batched_tokens=128)),
            "spec-staggered",
            "eagle",
            2,
            [0.6] * 2,
            27,
        ),
        # a shared prefix of whole blocks (system 128 + examples 64): with EAGLE each block's hash also
        # covers the token after it, so the prefix's last block is found only by a prompt that
        # goes on alike
        _spec(
            _few_shot("", 2020, 2, 8, 128, (64, 64), (10, 40), (20, 60), 20, c(num_gpu_blocks=400)),
            "spec-aligned-prefix",
            "eagle",
            3,
            [0.6] * 3,
            30,
        ),
        _spec(
            _few_shot("", 2021, 2, 8, 128, (64, 64), (10, 40), (20, 60), 20, c(num_gpu_blocks=400)),
            "spec-ngram-aligned-prefix",
            "ngram",
            3,
            [0.6] * 3,
            31,
        ),
        # one request (prompt 30, output 40): tests/test_spec_decoding.py checks its first 10 steps by hand
        _spec(_one(2022, 30, 40, c()), "spec-one-request", "eagle", 3, [0.6] * 3, 0),
        # prompts one token past whole blocks, sent again: the hit leaves one token, padded to 1 + k
        _spec(
            _repeats("", 2018, [161, 97], 8, (20, 80), 40, c(max_num_batched_tokens=128)),
            "spec-padded",
            "eagle",
            3,
            [0.6] * 3,
            28,
        ),
        _spec(
            _repeats("", 2019, [129, 65, 33], 6, (20, 80), 40, c(max_num_batched_tokens=64)),
            "spec-ngram-padded",
            "ngram",
            2,
            [0.7, 0.5],
            29,
        ),
    ]
    for wl in w:
        _check(wl)
    return w


SPEC_WORKLOADS: list[dict] = _build_spec()


PLACEHOLDER = 9_000  # an image's placeholder segment is [PLACEHOLDER + length, length] (lengths below 1_000)


def _lora(wl: dict, name: str, max_loras: int, adapters: int, seed: int, base: float = 0.0) -> dict:
    """The workload with each request for one of `adapters` LoRA adapters (1..adapters), adapter i
    drawn with weight 1 / i (a few adapters get most requests), or the base model with probability
    `base`; a later chat turn keeps its conversation's adapter."""
    r = random.Random(seed)
    weights = [1 / i for i in range(1, adapters + 1)]
    requests, adapter = [], {}
    for q in wl["requests"]:
        a = (
            adapter[q["after"][0]]
            if "after" in q
            else 0
            if r.random() < base
            else r.choices(range(1, adapters + 1), weights)[0]
        )
        adapter[q["id"]] = a
        requests.append({**q, "adapter": a})
    config = {**wl["config"], "max_loras": max_loras}
    return {**wl, "name": name, "category": "lora", "config": config, "requests": requests}


def _shared_prefix_two_adapters(seed: int, cfg: dict) -> dict:
    """Few-shot requests with one long shared prefix, half under adapter 1, half under adapter 2:
    each adapter finds only its own copy of the prefix."""
    wl = _few_shot("", seed, 1, 24, 0, (320, 320), (10, 40), (10, 40), 30, cfg)
    for q in wl["requests"]:
        q["adapter"] = 1 + q["id"] % 2
    return {**wl, "name": "lora-shared-prefix", "category": "lora", "config": {**cfg, "max_loras": 2}}


def _build_lora() -> list[dict]:
    """max_loras 1, 2 and 4 over several adapters (skips: a request waits in place while the ones
    behind it run), base-model requests beside them, a prefix shared under two adapters, tight
    memory (preempted requests take their adapter's place again), chat turns keeping their adapter."""
    c = _config
    w = [
        _lora(_random("", 3001, 24, (20, 300), (20, 120), 20, c(), ""), "lora-max1", 1, 4, 41),
        _lora(_random("", 3002, 30, (20, 300), (20, 120), 20, c(), ""), "lora-max2", 2, 6, 42),
        _lora(_random("", 3003, 30, (20, 300), (20, 120), 20, c(block_size=8), ""), "lora-max4", 4, 8, 43, 0.25),
        _shared_prefix_two_adapters(3004, c(num_gpu_blocks=400)),
        _lora(_random("", 3005, 24, (50, 300), (60, 200), 5, c(num_gpu_blocks=70), ""), "lora-tight", 2, 5, 45, 0.2),
        _lora(
            _random("", 3006, 30, (10, 120), (10, 80), 10, c(max_num_seqs=4, max_num_batched_tokens=64), ""),
            "lora-seqs",
            1,
            3,
            46,
            0.3,
        ),
        _lora(
            _multi_turn("", 3007, 6, 3, 64, (50, 200), (10, 40), (20, 60), 10, (1, 4), c(num_gpu_blocks=300)),
            "lora-multi-turn",
            2,
            4,
            47,
        ),
    ]
    for wl in w:
        _check(wl)
    return w


def _mm(
    name: str,
    seed: int,
    n: int,
    system: int,
    images: int,
    lengths: tuple[int, ...],
    pool: int,
    question: tuple[int, int],
    out: tuple[int, int],
    spread: int,
    cfg: dict,
    encoder_budget: int,
    encoder_cache: int,
    between: int = 8,
    text_only: float = 0.0,
) -> dict:
    """n requests: a shared system prompt (`system` tokens, none if 0), then `images` images, each
    drawn from a pool of `pool` (image h has length lengths[h % len(lengths)]) and followed by
    `between` tokens of text, the same in every request, then the request's own question. Images
    drawn twice hit the encoder cache (and, after the same text, the prefix cache; with no text
    between, a prefix hit stops inside the image's last block, which the encoder must compute again
    if its embeddings were evicted). A request has no image with probability `text_only`."""
    b = _Builder(seed)
    r = b.rng
    sys_seg = b.seg(system) if system else None
    text = b.seg(between) if between else None
    arrivals = sorted(r.randint(0, spread) for _ in range(n))
    for arrival in arrivals:
        prompt, placed, at = ([sys_seg] if sys_seg else []), [], system
        for _ in range(0 if r.random() < text_only else images):
            h = r.randint(1, pool)
            length = lengths[h % len(lengths)]
            placed.append([at, length, h])
            prompt += [[PLACEHOLDER + length, length]] + ([text] if text else [])
            at += length + between
        b.add(arrival, prompt + [b.seg(r.randint(*question))], r.randint(*out))["images"] = placed
    config = {**cfg, "encoder_budget": encoder_budget, "encoder_cache": encoder_cache}
    return {"name": name, "category": "images", "config": config, "requests": b.requests}


def _build_mm() -> list[dict]:
    """Images hitting the encoder cache again and again, an encoder budget that cuts chunks before an
    image, a cache small enough to evict, images behind a shared system prompt with prefix caching
    (a hit may stop inside an image), chunked prefill through an image, memory that preempts, and
    prefix caching off."""
    c = _config
    w = [
        _mm("mm-repeat", 4001, 24, 32, 1, (144,), 3, (10, 60), (10, 60), 30, c(), 512, 512),
        _mm("mm-budget-cut", 4002, 20, 0, 2, (200, 160), 12, (10, 40), (10, 40), 10, c(), 256, 1024),
        _mm("mm-evict", 4003, 24, 16, 1, (150, 200, 90), 9, (10, 40), (10, 60), 40, c(), 512, 300, between=0),
        _mm("mm-prefix", 4004, 24, 64, 1, (160,), 2, (10, 40), (10, 60), 30, c(num_gpu_blocks=400), 512, 512),
        _mm(
            "mm-chunked",
            4005,
            12,
            100,
            1,
            (400, 300),
            6,
            (50, 200),
            (10, 40),
            20,
            c(max_num_batched_tokens=128),
            400,
            800,
        ),
        _mm("mm-tight", 4006, 20, 32, 2, (96, 128), 6, (20, 100), (60, 200), 5, c(num_gpu_blocks=90), 512, 512),
        # a prefix hit stops inside an image whose embeddings were evicted (the cache holds two of three):
        # when the step's encoder budget cannot compute it again the request computes nothing, and the
        # requests behind it are still tried
        _mm("mm-prefix-inside", 4007, 30, 48, 1, (250,), 3, (10, 40), (20, 80), 12, c(), 300, 500, between=0),
        # requests with an image and without: when the step's encoder budget is spent, a request whose
        # first chunk starts at its image computes nothing and the text-only requests behind it still
        # join the batch
        _mm("mm-skip", 4009, 24, 0, 1, (200,), 20, (10, 40), (20, 60), 6, c(), 256, 1024, text_only=0.5),
        _mm(
            "mm-caching-off",
            4008,
            20,
            32,
            2,
            (144, 96),
            4,
            (10, 40),
            (10, 60),
            20,
            c(enable_prefix_caching=False, max_num_batched_tokens=256),
            256,
            400,
        ),
    ]
    for wl in w:
        _check(wl)
        cfg = wl["config"]
        largest = max(length for q in wl["requests"] for _, length, _ in q["images"])
        # vLLM raises both to the largest item (`compute_mm_encoder_budget`); set directly, they must hold it
        assert min(cfg["encoder_budget"], cfg["encoder_cache"]) >= largest, wl["name"]
    return w


LORA_WORKLOADS: list[dict] = _build_lora()
MM_WORKLOADS: list[dict] = _build_mm()


if __name__ == "__main__":
    from collections import Counter

    print(len(WORKLOADS), "workloads;", dict(Counter(w["category"] for w in WORKLOADS)), len(SPEC_WORKLOADS), "spec")
    print(len(LORA_WORKLOADS), "with LoRA adapters;", len(MM_WORKLOADS), "with images")
    for wl in WORKLOADS + SPEC_WORKLOADS + LORA_WORKLOADS + MM_WORKLOADS:
        p = [total(q["prompt"]) for q in wl["requests"]]
        o = [total(q["output"]) for q in wl["requests"]]
        print(f"{wl['name']:20} {len(p):3} reqs, prompt {min(p)}-{max(p)}, output {min(o)}-{max(o)}, {wl['config']}")
