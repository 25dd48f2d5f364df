"""Speculative decoding's memory side in vLLM V1 (kvweb/serving/schedulers/spec_decode.py, issue 38 part 1):
hand-computed steps of one request, the token budget shared by 1 + k tokens per decode, the
lookahead slots held and the rejected ones rolled back, invariants over random workloads, the
path at k = 0 against today's scheduler, TPOT against acceptance, and the lab's refusals."""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.lab import ParamError
from kvweb.labs.fleet import FleetLab
from kvweb.labs.schedulers import SchedulersLab
from kvweb.serving.loop.continuous_batching import AHEAD
from kvweb.serving.loop.metrics import SLO, summarize
from kvweb.gpu.cost import CostModel
from kvweb.serving.schedulers.spec_decode import (
    Drafts,
    SpecV1Scheduler,
    parse_acceptance,
    verify_work,
)
from kvweb.serving.loop.step_cost import decode_coefficients
from kvweb.serving.schedulers.drafters import drafter_blocks, make_drafter
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler
from kvweb.serving.load.workload import Request, poisson_workload
from test_schedulers import BASE, cost_with

PARITY = Path(__file__).parent / "data" / "parity" / "vllm-0.33.0.json.gz"


def spec_cost(tokens: int) -> CostModel:
    """`cost_with(tokens)` with room for the drafter's weights too: `tokens` of KV for L + 1 layers
    once the drafter's layer is loaded."""
    cost = cost_with(tokens)
    return replace(
        cost, mem_util=cost.mem_util + make_drafter("eagle", cost.model).weight_bytes(cost) / cost.gpu.hbm_bytes
    )


def spec(k: int, rate: float, tokens: int = 4096, seed: int = 0, **config) -> SpecV1Scheduler:
    config = {"max_len": 512, "prefix_caching": False, **config}
    return SpecV1Scheduler(spec_cost(tokens), V1Config(**config), Drafts(k, (rate,) * k, seed))


def steps_of(scheduler: SpecV1Scheduler, requests: list[Request]) -> list[dict[int, tuple[int, int]]]:
    """After each step: request id -> (KV tokens kept, blocks held), for the running requests."""
    seen: list[dict[int, tuple[int, int]]] = []
    scheduler.run(
        requests,
        observer=lambda s, step: seen.append({i: (q.kv(s.dstep), len(q.blocks)) for i, q in s.running.items()}),
    )
    return seen


def test_all_accepted_keeps_k_plus_one_tokens_a_step_with_blocks_for_the_lookahead():
    """Prompt 30, output 12, k = 2, every draft accepted, blocks of 16: the prefill step samples
    token 1 (KV 30, 2 blocks: slots for 30 + 2 lookahead); each step then verifies 3 tokens
    and holds slots for KV + 3 + 2 (lookahead): 35, 38, 41 -> 3 blocks; it keeps 3 tokens (KV 33,
    36, 39), and the fifth step's 2 finish the 12."""
    s = spec(2, 1.0)
    assert steps_of(s, [Request(0, 0.0, 30, 12)]) == [{0: (30, 2)}, {0: (33, 3)}, {0: (36, 3)}, {0: (39, 3)}, {}]
    assert (s.verifies, s.drafted, s.accepted, s.kept) == (4, 8, 8, 11)  # kept: 3 + 3 + 3 + 2 (the last one capped)
    assert s.figures(1.0)["tokens_per_step"] == 11 / 4


