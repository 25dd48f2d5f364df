"""Memory as part of the budget (kvweb/budget.py, issue 39): each estimate's peak memory, and its refusal.

The bytes a unit holds are measured by bench/estimates.py (docs/input.md), not here.
"""

import io
import sys

import pytest
from hypothesis import given, settings, strategies as st

import kvweb.labs  # noqa: F401
from kvweb.budget import (
    BUDGET_S,
    MB,
    MEMORY_MB,
    PAGED_SETUP,
    V1_POOL_SETUP,
    Estimate,
    Unit,
    in_turn,
    memory_refusal,
    refused,
    work,
)
from kvweb.cli import main
from kvweb.fleet.routers import ROUTERS
from kvweb.lab import LABS, ParamError
from kvweb.parsing import make
from kvweb.query import from_query

# Issue 39's fleet run: 32 vLLM V1 replicas with pools of one-token blocks, a fleet run per router (2.1 GB measured)
ISSUE_FLEET = {
    "scenario": "B",
    "workload": "multi-turn",
    "requests": "500",
    "rate": "1000",
    "replicas": "32",
    "block_size": "1",
    "mode": "vllm-v1",
    "routers": "round-robin,least-outstanding,cache-aware,exact-prefix,cost",
}
WIDGETS = Unit("widgets", 1e-6, bytes=1000)
GADGETS = Unit("gadgets", 1e-6, bytes=3 * MB)


def test_the_memory_refusal_reads_as_one_line():
    # 2,000,000 widgets of 1,000 bytes and 100 gadgets of 3 MB: 1,907.3 + 300 MB
    estimate = work((2_000_000, WIDGETS), (100, GADGETS), (5, Unit("seconds", 1.0)), lower=("n",), higher=("size",))
    assert estimate.bytes == 2_000_000_000 + 300 * MB
    assert memory_refusal(estimate, 768) == (
        "n, size: this run is estimated at 2,207 MB of memory (2,000,000 widgets, "
        "100 gadgets), over the budget of 768 MB; lower n or raise size"
    )


def test_time_is_refused_first_then_memory():
    estimate = work((2_000_000, WIDGETS), lower=("n",))  # 2 s, 1,907 MB
    assert "over the budget of 1 s" in refused(estimate, 1.0, 10_000) and refused(estimate, 1.0) == refused(
        estimate, 1.0, 0
    )
    assert refused(estimate, BUDGET_S).startswith("n: this run is estimated at 1,907 MB of memory")
    assert refused(estimate, BUDGET_S, 2000) is None


def test_runs_in_turn_add_their_work_but_hold_only_the_largest_runs_memory():
    small, large = [(10, WIDGETS), (1, GADGETS)], [(1000, WIDGETS), (2, GADGETS)]
    estimate = in_turn(small, large, small, lower=("n",))
    assert estimate.parts == ((1020, WIDGETS), (4, GADGETS)) and estimate.lower == ("n",)
    assert estimate.held == ((1000, WIDGETS), (2, GADGETS)) and estimate.bytes == 1000 * 1000 + 6 * MB
    assert work(*small, *large).bytes == 1010 * 1000 + 9 * MB  # one run holds all of it at once
    assert in_turn().bytes == 0 and in_turn().parts == ()


def test_a_lab_of_constant_work_holds_no_memory_it_counts():
    estimate = LABS["roofline"]().estimate()
    assert estimate.held == () and estimate.bytes == 0


@pytest.mark.parametrize("name", sorted(LABS))
def test_every_lab_estimates_its_defaults_well_within_the_memory_budget(name):
    assert LABS[name]().estimate().bytes <= MEMORY_MB * MB / 2


def test_a_fleet_holds_its_largest_fleet_runs_pools():
    # 4 vLLM V1 replicas, two routers: each router's fleet run sets up 4 pools, the single engine's run 1
    base = dict(workload="fixed", prompt_len=100, output_len=28, requests=10, block_size=16, replicas=4, mode="vllm-v1")
    lab = LABS["fleet"](**base, routers="round-robin,cost")
    pool = lab.setup().cost_model().kv_capacity_tokens / 16
    assert lab.estimate().held == ((4 * pool, V1_POOL_SETUP),) and lab.estimate().bytes == 4 * pool * 160
    paper = LABS["fleet"](**{**base, "mode": "paper"}, routers="round-robin").estimate()
    assert paper.held == ((4 * pool, PAGED_SETUP),)
    assert (
        LABS["fleet"](**base, routers="round-robin", prefill_replicas=2).estimate().held == lab.estimate().held
    )  # 2 + 2


