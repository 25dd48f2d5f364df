"""Images in vLLM V1 (kvweb/serving/memory/encoder_cache.py, issue 38 item 3): the encoder cache's
hand-checked figure (an image of 576 embeddings computed once, hit once, evicted when unreferenced
and its room is needed, a chunk cut when the budget or the room is short), the encoder's time, the
scheduler's rule for waiting and running requests, block hashes keyed by image, the workload's
images, invariants over random workloads, and the lab's refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.lab import ParamError
from kvweb.labs.fleet import FleetLab
from kvweb.labs.schedulers import SchedulersLab
from kvweb.prefix.cache_workload import VOCAB
from kvweb.serving.load.workload import IMAGE_TOKEN, Image, Request, poisson_workload, with_images
from kvweb.serving.memory.encoder_cache import (
    VIT,
    EncoderCache,
    EncoderConfig,
    encoder_seconds,
    image_block_keys,
)
from kvweb.serving.schedulers.v1_scheduler import V1Config, V1Scheduler
from test_schedulers import cost_with

N = 576  # LLaVA-1.5's embeddings of one 336 x 336 image
X, Y = Image(0, N, 1), Image(100, N, 2)


def test_an_image_computed_once_and_hit_once_by_hand():
    """Request 1 computes image X (576 embeddings) in its first chunk: the step's budget of 2048
    has 1472 left, the cache of 1024 holds 576. Request 2 with the same image finds it: its budget
    stays 2048 and nothing is computed; the hit is counted once, however many chunks read it."""
    cache = EncoderCache(1024)
    computed: list[Image] = []
    assert cache.schedule(1, [X], 0, 640, 2048, computed, []) == (640, 1472) and computed == [X]
    cache.commit(1, computed, [])
    assert (cache.held, cache.free, cache.computed, cache.hits) == (576, 448, 576, 0)
    cache.passed(1, [X], 640)  # past its end: request 1 releases it, still cached (freeable)
    assert list(cache.freeable) == [1] and cache.held == 576
    again: list[Image] = []
    found: list[Image] = []
    assert cache.schedule(2, [X], 0, 300, 2048, again, found) == (300, 2048) and (again, found) == ([], [X])
    cache.commit(2, again, found)
    found = []
    assert cache.schedule(2, [X], 300, 300, 2048, again, found) == (300, 2048) and found == []  # no second hit
    assert (cache.hits, cache.computed, list(cache.freeable)) == (1, 576, [])


def test_room_is_made_by_evicting_the_oldest_unreferenced_image_and_a_chunk_is_cut_without_it():
    """Cache of 1024: X (576) held by request 2. Request 3's image Y (576, at token 100) needs 576
    slots; 448 are free and X is referenced: its chunk is cut at token 100. Once request 2 passes
    X, X is freeable: request 3's next chunk evicts it and Y takes its room."""
    cache = EncoderCache(1024)
    cache.schedule(2, [X], 0, 640, 2048, [], [])
    cache.allocate(X, 2)
    assert cache.schedule(3, [Y], 0, 640, 2048, [], []) == (100, 2048) and cache.cut == 1
    assert cache.schedule(3, [Y], 100, 640, 2048, [], []) == (0, 2048) and cache.cut == 2  # at its start: nothing
    cache.passed(2, [X], 640)
    computed: list[Image] = []
    assert cache.schedule(3, [Y], 100, 640, 2048, computed, []) == (640, 1472) and computed == [Y]
    cache.allocate(Y, 3)
    assert (cache.evicted, cache.held, 1 in cache.cached, 2 in cache.cached) == (1, 576, False, True)


def test_a_chunk_is_cut_when_the_budget_is_short():
    """An image of 576 with 500 of the step's encoder budget left: the chunk stops before it (at
    token 100), or schedules nothing if the request is already past its start (a prefix-cache hit
    ended inside the image)."""
    cache = EncoderCache(4096)
    assert cache.schedule(1, [Y], 0, 1000, 500, [], []) == (100, 500)
    assert cache.schedule(1, [Y], 200, 1000, 500, [], []) == (0, 500)
    assert cache.schedule(1, [Y], 0, 100, 500, [], []) == (100, 500)  # the chunk ends before it: not needed
    assert (cache.cut, cache.held) == (2, 0)


