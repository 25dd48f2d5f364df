"""The work estimate before every run (kvweb/budget.py): hand-counted units, the refusal, --budget.

The unit costs themselves are measured by bench/caps.py --budget (docs/input.md), not here.
"""

import io
import math
from unittest import mock

import pytest

import kvweb.labs  # noqa: F401
from kvweb.budget import (
    ADVANCES,
    BUDGET_S,
    CACHE_BLOCKS,
    CONTEXT_READS,
    DECODE_STEPS,
    ENGINE_BLOCKS,
    ENGINE_REQUESTS,
    FIXED,
    MB,
    FLEET_REQUESTS,
    GROUP_PAGES,
    GROUP_STEPS,
    HASHED_PEEKS,
    HASHES,
    MAP_CELLS,
    MAP_SCANS,
    MODEL_CALLS,
    MODEL_PAIRS,
    PAGED_SETUP,
    PEEKS,
    POOL_BLOCKS,
    POOL_SLOTS,
    PROBED_BLOCKS,
    SLOT_SETUP,
    SLOT_STEPS,
    STEP_TOKENS,
    V1_POOL_SETUP,
    Estimate,
    Unit,
    refusal,
    refused,
    work,
)
from kvweb.cli import main
from kvweb.lab import LABS, ParamError
from kvweb.parsing import make
from kvweb.query import from_query
from kvweb.labs.engine import frames_at_most
from kvweb.labs.max_rate import SEARCH_DOUBLINGS
from kvweb.serving.load.workload import with_adapters

# Scenario B's fixed-length workload: 4096 + 4095 tokens a request, blocks of one token (issue 25: 63 s)
HUGE_ENGINE = {
    "scenario": "B",
    "workload": "fixed",
    "prompt_len": "4096",
    "output_len": "4095",
    "requests": "5000",
    "rate": "1000",
    "block_size": "1",
}


def huge_engine():
    return LABS["engine"](
        scenario="B", workload="fixed", prompt_len=4096, output_len=4095, requests=5000, rate=1000.0, block_size=1
    )


def units(estimate: Estimate) -> dict[Unit, float]:
    return {unit: n for n, unit in estimate.parts}


@pytest.mark.parametrize("name", sorted(LABS))
def test_every_lab_estimates_its_defaults_well_within_the_budget(name):
    assert LABS[name]().estimate().seconds <= BUDGET_S / 2


def test_parts_of_one_unit_are_added_up():
    a = Unit("a", 0.5)
    estimate = work((2, a), (3, FIXED), (4, a), lower=("x",))
    assert estimate.parts == ((6, a), (3, FIXED)) and estimate.seconds == 6.0


def test_frames_of_a_traced_run():
    # one frame every horizon / 50 s: 50 s of horizon, 1 s apart; 80 fit before the first thinning
    assert frames_at_most(50.0, 30.0) == 31
    assert frames_at_most(50.0, 80.0) == 81
    # 4x as long: two doublings of the interval, 40 new frames after each
    assert frames_at_most(50.0, 320.0) == 80 + 2 * 40 + 1
    assert frames_at_most(50.0, 321.0) == 80 + 3 * 40 + 1


def test_engine_counts_requests_and_blocks_of_each_manager():
    lab = LABS["engine"](
        workload="fixed", prompt_len=100, output_len=28, requests=10, block_size=16, memory="paged", compare="max"
    )
    got = units(lab.estimate())
    assert got[ENGINE_REQUESTS] == 20  # 10 requests, twice
    assert got[ENGINE_BLOCKS] == 10 * 128 / 16 + 10 * 128 / 16  # paged: blocks of 16; reserved: about 16 tokens each
    blocks = lab.setup().cost_model().kv_capacity_blocks(16)
    assert got[MAP_CELLS] % 1 == 0 and got[MAP_CELLS] > blocks  # a paged map's cells are blocks, more than one frame


def test_sweep_runs_every_block_size():
    lab = LABS["sweep"](workload="fixed", prompt_len=100, output_len=28, requests=10)
    got = units(lab.estimate())
    assert got[ENGINE_REQUESTS] == 9 * 10
    assert got[ENGINE_BLOCKS] == pytest.approx(10 * 128 * sum(1 / b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)))


def test_max_rate_searches_every_manager():
    lab = LABS["max-rate"](workload="fixed", prompt_len=100, output_len=28, requests=10, rel_tol=0.02)
    runs = SEARCH_DOUBLINGS + 6  # bisecting a factor of 2 down to 2 %: log2(ln 2 / ln 1.02) = 5.1 steps
    assert units(lab.estimate())[ENGINE_REQUESTS] == 4 * runs * 10