def test_none_accepted_keeps_one_token_a_step_and_the_rejected_slots_roll_back():
    """Prompt 14, output 6, k = 2, nothing accepted: admitted with slots for 14 + 2 (1 block), each
    step then holds slots for KV + 1 + 2 + 2 and
    keeps one token (num_computed_tokens rolled back by the 2 rejected): KV 15, 16, 17, 18, 19
    after steps 2-6. The second block, taken for the lookahead at step 2 (14 + 5 = 19 > 16), holds
    no KV until step 4 (KV 17): blocks held wholly ahead 1, 1, 0, 0, 0; it stays with the request
    (vLLM frees blocks only when a request leaves), and no third block is ever needed (18 + 5 = 23)."""
    s = spec(2, 0.0)
    seen = steps_of(s, [Request(0, 0.0, 14, 6)])
    assert seen == [{0: (14, 1)}, {0: (15, 2)}, {0: (16, 2)}, {0: (17, 2)}, {0: (18, 2)}, {}]
    assert (s.verifies, s.drafted, s.accepted, s.kept) == (5, 10, 0, 5)
    ahead = [held - -(-kv // 16) for row in seen for kv, held in row.values()]
    assert ahead == [0, 1, 1, 0, 0]


def test_one_request_at_k3_and_06_over_ten_steps_by_hand():
    """Issue 38's hand check: prompt 30, output 40, blocks of 16, k = 3 (EAGLE: 3 lookahead slots),
    every position accepted at 0.6 given the ones before: P(at least 1, 2, 3 accepted) = 0.6,
    0.36, 0.216. Seed 0's draws, one a verify step: 0.8444, 0.7580, 0.4206, 0.2589, 0.5113,
    0.4049, 0.7838, 0.3033, 0.4766 -> accepted (u below how many of 0.6, 0.36, 0.216)
    0, 0, 1, 2, 1, 1, 0, 2, 1.
    Step 1 (prefill): KV 30, slots for 30 + 3 lookahead = 33 -> 3 blocks (48 slots).
    Each verify step from KV v: 4 tokens (the sampled one + 3 drafts) at v..v+3, slots for
    v + 4 + 3 -> ceil((v + 7) / 16) blocks; keeps 1 + accepted (KV v + 1 + a); the 3 - a rejected
    drafts' slots are freed back (num_computed_tokens rolled back; written again next step) and
    their blocks stay with the request:
      step  v   slots  blocks  a  rejected  KV after  slots held past the KV
       2    30   37      3     0     3        31        48 - 31 = 17
       3    31   38      3     0     3        32        16
       4    32   39      3     1     2        34        14
       5    34   41      3     2     1        37        11
       6    37   44      3     1     2        39         9
       7    39   46      3     1     2        41         7
       8    41   48      3     0     3        42         6
       9    42   49      4     2     1        45        64 - 45 = 19 (a fourth block for slot 49)
      10    45   52      4     1     2        47        17
    vLLM's own scheduler, recorded on the same request with the same draws (`spec-one-request` in
    the parity recording), allocates the same blocks and keeps the same tokens."""
    draws = random.Random(0)
    assert [round(draws.random(), 4) for _ in range(9)] == [
        0.8444,
        0.758,
        0.4206,
        0.2589,
        0.5113,
        0.4049,
        0.7838,
        0.3033,
        0.4766,
    ]
    accepted = [0, 0, 1, 2, 1, 1, 0, 2, 1]
    kv = [30, 31, 32, 34, 37, 39, 41, 42, 45, 47]
    blocks = [3, 3, 3, 3, 3, 3, 3, 3, 4, 4]
    s = spec(3, 0.6)
    seen = steps_of(s, [Request(0, 0.0, 30, 40)])[:10]
    assert seen == [{0: (v, b)} for v, b in zip(kv, blocks)]
    assert [16 * b - v for v, b in zip(kv, blocks)] == [18, 17, 16, 14, 11, 9, 7, 6, 19, 17]
    assert [after - before - 1 for before, after in zip(kv, kv[1:])] == accepted
    recorded = json.loads(gzip.decompress(PARITY.read_bytes()))
    (vllm,) = [w for w in recorded["spec_workloads"] if w["name"] == "spec-one-request"]
    assert vllm["spec"] == {"method": "eagle", "spec_tokens": 3, "acceptance": [0.6] * 3, "seed": 0}
    steps = vllm["runs"]["default"][:10]
    assert [step["tokens"]["0"] for step in steps] == [30] + [4] * 9
    assert [step["blocks"]["0"] for step in steps] == blocks
    assert [step["accepted"]["0"] for step in steps[1:]] == accepted


def test_eagle_hashes_each_block_with_the_token_after_it():
    """With EAGLE and prefix caching vLLM hashes each block with the next token too: B shares A's
    first 32 tokens (two blocks of 16) and then differs, so B finds one block (16 tokens), the
    second's hash covering token 32, where they differ; without lookahead slots (n-gram) or
    drafts, both blocks (32). A router's look-up (`cached_prefix`) reads the cache the same way."""
    shared = np.arange(1, 33)
    a = np.concatenate([shared, np.arange(100, 115)])  # prompt 42 + output 5
    b = np.concatenate([shared, np.arange(200, 215)])
    requests = [Request(0, 0.0, 42, 5, tokens=a), Request(1, 10.0, 42, 5, tokens=b)]
    eagle = spec(2, 0.5, prefix_caching=True)
    eagle.run(requests)
    ngram = spec(2, 0.5, prefix_caching=True)
    ngram.lookahead = 0
    ngram.run(requests)
    plain = V1Scheduler(cost_with(4096), V1Config(512, prefix_caching=True))
    plain.run(requests)
    assert (eagle.hit_tokens, ngram.hit_tokens, plain.hit_tokens) == (16, 32, 32)
    c = np.concatenate([shared, np.arange(300, 310)])  # a third prompt, for a router's look-up
    assert (eagle.cached_prefix(c), plain.cached_prefix(c), eagle.cached_prefix(b[:34])) == (16, 32, 32)


def test_the_map_shows_blocks_held_ahead():
    """After step 2 of the case above the request holds block 1 with KV 15 of 16 and block 2 ahead."""
    s = spec(2, 0.0, tokens=64)
    maps = []
    s.run([Request(0, 0.0, 14, 6)], observer=lambda q, step: maps.append(q.memory_map(step, 100)))
    cell_tokens, owner, written = maps[1]
    assert cell_tokens == 16 and sorted(owner[:2]) == sorted([0, AHEAD])
    assert sorted(written[:2]) == [0, 94]  # 15 / 16 of a block, and none


def test_each_decode_takes_one_plus_k_tokens_of_the_budget():
    """Three one-token prompts, k = 2, a budget of 5 (max_seqs 3): step 1 prefills all three; at
    step 2 the first takes 3 tokens, the second the 2 left (one draft), the third none (vLLM
    schedules running requests in order while budget is left): it keeps its KV, and waits while
    the two before it take the budget."""
    s = spec(2, 1.0, max_seqs=3, token_budget=5)
    seen = steps_of(s, [Request(i, 0.0, 1, 10) for i in range(3)])
    assert seen[0] == {0: (1, 1), 1: (1, 1), 2: (1, 1)}
    assert {i: kv for i, (kv, _) in seen[1].items()} == {0: 4, 1: 3, 2: 1}
    assert {i: kv for i, (kv, _) in seen[2].items()} == {0: 7, 1: 5, 2: 1}


def test_a_one_token_admission_beside_decodes_is_padded_to_a_decode():
    """A decodes (prompt 4); B (prompt 1) arrives after its prefill. B has one token to compute
    while a decode runs: vLLM pads it to 1 + k = 3 tokens (placeholder drafts, rejected), slots for
    3 + 2 lookahead (1 block), and it keeps 1 (KV 1). Under a budget of 5, A's 3 leave 2 < 3: B is
    not admitted unpadded but waits, here until A has finished."""
    requests = [Request(0, 0.0, 4, 10), Request(1, 1e-9, 1, 4)]
    roomy = spec(2, 0.0, max_seqs=2, token_budget=8)
    seen = steps_of(roomy, requests)
    assert seen[:2] == [{0: (4, 1)}, {0: (5, 1), 1: (1, 1)}]
    a, b = roomy.result().sequences
    assert a.first_token_t < b.first_token_t < a.finish_t
    tight = spec(2, 0.0, max_seqs=2, token_budget=5)
    a, b = tight.run(requests).sequences
    assert b.first_token_t > a.finish_t


def test_the_verify_step_prices_k_plus_one_tokens_a_request():
    """One token verified is the decode's own price; 3 tokens after 100 of KV: the per-token work
    thrice, attention over 101 + 102 + 103 tokens, the KV (103 tokens) read once."""
    coef = decode_coefficients(BASE)
    f0, fb, fc, b0, bb, bc = coef
    flops, nbytes = BASE.decode_work(1, 101)
    assert verify_work(coef, 1, 100) == pytest.approx((flops - f0, nbytes - b0), rel=1e-12)
    assert verify_work(coef, 3, 100) == pytest.approx((3 * fb + 306 * fc, 3 * bb + 103 * bc), rel=1e-12)


def test_the_drafters_layer_takes_its_share_of_every_block():
    """EAGLE's one layer beside OPT-13B's 40 on an A100-40GB: 9,805,015,040 bytes free, less the
    layer's weights (attention 4 x 5120^2 + MLP 3 x 5120 x 13,653 = 314,567,680 parameters,
    629,135,360 bytes; the embedding and LM head are the target's) leaves 9,175,879,680; 819,200 a
    token for 40 layers, 839,680 for 41: 10,927 tokens (682 blocks of 16) instead of 11,969 (748);
    the scheduler keeps one of them out of use (vLLM's null block)."""
    eagle = make_drafter("eagle", BASE.model)
    assert eagle.weight_bytes(BASE) == 629_135_360 and eagle.kv_bytes_per_token(BASE) == 20_480
    assert (drafter_blocks(BASE, 16, eagle), drafter_blocks(BASE, 16, None), BASE.kv_capacity_blocks(16)) == (
        682,
        748,
        748,
    )
    s = SpecV1Scheduler(BASE, V1Config(2048), Drafts(3, (0.5,) * 3))
    assert (s.pool.n_blocks, s.capacity, s.figures(1.0)["kv_blocks"]) == (681, 681 * 16, 682)
    assert V1Scheduler(BASE, V1Config(2048)).pool.n_blocks == 747


def test_acceptance_parses_one_rate_or_one_per_position():
    assert parse_acceptance("0.7", 3) == (0.7, 0.7, 0.7)
    assert parse_acceptance("0.9,0.8,0.5", 3) == (0.9, 0.8, 0.5)
    for bad in ("1.2", "0.9,0.8", "high", "0.5,-0.1,0.2"):
        with pytest.raises(ValueError, match=f"acceptance: '{bad}' is not allowed; give one rate in"):
            parse_acceptance(bad, 3)


def test_k_zero_through_the_spec_path_is_todays_scheduler():
    """With no drafts (and no drafter's layer) the spec path (every step through `_iterate`, each
    request priced alone) runs as
    today's scheduler: the same steps, preemptions and tokens, and the same times to the last bits
    (a step's work is summed in another order). All requests arrive at once: no decision waits on
    the clock."""
    requests = [replace(r, arrival=0.0) for r in poisson_workload("uniform", 40, 5.0, 512, 3, 300, 80)]
    config = V1Config(512, 16, 16, 64, prefix_caching=False)
    today = V1Scheduler(cost_with(1200), config).run(requests)
    path = SpecV1Scheduler(cost_with(1200), config, Drafts(0, (), drafter="")).run(requests)
    assert today.preemptions > 0  # the small pool preempts
    for name in ("steps", "batch_sum", "preemptions", "recomputed_tokens", "generated", "max_batch", "capacity"):
        assert getattr(path, name) == getattr(today, name), name
    assert path.sim_time == pytest.approx(today.sim_time, rel=1e-9)
    assert [q.id for q in path.sequences] == [q.id for q in today.sequences]
    times = [t for q in path.sequences for t in (q.first_token_t, q.finish_t)]
    assert times == pytest.approx([t for q in today.sequences for t in (q.first_token_t, q.finish_t)], rel=1e-9)


rows = st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(1, 200), st.integers(1, 60)), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(
    rows=rows,
    k=st.integers(1, 4),
    rate=st.floats(0.0, 1.0),
    tokens=st.integers(300, 900),
    budget=st.integers(0, 40),
    caching=st.booleans(),
    seed=st.integers(0, 3),
)
def test_invariants(rows, k, rate, tokens, budget, caching, seed):
    """Blocks held never exceed the pool; a scheduled request keeps 1 to k + 1 tokens a step (none
    when the budget ran out before it); every request gets all its tokens."""
    requests = [Request(i, t, p, o) for i, (t, p, o) in enumerate(sorted(rows))]
    s = spec(k, rate, tokens, seed, max_seqs=8, token_budget=8 + budget, prefix_caching=caching)
    before: dict[int, int] = {}

    def check(q: SpecV1Scheduler, step: int) -> None:
        held = sum(len(x.blocks) for x in (*q.running.values(), *q.prefilling))
        assert held <= q.pool.n_blocks - len(q.pool.free) <= q.pool.n_blocks
        for i, x in q.running.items():
            if i in before:
                assert 0 <= x.kv(q.dstep) - before[i] <= k + 1
        before.clear()
        before.update((i, x.kv(q.dstep)) for i, x in q.running.items())

    run = s.run(requests, observer=check)
    done = {q.id: q for q in run.sequences}
    assert len(done) + len(run.rejected) == len(requests)
    assert run.generated == sum(q.req.output for q in done.values())  # each token once
    assert s.kept <= s.verifies * (k + 1) and s.accepted <= s.drafted <= s.verifies * k


def test_tpot_falls_as_acceptance_rises():
    """At k = 3 on the same requests, more accepted drafts: more tokens a step, a lower TPOT."""
    requests = poisson_workload("uniform", 60, 4.0, 512, 1, 300, 120)
    tpot, per_step = [], []
    for rate in (0.0, 0.4, 0.7, 0.95):
        s = spec(3, rate, 20000, max_seqs=32, token_budget=2048)
        run = s.run(requests)
        tpot.append(summarize(run, SLO())["tpot_s"]["p50"])
        per_step.append(s.figures(run.sim_time)["tokens_per_step"])
    assert per_step == sorted(per_step) and per_step[0] == 1.0 and per_step[-1] > 3.0
    assert tpot == sorted(tpot, reverse=True) and tpot[-1] < tpot[0] / 2


def test_the_lab_runs_vllm_v1_and_sglang_with_drafts_and_refuses_the_papers_engine_with_one_line():
    lab = SchedulersLab(requests=40, spec_tokens=3, acceptance="0.7")
    result = lab.run()
    assert result["refused"] == {
        "paper": "paper: speculative decoding (spec_tokens > 0) is simulated in vllm-v1 and sglang only"
    }
    v1, sglang = result["modes"]  # (SGLang's: tests/test_radix_spec.py)
    assert (v1["mode"], sglang["mode"]) == ("vllm-v1", "sglang")
    assert v1["spec"]["spec_tokens"] == 3 and 1.0 < v1["spec"]["tokens_per_step"] < 4.0
    off = SchedulersLab(requests=40).run()
    plain = next(m for m in off["modes"] if m["mode"] == "vllm-v1")
    assert "spec" not in plain and v1["tpot_s"]["p50"] < plain["tpot_s"]["p50"]


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"spec_tokens": 2, "acceptance": "0.9,2"},
            "acceptance: '0.9,2' is not allowed; give one rate in [0, 1] or 2 rates",
        ),
        ({"spec_tokens": 2, "async_scheduling": True}, "spec_tokens: 2 is not allowed with async_scheduling true"),
        (
            {"spec_tokens": 2, "model": "gpt-oss-20b"},
            "spec_tokens: 2 is not allowed with model gpt-oss-20b; its layers mix",
        ),
    ],
)
def test_the_lab_refuses_what_it_does_not_simulate(params, message):
    with pytest.raises(ParamError, match=message.replace("[", r"\[").replace("]", r"\]")):
        SchedulersLab(**params).check()