def test_the_encoders_time_by_hand():
    """The ViT: 32 layers of 4 x 1280² + 2 x 1280 x 5120 weights = 629,145,600. 576 tokens: 2 FLOPs
    a weight a token, 4 x 1280 x 32 x 576² for attention; bytes: the weights in bf16."""
    assert VIT.params == 32 * (4 * 1280**2 + 2 * 1280 * 5120) == 629_145_600
    flops, nbytes = VIT.work([N])
    assert flops == 2 * 629_145_600 * 576 + 4 * 1280 * 32 * 576**2 and nbytes == 2 * 629_145_600
    cost = cost_with(8192)
    expected = max(flops / (cost.peak_flops * cost.compute_eff), nbytes / (cost.gpu.hbm_bandwidth * cost.memory_eff))
    assert encoder_seconds(cost, [N]) == expected and encoder_seconds(cost, []) == 0.0
    assert VIT.work([N, N], tp=2)[0] == flops  # two images over two GPUs


def two_requests(same_text: bool, prefix_caching: bool, images: int = 1) -> tuple[V1Scheduler, list]:
    """Two requests of 640 tokens (+ 8 out) with the same image of 576 at token 32, ten seconds apart."""
    t0 = np.arange(648, dtype=np.int64)
    t1 = t0 if same_text else t0 + 1000
    reqs = with_images([Request(0, 0.0, 640, 8, tokens=t0), Request(1, 10.0, 640, 8, tokens=t1)], images, N, 1, 0, 32)
    s = V1Scheduler(cost_with(8192), V1Config(4096, prefix_caching=prefix_caching, encoder=EncoderConfig(2048, 2048)))
    run = s.run(reqs)
    return s, sorted(run.sequences, key=lambda q: q.id)


def test_the_second_request_with_the_same_image_skips_the_encoder():
    """Different text, same image: the second request's prompt (1216 tokens, one chunk) hits the
    encoder cache, and its first token comes exactly the encoder's 576 tokens sooner."""
    s, (a, b) = two_requests(same_text=False, prefix_caching=True)
    assert (s.encoder.hits, s.encoder.computed, s.encoder.held) == (1, N, N)
    ttft = [q.first_token_t - q.req.arrival for q in (a, b)]
    assert ttft[0] - ttft[1] == pytest.approx(encoder_seconds(s.cost, [N]), rel=1e-9)


def test_the_same_prompt_is_a_prefix_hit_past_the_image_and_needs_no_encoder():
    """Same text and image: the prefix cache holds 1200 of its 1216 tokens, past the image's end
    (608), so the encoder is not asked (no hit); another image under the same placeholder tokens
    shares only the blocks before the image (32 tokens: 2 blocks of 16)."""
    s, _ = two_requests(same_text=True, prefix_caching=True)
    assert (s.encoder.hits, s.encoder.computed) == (0, N)
    t = np.arange(648, dtype=np.int64)
    reqs = [Request(0, 0.0, 640, 8, tokens=t), Request(1, 10.0, 640, 8, tokens=t)]
    reqs = with_images(reqs, 1, N, 2, 5, 32)
    reqs[1] = Request(1, 10.0, reqs[1].prompt, 8, reqs[1].tokens, images=(Image(32, N, reqs[0].images[0].mm_hash + 1),))
    s = V1Scheduler(cost_with(8192), V1Config(4096, encoder=EncoderConfig(2048, 2048)))
    run = s.run(reqs)
    assert run.hit_tokens == 32 and s.encoder.computed == 2 * N


def test_block_hashes_hold_the_images_they_cover():
    """Blocks of 16: an image at 32..607 covers blocks 2..37; two images side by side share a block."""
    keys = image_block_keys([Image(32, N, 7)], 16)
    assert sorted(keys) == list(range(2, 38)) and keys[2] == (7,)
    keys = image_block_keys([Image(0, 20, 1), Image(20, 20, 2)], 16)
    assert keys == {0: (1,), 1: (1, 2), 2: (2,)}


def test_a_chunk_stops_before_the_image_the_budget_cannot_take_and_the_next_step_computes_it():
    """A budget of 600 for two images of 576 in one prompt: the first chunk (2048 tokens) computes the
    first image and stops before the second (at 608); the next step computes it."""
    reqs = [Request(0, 0.0, 1400, 4, images=(Image(32, N, 1), Image(608, N, 2)))]
    s = V1Scheduler(cost_with(8192), V1Config(4096, encoder=EncoderConfig(600, 2048)))
    chunks: list[int] = []
    s.run(reqs, observer=lambda sch, step: chunks.append(sum(q.computed for q in sch.prefilling)))
    assert chunks[0] == 608 and s.encoder.cut == 1 and s.encoder.computed == 2 * N