def test_the_issues_fleet_run_is_refused_for_its_memory():
    # 32 replicas' pools of one-token blocks (about 430,000 each), 160 bytes a block: over 2 GB (2,136 MB
    # measured); refused at any time budget, by the one check every face makes (`Lab.admit`)
    with pytest.raises(ParamError) as refusal:
        make("fleet", ISSUE_FLEET, float("inf"))
    blocks = 32 * LABS["fleet"](scenario="B").setup().cost_model().kv_capacity_tokens
    assert str(refusal.value) == (
        f"requests, replicas, routers, turns, question_len, output_len, block_size, think_s: this run is estimated at "
        f"{blocks * 160 / MB:,.0f} MB of memory ({blocks:,} blocks set up in vLLM V1's replicas' pools), over the budget "
        "of 768 MB; lower requests/replicas/routers/turns/question_len/output_len or raise block_size/think_s"
    )
    assert blocks * 160 > 2**30


def test_the_cli_refuses_the_issues_fleet_run_whatever_the_time_budget():
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", "fleet", *(f"--{k}={v}" for k, v in ISSUE_FLEET.items()), "--budget", "1e6"], out, err)
    assert (code, out.getvalue()) == (2, "") and "MB of memory" in err.getvalue() and err.getvalue().count("\n") == 1


def test_a_url_over_the_memory_budget_puts_back_what_it_names_first():
    lab, messages = from_query({"lab": "fleet", **ISSUE_FLEET})
    lab.admit()
    assert len(messages) == 1 and "; using the defaults for " in messages[0]


@settings(max_examples=25, deadline=None)
@given(
    replicas=st.integers(1, 32),
    block_size=st.sampled_from([1, 4, 16]),
    mode=st.sampled_from(["paper", "vllm-v1"]),
    routers=st.lists(st.sampled_from(sorted(ROUTERS)), min_size=1, max_size=4, unique=True),
)
def test_a_fleets_memory_grows_with_its_replicas_not_its_routers(replicas, block_size, mode, routers):
    # routers run one after another, each fleet's pools let go before the next: more routers, more work,
    # the same memory; one more replica, one more pool held
    def estimate(**change) -> Estimate:
        values = dict(
            workload="fixed",
            prompt_len=100,
            output_len=28,
            requests=8,
            replicas=replicas,
            block_size=block_size,
            mode=mode,
            routers=",".join(routers),
        )
        return LABS["fleet"](**{**values, **change}).estimate()

    one, every = estimate(routers=routers[0]), estimate()
    assert every.bytes == one.bytes and every.seconds >= one.seconds
    if replicas < 32:
        more = estimate(replicas=replicas + 1)
        pool = dict((u, n) for n, u in one.held)
        unit = V1_POOL_SETUP if mode == "vllm-v1" else PAGED_SETUP
        assert more.bytes - one.bytes == pytest.approx(pool[unit] / replicas * unit.bytes)


@pytest.mark.skipif(sys.platform == "emscripten", reason="the app (Panel) is tested in CPython only")
def test_the_memory_refusal_is_translated():
    from app import i18n
    from app.i18n import tr_message

    line = (
        "replicas, block_size: this run is estimated at 2,096 MB of memory (13,657,216 blocks set up in vLLM V1's "
        "replicas' pools), over the budget of 768 MB; lower replicas or raise block_size"
    )
    i18n.use("zh")
    try:
        assert tr_message(line) == (
            "replicas, block_size：这次运行估计需要 2,096 MB 内存（13,657,216 vLLM V1 各副本 pool 中建"
            "立的块），超出了 768 MB 的内存预算；调低 replicas 或调高 block_size"
        )
    finally:
        i18n.use("en")