def test_a_fleet_of_the_papers_engine_refuses_drafts():
    with pytest.raises(ParamError, match="spec_tokens: 2 is not allowed with mode paper; speculative decoding"):
        FleetLab(mode="paper", spec_tokens=2).check()


def test_the_drafters_passes_in_a_step_by_hand():
    """One request (prompt 100, output 2), k = 3, nothing accepted, on the paper GPU (A100-40GB
    roofline: 312 TFLOP/s x 0.7, 1.555 TB/s x 0.8 = 1.244e12 B/s, 0.5 ms a step). Its verify step
    (KV 100, 4 tokens, keeps 1) is followed by the drafter's 3 passes, each reading the head's
    weights (one layer, 314,567,680 parameters, and the shared embedding and LM head, 2 x 50,272 x
    5120: 1,658,705,920 bytes at 16 bits) and its layer's KV (20,480 bytes a token), each a forward
    with its own 0.5 ms:
    - first, over the 4 verified tokens after 100: 1,658,705,920 + 20,480 x 104 = 1,660,835,840
      bytes (its 3,039,723,520 FLOPs: 13.9 us, under the bytes' 1.335 ms);
    - then one token at contexts 102 and 103 (KV 101 kept, each draft one further): 1,660,794,880
      and 1,660,815,360 bytes;
    4,982,446,080 bytes / 1.244e12 = 4.005182 ms + 3 x 0.5 ms = 5.505182 ms in the step."""
    s = spec(3, 0.0)
    drafted = []
    s.run([Request(0, 0.0, 100, 2)], observer=lambda q, step: drafted.append(q.draft_s))
    by_hand = (1_660_835_840 + 1_660_794_880 + 1_660_815_360) / (1.555e12 * 0.8) + 3 * 0.5e-3
    assert drafted[1] - drafted[0] == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(5.505182e-3, abs=1e-9)
    flops = 2 * 314_567_680 * 4 + 2 * 5120 * 50_272 + 4 * 40 * 128 * (4 * 100 + 10)
    assert flops / (312e12 * 0.7) < 1_660_835_840 / (1.555e12 * 0.8)  # the first pass is memory-bound


