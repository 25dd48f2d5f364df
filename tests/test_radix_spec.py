"""SGLang's speculative decoding (kvweb/serving/schedulers/radix_spec.py, issue 38 item 1): one
request's steps by hand against the vLLM case's draws, the drafter's layer in the pool, the decode
check's 2k + 1 slots a request and the retraction from the back, invariants over random workloads,
and the lab running both engines with drafts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.labs.fleet import FleetLab
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.radix_cache import RadixCache
from kvweb.serving.load.workload import Request
from kvweb.serving.schedulers.drafters import make_drafter
from kvweb.serving.schedulers.radix_scheduler import RadixConfig, RadixScheduler
from kvweb.serving.schedulers.radix_spec import RadixSpecScheduler, spec_pool_slots
from kvweb.serving.schedulers.spec_decode import Drafts
from test_schedulers import cost_with


def radix_spec(k: int, rate: float, slots: int = 4096, seed: int = 0, **config) -> RadixSpecScheduler:
    """SGLang with k drafts at `rate` on a pool of exactly `slots` token slots."""
    config = {"max_len": 512, "radix_cache": False, **config}
    return RadixSpecScheduler(cost_with(slots), RadixCache(slots), RadixConfig(**config), Drafts(k, (rate,) * k, seed))


def steps_of(s: RadixSpecScheduler, requests: list[Request]) -> list[tuple]:
    """After each step: (request id -> KV tokens, the step's (draft, verify, rejected) slots, slots held)."""
    seen: list[tuple] = []
    s.run(
        requests,
        observer=lambda s, step: seen.append(
            ({i: q.kv(s.dstep) for i, q in s.running.items()}, s.step_slots if s.decoded else None, s.occupied)
        ),
    )
    return seen


def test_one_request_at_k3_and_06_over_ten_steps_by_hand():
    """Issue 38's hand check, the vLLM case's request and draws (tests/test_spec_decoding.py): prompt
    30, output 40, k = 3 at 0.6 a position, seed 0 -> accepted 0, 0, 1, 2, 1, 1, 0, 2, 1.
    Step 1 (prefill): 30 slots, the first token sampled (its KV is written by the next step).
    Each decode step from KV v: 3 slots for the drafts, handed back once drafted; 4 to verify (the
    last token and 3 drafts: v + 4 held at the peak); keeps 1 + a, frees the 3 - a rejected at once:
      step  v   draft  verify  a  freed  KV after = held
       2    30    3      4     0    3       31
       3    31    3      4     0    3       32
       4    32    3      4     1    2       34
       5    34    3      4     2    1       37
       6    37    3      4     1    2       39
       7    39    3      4     1    2       41
       8    41    3      4     0    3       42
       9    42    3      4     2    1       45
      10    45    3      4     1    2       47
    The KV is vLLM's, step by step; vLLM holds 3 blocks (48 slots) then 4 (64) the while: its
    rejected drafts' slots and lookahead stay with the request, SGLang's are free after each step."""
    s = radix_spec(3, 0.6)
    seen = steps_of(s, [Request(0, 0.0, 30, 40)])[:10]
    kv = [31, 32, 34, 37, 39, 41, 42, 45, 47]
    freed = [3, 3, 2, 1, 2, 2, 3, 1, 2]
    assert seen == [({0: 30}, None, 30)] + [({0: v}, (3, 4, f), v) for v, f in zip(kv, freed)]
    # over the whole request (40 tokens: 1 from the prefill, 39 over the verify steps)
    assert s.kept == 39 and s.verifies == s.draft_slots // 3 == s.verify_slots // 4
    assert s.verify_slots - s.rejected_slots == s.kept


def test_the_drafter_layer_leaves_fewer_slots():
    """cost_with(4096): 4096.5 tokens of 819,200 B (40 layers) free beside the target's weights.
    EAGLE's head is one layer more: a token takes 819,200 x 41 / 40 = 839,680 B, and the head's
    weights (W) come out first: (3,355,852,800 - W) // 839,680 = 3,247 slots (W = 629,135,360 B,
    one layer of d = 5120, the embedding and LM head the target's); a drafter priced as free (no
    weights, no layers) leaves the 4,096."""
    cost = cost_with(4096)
    assert cost.kv_bytes_free_per_gpu == 3_355_852_800
    assert make_drafter("eagle", cost.model).weight_bytes(cost) == 629_135_360
    assert (3_355_852_800 - 629_135_360) // 839_680 == 3247
    assert spec_pool_slots(cost, Drafts(3, (0.7,) * 3)) == 3247
    assert spec_pool_slots(cost, Drafts(3, (0.7,) * 3, drafter="")) == 4096


def test_the_decode_check_wants_2k_plus_1_slots_a_request_and_retracts_from_the_back():
    """A pool of 100 slots, k = 2 (2 + 3 = 5 slots a request to decode), nothing accepted, outputs of
    12: prompts 24, 20 and 16 are admitted together (each needs prompt + 1 + output: 37 + 33 + 29 <
    100) and prefilled (60 held). Each decode step keeps one token a request (3 more held); the check
    wants 3 x 5 = 15 free: 40 - 3j >= 15 holds up to j = 8, so the tenth step (87 held, 13 free)
    retracts, from the back of the batch: request 2, whose 16 + 9 slots free, although without drafts
    SGLang would retract the longest prompt first (request 0; the three have generated alike)."""
    s = radix_spec(2, 0.0, slots=100)
    seen = steps_of(s, [Request(i, 0.0, p, 12) for i, p in enumerate((24, 20, 16))])
    assert [row[2] for row in seen[:10]] == [60 + 3 * j for j in range(10)]
    assert seen[9][0] == {0: 33, 1: 29, 2: 25}
    assert seen[10] == ({0: 34, 1: 30}, (4, 6, 4), 87 - 25 + 2)
    assert s.preemptions >= 1


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(1, 4),
    rate=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    seed=st.integers(0, 100),
    lengths=st.lists(st.tuples(st.integers(1, 120), st.integers(1, 60), st.floats(0, 2)), min_size=1, max_size=12),
)
def test_slots_never_exceed_the_pool_and_every_request_frees_all(k, rate, seed, lengths):
    """Random workloads on a small pool: the slots held, with a step's verify slots, never exceed the
    pool; every request finishes with all its tokens and leaves nothing held; with every draft
    accepted each verify keeps k + 1 tokens (fewer only at a request's end)."""
    s = radix_spec(k, rate, slots=400, seed=seed, max_seqs=8)
    reqs = [Request(i, t, p, o) for i, (p, o, t) in enumerate(sorted(lengths, key=lambda x: x[2]))]
    last: dict[int, int] = {}
    grew: list[tuple[int, int]] = []

    def observe(s: RadixSpecScheduler, step: int) -> None:
        assert s.pool.used + s.pending <= s.pool.size
        for i, q in s.running.items():
            if s.decoded and i in last:
                grew.append((q.kv(s.dstep) - last[i], q.req.output - q.generated(s.dstep)))
        last.clear()
        last.update({i: q.kv(s.dstep) for i, q in s.running.items()})

    run = s.run(reqs, observer=observe)
    assert s.peak <= s.pool.size
    assert sorted(q.id for q in run.sequences) == list(range(len(reqs)))
    assert s.pool.used == 0 and s.pending == 0 and not s.running
    if rate == 1.0:
        assert s.accepted == s.drafted
        assert all(g == k + 1 for g, left in grew if left > 0)  # still decoding after it: it kept k + 1