def test_schedulers_count_three_modes_and_their_searches():
    base = dict(workload="fixed", prompt_len=100, output_len=28, requests=10, block_size=16)
    plain = units(LABS["schedulers"](**base).estimate())
    assert plain[ENGINE_REQUESTS] == 3 * 10
    assert plain[STEP_TOKENS] == 2 * 10 * 28  # vLLM V1 and SGLang decode step by step
    searched = units(LABS["schedulers"](**base, search=True).estimate())
    assert searched[ENGINE_REQUESTS] == 3 * 10 + 3 * (SEARCH_DOUBLINGS + 6) * 10


def test_schedulers_count_the_steps_adapter_slots_add():
    """10 requests of 100 + 28 tokens, all in one batch (scenario A's 11,969 tokens hold 93 of them).
    Two adapters, max_loras 1: each adapter's requests run together, in one output's 28 steps, one
    adapter after the other: 56 steps where memory allows 28, so 28 added to each run with adapters
    (vLLM V1's and SGLang's); max_loras 2: none."""
    base = dict(workload="fixed", prompt_len=100, output_len=28, requests=10, block_size=16, loras=2)
    lab = LABS["schedulers"](**base, max_loras=1)
    assert {r.adapter for r in with_adapters(lab.requests_at(lab.rate), 2, lab.seed)} == {1, 2}
    assert units(lab.estimate())[SLOT_STEPS] == 2 * (2 * 28 - 10 * 28 / 10)
    assert SLOT_STEPS not in units(LABS["schedulers"](**base, max_loras=2).estimate())
    assert SLOT_STEPS not in units(LABS["schedulers"](**{**base, "loras": 0}).estimate())


def test_the_fleet_counts_a_fleet_run_per_router_and_per_split_and_the_single_engine():
    # 10 fixed requests of 100 + 28 tokens on 4 replicas: all of them fit one replica's batch
    base = dict(workload="fixed", prompt_len=100, output_len=28, requests=10, block_size=16, replicas=4)
    two = units(LABS["fleet"](**base, routers="round-robin,cost").estimate())
    assert two[FLEET_REQUESTS] == 3 * 10  # two routers' fleets and the single engine
    assert two[ENGINE_BLOCKS] == 3 * 10 * 128 / 16
    assert two[DECODE_STEPS] == 3 * 28  # 10 at once: each output token a step for all of them
    assert two[ADVANCES] == 2 * 10 * 4 + 10  # every replica at each arrival; the single engine, one
    assert two[PROBED_BLOCKS] == 0  # requests without content: no prefix to probe
    # prefill replicas 2 of 4: the splits 1 + 3, 2 + 2, 3 + 1, a fleet run each (not two)
    split = units(LABS["fleet"](**base, routers="round-robin", prefill_replicas=2).estimate())
    assert split[FLEET_REQUESTS] == (1 + 3 + 1) * 10 and split[ADVANCES] == 4 * 10 * 4 + 10
    assert split[POOL_BLOCKS] == 0  # SGLang: no block hashes
    # vLLM V1 hashes every block into its pool; a split's decode side each prompt's again
    v1 = units(LABS["fleet"](**base, routers="round-robin", prefill_replicas=2, mode="vllm-v1").estimate())
    assert v1[POOL_BLOCKS] == 5 * 10 * 128 / 16 + 3 * 10 * 100 / 16
    # few-shot: every prompt's blocks probed on each replica (a split's router: its prefill pool's)
    shots = dict(workload="few-shot", requests=12, tasks=2, examples_len=64, question_len=16, block_size=16)
    lab = LABS["fleet"](**shots, replicas=3, routers="exact-prefix", prefill_replicas=1)
    prompts = sum(r.prompt for r in lab.requests_at(lab.rate))
    assert units(lab.estimate())[PROBED_BLOCKS] == pytest.approx(prompts / 16 * (3 + 1 + 2))