def test_the_sweep_is_each_draft_lengths_own_run_and_names_the_lowest_tpot():
    """spec_sweep: each point is the lab's run at that k (a list of rates: its first k), the k with
    the lowest TPOT p50 is named, and the estimate counts the shorter lengths' runs too."""
    values = dict(workload="sharegpt", requests=60, rate=20.0, spec_tokens=3, acceptance="0.6,0.4,0.2")
    sweeps = SchedulersLab(**values, spec_sweep=True).run()["spec_sweep"]
    assert list(sweeps) == ["vllm-v1", "sglang"]  # each speculative mode
    runs = [
        SchedulersLab(**{**values, "spec_tokens": k, "acceptance": acceptance}).run()["modes"]
        for k, acceptance in enumerate(("0.6", "0.6", "0.6,0.4", "0.6,0.4,0.2"))
    ]
    for mode, swept in sweeps.items():
        assert [p["k"] for p in swept["points"]] == [0, 1, 2, 3] and swept["acceptance"] == [0.6, 0.4, 0.2]
        for point, modes in zip(swept["points"], runs):
            (alone,) = [m for m in modes if m["mode"] == mode]  # k = 0: every mode runs
            assert point["tpot_p50_s"] == alone["tpot_s"]["p50"]
            assert point["throughput_tok_s"] == alone["throughput_tok_s"]
        assert swept["best_k"] == min(swept["points"], key=lambda p: p["tpot_p50_s"])["k"]
    assert SchedulersLab(**values, spec_sweep=True).estimate().seconds > SchedulersLab(**values).estimate().seconds
    with pytest.raises(ParamError, match="^spec_sweep: true is not allowed with spec_tokens 0; "):
        SchedulersLab(spec_sweep=True).check()
    assert "spec_sweep" in FleetLab.dropped  # the fleet lab has no sweep