def test_at_spec_tokens_0_the_sglang_mode_is_todays():
    """Without drafts the lab builds today's RadixScheduler on the GPU's pool, with them EAGLE's
    worker on the pool the drafter's layer leaves."""
    lab = SchedulersLab(requests=40, rate=4.0)
    made = lab.scheduler("sglang")
    assert type(made) is RadixScheduler and made.pool.size == lab.setup().cost_model().kv_capacity_tokens
    spec = SchedulersLab(requests=40, rate=4.0, spec_tokens=3).scheduler("sglang")
    assert type(spec) is RadixSpecScheduler and spec.decode_slots == 7
    assert spec.pool.size == spec_pool_slots(lab.setup().cost_model(), Drafts(3, (0.8,) * 3)) < made.pool.size


def test_the_lab_runs_both_engines_with_drafts():
    """scenario A at k = 3, acceptance 0.7: vLLM V1 and SGLang both run with drafts (the papers'
    engine is not run); SGLang's rejected drafts are freed in their step: nothing held ahead."""
    out = SchedulersLab(spec_tokens=3, acceptance="0.7", requests=60).run()
    modes = {m["mode"]: m for m in out["modes"] if "spec" in m}
    assert set(modes) == {"vllm-v1", "sglang"}
    spec = modes["sglang"]["spec"]
    assert spec["ahead_frac"] == 0.0 and spec["verify_slots"] == 4 * spec["verifies"]
    assert spec["verify_slots"] - spec["rejected_slots"] == spec["kept"]


def test_a_fleet_of_sglang_replicas_runs_with_drafts():
    """The fleet lab shares the parameters: its SGLang replicas draft too, each step keeping 1 +
    accepted tokens, so every router's TPOT p50 falls below the fleet's without drafts."""
    on = FleetLab(mode="sglang", spec_tokens=3, acceptance="0.7", requests=60).run()
    off = FleetLab(mode="sglang", requests=60).run()
    assert [r["router"] for r in on["routers"]] == [r["router"] for r in off["routers"]]
    for with_drafts, without in zip(on["routers"], off["routers"]):
        assert with_drafts["tpot_s"]["p50"] < without["tpot_s"]["p50"]


def test_the_estimate_counts_sglangs_run_with_drafts():
    """With drafts the estimate counts vLLM V1's run and SGLang's (the papers' engine is not run): two
    runs' 300 requests, both runs' output tokens decoded step by step (as without drafts), and maps of
    748 blocks and 11,969 token slots a frame, against three runs and 748 + 748 + 11,969 cells a frame
    without drafts."""

    def parts(lab: SchedulersLab) -> dict[str, float]:
        return {unit.name: n for n, unit in lab.estimate().parts}

    drafts, none = parts(SchedulersLab(spec_tokens=3)), parts(SchedulersLab())
    assert (drafts["requests through the papers' engine"], none["requests through the papers' engine"]) == (600, 900)
    assert drafts["tokens decoded step by step"] == none["tokens decoded step by step"]  # vLLM V1's and SGLang's
    assert drafts["memory-map cells drawn"] * (748 + 748 + 11_969) == none["memory-map cells drawn"] * (748 + 11_969)