def test_every_replica_made_counts_its_pool_blocks():
    # Each replica's pool is set up block by block when it is made, whatever the requests (issue 39: 32
    # vLLM V1 replicas at block_size 1, five routers, took 30 s of CPU estimated at 17): per fleet run,
    # each replica's KV tokens / block_size; SGLang's token pools are arrays (not counted).
    base = dict(workload="fixed", prompt_len=100, output_len=28, requests=10, block_size=16, replicas=4)
    kv_tokens = LABS["fleet"](**base).setup().cost_model().kv_capacity_tokens
    v1 = units(LABS["fleet"](**base, routers="round-robin,cost", mode="vllm-v1").estimate())
    assert v1[V1_POOL_SETUP] == (2 * 4 + 1) * kv_tokens / 16  # two routers' fleets and the single engine
    paper = units(LABS["fleet"](**{**base, "block_size": 1}, routers="round-robin", mode="paper").estimate())
    assert paper[PAGED_SETUP] == (4 + 1) * kv_tokens and V1_POOL_SETUP not in paper
    sglang = units(LABS["fleet"](**base, routers="round-robin").estimate())  # token slots: arrays, memory only
    assert sglang[SLOT_SETUP] == (4 + 1) * kv_tokens and PAGED_SETUP not in sglang and V1_POOL_SETUP not in sglang


def test_vllm_v1_replicas_of_a_hybrid_model_count_each_decode_step_per_kv_cache_group():
    # gpt-oss-120b's sliding and full layers are 2 groups, gemma-3-27b's 7: every step slides each
    # group request by request (issue 39: 6.8 s of CPU estimated at 2.8 s); llama's steps run as arrays
    base = dict(
        workload="fixed",
        prompt_len=100,
        output_len=28,
        requests=10,
        replicas=2,
        routers="round-robin",
        mode="vllm-v1",
        gpu="H100-SXM",
        tp=4,
        weight_precision="fp8",
    )
    plain = units(LABS["fleet"](**base, model="llama-3.1-8b").estimate())
    assert plain[DECODE_STEPS] == 2 * 28 and GROUP_STEPS not in plain  # a fleet run and the single engine
    for model, groups in (("gpt-oss-120b", 2), ("gemma-3-27b", 7)):
        got = units(LABS["fleet"](**base, model=model).estimate())
        assert got[GROUP_STEPS] == 2 * 28 * groups and DECODE_STEPS not in got
    assert DECODE_STEPS in units(LABS["fleet"](**{**base, "mode": "sglang"}, model="gpt-oss-120b").estimate())


def test_the_plan_counts_a_fleet_run_per_candidate_the_roofline_leaves():
    # 70B at 16 bits: no room on one H100 (pruned), a fleet run each on 2 and 4 GPUs (1 and 3 replicas)
    lab = LABS["plan"](
        model="llama-3.1-70b",
        gpus="H100-SXM",
        tps="1,2,4",
        weight_precisions="16-bit",
        schedulers="sglang",
        replicas="1,3",
        workload="fixed",
        prompt_len=100,
        output_len=28,
        requests=10,
        rate=1.0,
    )
    got = units(lab.estimate())
    assert got[FLEET_REQUESTS] == 4 * 10 and got[ADVANCES] == 2 * (1 + 3) * 10


def test_mean_held_by_hand():
    from kvweb.labs.schedulers import mean_held

    assert mean_held(100, 50) == 25  # never full: half of what comes, on average
    assert mean_held(100, 400) == 100 * (1 - 100 / 800) == 87.5  # full a quarter of the way in
    assert mean_held(100, 0) == 0


def test_a_hybrid_models_maps_count_what_each_group_and_pool_holds():
    # gpt-oss-20b on scenario B: 10 requests of 100 + 28 tokens, 1,280 tokens in all. vLLM V1: 80 blocks of
    # 16, a page in each of 2 groups, 160 pages, far fewer than the pool's: 80 held on average, drawn twice
    # a frame, and the pool scanned twice. SGLang: 1,280 slots in each of its two pools (both larger than
    # DENSE_SLOTS: none scanned), 640 on average, drawn twice. Each mode: about 3 maps of 1,024 cells.
    from kvweb.serving.memory.hybrid_kv import kv_layout

    lab = LABS["schedulers"](
        scenario="B", model="gpt-oss-20b", workload="fixed", prompt_len=100, output_len=28, requests=10, block_size=16
    )
    got = units(lab.estimate())
    pages = kv_layout(lab.setup().cost_model(), 16).blocks(lab.setup().cost_model())
    frames = got[GROUP_PAGES] / (2 * 80)
    assert frames == int(frames) > 1 and pages == 76_762
    assert got[POOL_SLOTS] == frames * 2 * (640 + 640)
    assert got[MAP_SCANS] == frames * 2 * pages
    assert got[MAP_CELLS] == frames * 2 * 3 * 1024  # (the papers' engine refuses the model)
    # a model whose layers are all alike counts its maps in cells alone, as before
    plain = units(
        LABS["schedulers"](scenario="B", workload="fixed", prompt_len=100, output_len=28, requests=10).estimate()
    )
    assert GROUP_PAGES not in plain and POOL_SLOTS not in plain and MAP_SCANS not in plain