def test_with_images_inserts_placeholders_and_a_chat_keeps_its_images():
    assert IMAGE_TOKEN == VOCAB
    t = np.arange(10, dtype=np.int64)
    first = Request(0, 0.0, 6, 4, tokens=t)
    later = Request(1, 0.0, 9, 1, tokens=np.arange(10, dtype=np.int64), after=0)
    a, b = with_images([first, later], 2, 3, 5, 0, at=4)
    assert a.prompt == 12 and a.images[1].offset == 7 and b.images == a.images
    assert a.tokens.tolist() == [0, 1, 2, 3, *[IMAGE_TOKEN] * 6, 4, 5, 6, 7, 8, 9]
    assert with_images([first], 0, 3, 5, 0) == [first]
    drawn = [r.images[0].mm_hash for r in with_images(poisson_workload("fixed", 200, 1.0, 4096, 3), 1, 8, 4, 3)]
    assert set(drawn) == {1, 2, 3, 4}


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    pool=st.integers(1, 6),
    size=st.sampled_from([300, 600, 1200, 2400]),
    budget=st.sampled_from([300, 600, 2048]),
    prefix=st.booleans(),
)
def test_invariants_over_random_workloads(seed: int, pool: int, size: int, budget: int, prefix: bool) -> None:
    """Every step: free + held == size, free >= 0, a referenced image is never in the freeable queue
    (so never evicted), freeable slots == free + the unreferenced images' lengths, and an image a
    request prefilling is inside of is cached and referenced by it (unless the same image is twice in
    its prompt: vLLM keeps one reference per request and image, which passing the first drops); every
    request ends."""
    reqs = with_images(poisson_workload("uniform", 40, 20.0, 3000, seed, 600, 30), 2, 300, pool, seed)
    # a KV cache of 3000 tokens: waiting requests that do not fit (and give their images back) and preemptions
    s = V1Scheduler(cost_with(3000), V1Config(4096, prefix_caching=prefix, encoder=EncoderConfig(budget, size)))

    def check(sch: V1Scheduler, step: int) -> None:
        c = sch.encoder
        assert c.free >= 0 and c.free + c.held == c.size == sum(c.lengths.values()) + c.free
        for h, refs in c.cached.items():
            assert (h in c.freeable) == (not refs)
        assert c.freeable_slots == c.free + sum(c.lengths[h] for h in c.freeable)
        for q in sch.prefilling:
            if len({i.mm_hash for i in q.req.images}) < len(q.req.images):
                continue
            for image in q.req.images:
                if image.offset < q.computed < image.offset + image.length:
                    assert q.id in c.cached[image.mm_hash]

    run = s.run(reqs, observer=check)
    assert len(run.sequences) + len(run.rejected) == 40
    assert all(not refs for refs in s.encoder.cached.values())  # every request released its images


def test_the_lab_reports_the_encoder_and_refuses_elsewhere():
    """Multi-turn chat with one image of 576 a session: vLLM V1 runs and reports the encoder (every
    image computed is whole; the budget and the cache default to the A100's token budget, 2048);
    the papers' engine and SGLang refuse with one line, and so does a fleet of SGLang replicas."""
    result = SchedulersLab(images=1, requests=40).run()
    (v1,) = [m for m in result["modes"] if m["mode"] == "vllm-v1"]
    enc = v1["encoder"]
    assert (enc["encoder_budget"], enc["encoder_cache"], enc["image_tokens"]) == (2048, 2048, 576)
    assert enc["computed"] % 576 == 0 and enc["computed"] > 0 and max(enc["held"]) <= 2048
    assert result["refused"] == {
        m: f"{m}: images (images > 0) are simulated in vllm-v1 only" for m in ("paper", "sglang")
    }
    assert SchedulersLab(images=1, image_tokens=100, encoder_budget=50).encoder() == EncoderConfig(100, 100)
    with pytest.raises(
        ParamError, match="images: 1 is not allowed with mode sglang; images .images > 0. are simulated"
    ):
        FleetLab(images=1, mode="sglang").check()
    FleetLab(images=1, mode="vllm-v1").check()
    with pytest.raises(ParamError, match="image_tokens: 8 images of 4096 tokens is not allowed"):
        SchedulersLab(images=8, image_tokens=4096, workload="sharegpt").check()
    with pytest.raises(ParamError, match=r"\+ images x image_tokens: 5364 tokens"):
        SchedulersLab(images=1, image_tokens=4096).check()