def test_cache_schedule_counts_insertions_and_lookups():
    # few-shot: 2 tasks x 3 requests of 10 + 20 + 5 prompt tokens and 4 output tokens; queue of 4
    lab = LABS["cache-schedule"](
        workload="few-shot",
        tasks=2,
        per_task=3,
        system_len=10,
        examples_len=20,
        question_len=5,
        output_len=4,
        queue=4,
        policy="lspf",
    )
    got = units(lab.estimate())
    assert got[CACHE_BLOCKS] == 3 * (6 * 35 + 6 * 4)  # fcfs, lspf and the offline depth-first order
    assert got[PEEKS] == 6 * 4  # lspf only: each of 6 steps looks up at most 4 waiting prompts


def test_prefix_hash_hashes_block_by_block():
    lab = LABS["prefix-hash"](
        workload="few-shot",
        tasks=2,
        per_task=3,
        system_len=10,
        examples_len=20,
        question_len=5,
        output_len=4,
        queue=4,
        block_size=16,
        capacity=2000,
    )
    got = units(lab.estimate())
    sweep = sum(1 / b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256))
    tokens, lookups = 6 * 39, 6 * 4
    assert got[PEEKS] == lookups * (3 + 2 * 9)  # the radix tree, both caches at 16, both at each sweep size
    assert got[HASHED_PEEKS] == lookups * (1 + 9)  # the hash table's: at 16 and at each sweep size
    assert got[HASHES] == pytest.approx((tokens + lookups * 35) * (1 / 16 + sweep))


def test_mini_model_labs_count_calls_and_attention():
    beam = units(LABS["beam-search"](width=2, prompt_len=4, steps=3).estimate())
    assert beam[MODEL_PAIRS] == 16 / 2 + 2 * 25 / 2 + 2 * 36 / 2  # naive: 1 beam, then 2, of 4 + t tokens
    assert beam[MODEL_CALLS] == 4 * 3 + 1 + 2 * 2  # 4 paged searches of 3 steps; the naive one's forwards
    assert units(LABS["fsm"](samples=2, max_len=10).estimate())[MODEL_CALLS] == 3 * 2 * 10
    radix = LABS["radix-demo"](system="ab", questions="c|d", follow_up="", max_new=3)
    assert units(radix.estimate()) == {CONTEXT_READS: 2 * 5 * 5 / 2, MODEL_CALLS: 2 * 3 * 2}  # 2 + 1 + 3 - 1 slots each


def test_an_over_budget_run_is_refused_with_one_line_naming_estimate_budget_and_parameters():
    with pytest.raises(ParamError) as refused:
        make("engine", HUGE_ENGINE)
    message = str(refused.value)
    seconds = huge_engine().estimate().seconds
    assert seconds > 60  # issue 25 measured 63 s
    assert message.startswith(
        f"requests, prompt_len, output_len, block_size: this run is estimated at {seconds:.0f} s of "
        "work (10,000 requests through the papers' engine, "
    )
    assert message.endswith(", over the budget of 20 s; lower requests/prompt_len/output_len or raise block_size")
    assert "memory-map cells drawn" in message and "\n" not in message


def test_the_refusal_reads_as_one_line():
    estimate = Estimate(((3_000_000, Unit("widgets", 1e-5)),), lower=("n",), higher=("size",))
    assert refusal(estimate, 20.0) == (
        "n, size: this run is estimated at 30 s of work (3,000,000 widgets), over the "
        "budget of 20 s; lower n or raise size"
    )


def test_a_url_over_budget_puts_back_what_it_names_first():
    lab, messages = from_query({"lab": "engine", **HUGE_ENGINE})
    lab.admit()
    assert len(messages) == 1 and messages[0].startswith("requests, prompt_len, output_len, block_size: this run is")
    reset = messages[0].rpartition("; using the defaults for ")[2].split(", ")
    assert reset[0] in ("requests", "prompt_len", "output_len", "block_size")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_cli_refuses_over_budget_and_budget_raises_it():
    args = ["run", "engine", *(f"--{k}={v}" for k, v in HUGE_ENGINE.items())]
    code, out, err = cli(*args)
    assert code == 2 and out == "" and "over the budget of 20 s" in err and err.count("\n") == 1
    with mock.patch.object(LABS["engine"], "run", lambda self, progress=None: {"stubbed": True}):
        assert cli(*args, "--budget", "1e6")[0] == 0
        code, out, err = cli(*args, "--budget=30")
    assert code == 2 and "over the budget of 30 s" in err


@pytest.mark.parametrize("value", ["0", "-5", "nan", "lots", "1e309"])
def test_cli_budget_must_be_positive_seconds(value):
    code, out, err = cli("run", "roofline", "--budget", value)
    assert (code, out) == (2, "") and err.startswith("kvweb: --budget: ")


def test_help_says_how_to_raise_the_budget():
    assert "--budget SECONDS" in cli("run", "--help")[1]
    assert "--budget SECONDS (default 20)" in cli("run", "engine", "--help")[1]


# scenario B's KV memory (449,936 tokens) in one-token blocks on 2 vLLM V1 replicas, 160 bytes a block: 137.3 MB
BIG_POOLS = [
    "--scenario=B",
    "--mode=vllm-v1",
    "--block_size=1",
    "--replicas=2",
    "--requests=5",
    "--routers=round-robin",
]


def test_cli_refuses_over_the_memory_budget_and_memory_budget_raises_it():
    with mock.patch.object(LABS["fleet"], "run", lambda self, progress=None: {"stubbed": True}):
        assert cli("run", "fleet", *BIG_POOLS)[0] == 0
        code, out, err = cli("run", "fleet", *BIG_POOLS, "--memory-budget", "100")
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "137 MB of memory (899,872 blocks set up in vLLM V1's replicas' pools), over the budget of 100 MB" in err
        assert cli("run", "fleet", *BIG_POOLS, "--memory-budget=138", "--budget", "30")[0] == 0


def test_a_memory_refusal_with_nothing_else_to_change_names_the_flag():
    held = Unit("held things", 0.0, bytes=MB)
    assert refused(work((1000, held)), BUDGET_S, 999) == (
        "memory: this run is estimated at 1,000 MB of memory (1,000 held things), over the budget of 999 MB; "
        "raise --memory-budget"
    )


@pytest.mark.parametrize("value", ["0", "-5", "nan", "lots", "1e309", ""])
def test_cli_memory_budget_must_be_positive_megabytes(value):
    code, out, err = cli("run", "roofline", "--memory-budget", value)
    assert (code, out) == (2, "") and err == (
        f"kvweb: --memory-budget: '{value}' is not allowed; expected megabytes (2**20 bytes), a number above 0\n"
    )


def test_help_says_how_to_raise_the_memory_budget():
    assert "[--memory-budget MB]" in cli("run", "--help")[1] and "[--memory-budget MB]" in cli("plan", "--help")[1]
    assert "--memory-budget MB (default 768)" in cli("run", "engine", "--help")[1]


def test_constant_estimates_are_the_seconds_themselves():
    estimate = LABS["roofline"]().estimate()
    assert estimate.parts == ((0.1, FIXED),) and math.isclose(estimate.seconds, 0.1)


def test_the_estimates_count_the_work_stop_43_found_hidden():
    """By hand: an SGLang fleet's host tier is slots made with each pool (2 replicas for the router,
    1 for the single engine: 3 x (pool + host tier)); the planner prices every candidate of its grid;
    a block-hash cache takes every block of its tokens from its pool."""
    from kvweb.labs.fleet import FleetLab
    from kvweb.labs.plan import PlanLab
    from kvweb.labs.prefix_hash import BLOCK_SWEEP

    def parts(lab) -> dict[str, float]:
        return {unit.name: n for n, unit in lab.estimate().parts}

    lab = FleetLab(mode="sglang", host_tier_gb=1.0, replicas=2, routers="round-robin")
    kv, host = lab.setup().cost_model().kv_capacity_tokens, lab.host_tokens()
    assert host > 0 and parts(lab)["token slots set up in SGLang's replicas' pools"] == 3 * (kv + host)
    assert (
        parts(FleetLab(mode="sglang", replicas=2, routers="round-robin"))[
            "token slots set up in SGLang's replicas' pools"
        ]
        == 3 * kv
    )
    plan = PlanLab()
    assert parts(plan)["plan candidates priced"] == len(plan.candidates())
    hashed = make("prefix-hash", {})
    tokens = hashed.prompt_tokens() + hashed.request_count() * hashed.output_len
    sizes = [hashed.block_size, *(b for b in BLOCK_SWEEP if b <= hashed.capacity)]  # the hash cache's runs
    assert parts(hashed)[POOL_BLOCKS.name] == pytest.approx(sum(tokens / b for b in sizes))