def test_the_same_image_exercise():
    """200 few-shot requests with one image of 576 after the system prompt: the encoder computes it
    once (both caches at work), against 200 x 576 = 115,200 when every request's image is its own,
    whose prefix hits stop at the system prompt's 12 whole blocks (192 of 1,426 prompt tokens)."""
    from kvweb.exercises import BY_KEY

    v = BY_KEY["same-image"].answer().values
    assert (v["yours"]["computed"], v["all_distinct"]["computed"]) == (576, 200 * 576)
    assert v["all_distinct"]["prefix_hit_rate"] < 192 / 1426 + 1e-9 < v["yours"]["prefix_hit_rate"]
    assert v["yours"]["ttft_p50_s"] < v["all_distinct"]["ttft_p50_s"]


def test_a_waiting_request_that_does_not_fit_gives_its_images_back():
    """vLLM frees a waiting request's encoder references when its blocks do not fit
    (`encoder_cache_manager.free(request)` after `allocate_slots` fails): request 0 computes image X
    and finishes; request 1 (900 tokens) takes most of a KV cache of 1024; request 2 with image X
    finds it cached but does not fit, so it must not keep X referenced while it waits (a reference
    kept by a waiting request can block every other image for good)."""
    x = Image(0, 300, 1)
    reqs = [
        Request(0, 0.0, 400, 1, images=(x,)),
        Request(1, 0.001, 900, 60),
        Request(2, 0.002, 400, 1, images=(x,)),
    ]
    s = V1Scheduler(cost_with(1024), V1Config(4096, encoder=EncoderConfig(2048, 2048)))
    waited: list[int] = []

    def check(sch: V1Scheduler, step: int) -> None:
        if any(q.id == 2 for q in sch.waiting) and 1 in sch.running:
            waited.append(step)
            assert all(2 not in refs for refs in sch.encoder.cached.values())

    s.run(reqs, observer=check)
    assert len(waited) > 10 and (s.encoder.computed, s.encoder.hits) == (300, 1)


def test_a_waiting_request_whose_image_must_wait_stays_in_place_and_the_next_one_starts():
    """vLLM 0.33.0 requeues a waiting request cut to nothing by the encoder (`skip_request`: "so it
    does not stall the requests behind it"): an encoder budget of 300 a step; requests 0 and 1 each
    start with an image of 300, request 2 has none. Step 1 computes request 0's image, request 1's
    must wait for step 2, and request 2 starts in step 1 beside request 0."""
    reqs = [
        Request(0, 0.0, 400, 4, images=(Image(0, 300, 1),)),
        Request(1, 0.0, 400, 4, images=(Image(0, 300, 2),)),
        Request(2, 0.0, 100, 4),
    ]
    s = V1Scheduler(cost_with(8192), V1Config(4096, encoder=EncoderConfig(300, 2048)))
    started: dict[int, int] = {}

    def seen(sch: V1Scheduler, step: int) -> None:
        for q in [*sch.running.values(), *sch.prefilling]:
            started.setdefault(q.id, step)

    s.run(reqs, observer=seen)
    assert started[1] == started[0] + 1 and started[2] == started[0]
    assert (s.encoder.cut, s.encoder.computed) == (1, 600)


def test_async_scheduling_reads_the_last_steps_output_before_giving_up():
    """A request whose next image waits for the room its last image still holds (async scheduling
    releases a passed image once the next step is scheduled) gets vLLM's empty step and goes on:
    this stalled before ("nothing runs and nothing can be admitted")."""
    values = dict(workload="alpaca", requests=3, images=3, image_tokens=137, encoder_budget=137, encoder_cache=137)
    for async_scheduling in (False, True):
        (v1,) = [m for m in SchedulersLab(**values, async_scheduling=async_scheduling).run()["modes"] if "encoder" in m]
        assert v1["finished"] == 3 and v1["encoder"]["computed"] == 3 * 3 * 137
