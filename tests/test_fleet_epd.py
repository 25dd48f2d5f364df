"""Images in the fleet and encode/prefill/decode disaggregation (kvweb/fleet/encode_pool.py): the
encoder's time, the embeddings' bytes and their link by hand, a repeated image computed once per
encode replica, routers that see an image's mm hash, and the lab's checks and estimate."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.budget import ADVANCES, FLEET_REQUESTS
from kvweb.fleet.disaggregation import Link, serve_split
from kvweb.fleet.encode_pool import EncodePool
from kvweb.fleet.fleet import serve
from kvweb.fleet.routers import router_text
from kvweb.lab import ParamError
from kvweb.labs.fleet import FleetLab
from kvweb.serving.load.workload import IMAGE_TOKEN, Image, Request

# scenario A: opt-13b-like (hidden size 5120) on an A100-40GB (312 TFLOP/s x 0.7, 1555 GB/s x 0.8), tp 1
LAB = FleetLab(images=1, mode="vllm-v1", workload="sharegpt", requests=40, replicas=3)
VIT_FLOPS = 2 * 629_145_600 * 576 + 4 * 1280 * 32 * 576**2  # 2 FLOPs a weight a token, QK and AV in the image
ENCODE_S = VIT_FLOPS / (312e12 * 0.7)  # compute-bound: 3.5675 ms (its weights' 1.26 GB read take 1.01 ms)
EMBEDDING_BYTES = 576 * 5120 * 2  # 5,898,240 B
EMBEDDING_LINK_S = EMBEDDING_BYTES / 50e9 + 10e-6  # 117.96 us + the latency


def make():
    return LAB.scheduler("vllm-v1")


def request(rid: int, mm_hash: int | None, arrival: float = 0.0, text: int = 200, output: int = 20) -> Request:
    """A prompt of one image of 576 placeholders then `text` tokens (no image: all text), its own ids."""
    image = 576 if mm_hash is not None else 0
    tokens = np.concatenate([np.full(image, IMAGE_TOKEN), np.arange(text + output) + 1000 * (rid + 1)]).astype(np.int64)
    images = (Image(0, 576, mm_hash),) if mm_hash is not None else ()
    return Request(rid, arrival, image + text, output, tokens, images=images)


def pool(replicas: int = 1) -> EncodePool:
    return EncodePool(LAB.scheduler_cost("vllm-v1"), LAB.encoder(), replicas, Link())


def ttft(requests: list[Request], encode: EncodePool | None = None) -> float:
    split = serve_split(requests, make, 1, 1, "round-robin", Link(), encode)
    return split.served[requests[0].id][1]


def test_one_image_through_encode_then_prefill_decode_by_hand() -> None:
    """One request, one image of 576: the encode replica's ViT takes 3.5675 ms, its 5,898,240 B of
    embeddings 127.96 us over the link, and the prefill replica then skips its encoder. P/D without
    an encode pool pays the encoder in the prefill step instead; without the image's encoder at all
    (the same tokens as text) the request is the P/D TTFT the two are read against."""
    assert ENCODE_S == pytest.approx(3.5675e-3, abs=1e-7)
    text = ttft([request(0, None, text=776)])  # 776 text tokens: the same prefill, KV and link
    alone = ttft([request(0, 5)])  # the prefill replica computes the image itself
    encode = pool()
    epd = ttft([request(0, 5)], encode)
    assert alone == pytest.approx(text + ENCODE_S, rel=1e-9)
    assert epd == pytest.approx(ENCODE_S + EMBEDDING_LINK_S + text, rel=1e-9)
    (replica,) = encode.figures()["replicas"]
    assert (replica["images"], replica["embeddings"], replica["embedding_bytes"]) == (1, 576, EMBEDDING_BYTES)
    assert replica["busy_s"] == pytest.approx(ENCODE_S, rel=1e-12)
    assert encode.figures()["embedding_transfer_s"]["p50"] == pytest.approx(EMBEDDING_LINK_S, rel=1e-12)


def test_an_encode_replicas_image_is_loaded_taking_cache_room_but_no_budget() -> None:
    """vLLM's `external_load_encoder_input`: a received image still needs the step's budget to hold
    it (576 > 500: the chunk stops before it) and room in the cache (576 of 1,000 taken), but leaves
    the budget whole for the next image (1,000 still) and counts no embedding computed."""
    from kvweb.serving.memory.encoder_cache import EncoderCache

    cache, image = EncoderCache(1000), Image(10, 576, 5)
    cache.receive(image)
    assert cache.schedule(0, (image,), 0, 700, 500, [], []) == (10, 500)  # cut just before the image
    scheduled: list[Image] = []
    assert cache.schedule(0, (image,), 0, 700, 1000, scheduled, []) == (700, 1000)
    cache.commit(0, scheduled, [])
    assert (cache.held, cache.computed) == (576, 0)


def test_embeddings_on_the_wire_keep_the_pool_busy_until_they_arrive() -> None:
    """The last byte leaves at encode + 117.96 us, the embeddings arrive 10 us later: asked 5 us after
    the last byte the pool has nothing to give yet and is still busy (else the fleet would stop
    asking and the request would never reach a replica); asked at the arrival, it gives it."""
    encode = pool()
    encode.submit(request(0, 5))
    last_byte = ENCODE_S + EMBEDDING_BYTES / 50e9
    assert encode.run(last_byte + 5e-6) == [] and encode.busy()
    ((t, r),) = encode.run(last_byte + 10e-6)
    assert (t, r.id) == (pytest.approx(ENCODE_S + EMBEDDING_LINK_S, rel=1e-12), 0) and not encode.busy()


def test_the_same_image_twice_to_one_encode_replica_is_computed_once() -> None:
    """Two requests of one image, 1 s apart: the second finds it in the encode replica's cache (no
    encoder time) and its embeddings are sent again; another image is computed again."""
    encode = pool()
    serve(
        [request(0, 5), request(1, 5, arrival=1.0), request(2, 6, arrival=2.0)], make, 1, "round-robin", encode=encode
    )
    (replica,) = encode.figures()["replicas"]
    assert (replica["requests"], replica["images"], replica["hits"]) == (3, 2, 1)
    assert replica["busy_s"] == pytest.approx(2 * ENCODE_S, rel=1e-12)
    assert replica["embedding_bytes"] == 3 * EMBEDDING_BYTES


def test_requests_without_images_skip_the_pool_and_the_fleet_is_unchanged() -> None:
    """With no image in the requests, an encode pool changes nothing of the fleet's figures."""
    requests = FleetLab(requests=60, mode="vllm-v1", workload="few-shot").served_requests()
    slo = LAB.setup().slo
    plain = serve(requests, make, 2, "exact-prefix").figures(slo)
    pooled = serve(requests, make, 2, "exact-prefix", encode=pool()).figures(slo)
    assert pooled.pop("encode")["replicas"][0]["requests"] == 0
    assert pooled == plain


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 6), st.integers(1, 2), st.booleans())
def test_every_request_with_images_is_encoded_once_and_its_embeddings_sent(
    seed: int, image_pool: int, encode_replicas: int, split: bool
) -> None:
    """Whatever the draw: each request with images goes through one encode replica once, all its
    embeddings are sent, no encode replica computes an image more often than requests brought it,
    and a request's TTFT holds at least its encoder step and its transfer."""
    lab = FleetLab(images=1, mode="vllm-v1", requests=30, rate=8.0, seed=seed, image_pool=image_pool)
    requests = lab.served_requests()
    encode = pool(encode_replicas)
    if split:
        run = serve_split(requests, make, 1, 1, "round-robin", Link(), encode)
        ttfts, rejected = [v[1] for v in run.served.values()], run.rejected
    else:
        fleet = serve(requests, make, 2, "cache-aware", encode=encode)
        ttfts = [s.first_token_t - s.req.arrival for r in fleet.runs for s in r.sequences]
        rejected = fleet.rejected
    assert len(ttfts) + len(rejected) == len(requests)  # each served or refused, none left in the pool
    figures, encoded = encode.figures()["replicas"], len(requests) - len(rejected)  # refused before the pool
    assert sum(f["requests"] for f in figures) == encoded
    assert sum(f["embedding_bytes"] for f in figures) == encoded * EMBEDDING_BYTES
    assert sum(f["images"] + f["hits"] for f in figures) == encoded
    assert all(f["images"] <= f["requests"] for f in figures)
    assert min(ttfts) >= ENCODE_S + EMBEDDING_LINK_S


def test_routers_see_the_image_as_vllm_hashes_it() -> None:
    """Three requests of the same tokens, 1 s apart, on two replicas behind the exact prefix router:
    the second (the same image) finds the first's prompt on replica 0, 768 tokens in whole blocks;
    the third (another image, the same placeholders) finds nothing, its first block holds the image.
    The cache-aware router's text differs between the two images, not for the same one."""
    first, same, other = request(0, 5), request(1, 5, arrival=1.0), request(2, 6, arrival=2.0)
    for r in (same, other):
        r.tokens[:] = first.tokens
    fleet = serve([first, same, other], make, 2, "exact-prefix")
    assert [(d.replica, d.matched, d.best) for d in fleet.decisions] == [(0, 0, 0), (0, 768, 768), (0, 0, 0)]
    assert np.array_equal(router_text(first), router_text(same))
    assert not np.array_equal(router_text(first), router_text(other))
    assert np.array_equal(router_text(first)[576:], first.tokens[576:776])


def test_the_lab_runs_images_and_encode_replicas_and_refuses_what_it_does_not_simulate() -> None:
    """Images on vLLM V1 replicas; an encode pool with images only, and with one replica left to decode."""
    result = FleetLab(images=1, mode="vllm-v1", requests=30, replicas=3, routers="round-robin", encode_replicas=1).run()
    d = result["disaggregation"]
    (row,) = d["splits"]
    assert (d["encode_replicas"], row["encode_replicas"], row["prefill_replicas"], row["decode_replicas"]) == (
        1,
        1,
        0,
        2,
    )
    assert row["encode"]["replicas"][0]["requests"] == 30 and row["finished"] == d["co_located"]["finished"]
    refused = "encode_replicas: 1 is not allowed; expected 0 .off. or, with images > 0 .mode vllm-v1., 1 to"
    with pytest.raises(ParamError, match=refused + " 3 "):
        FleetLab(mode="vllm-v1", encode_replicas=1).check()
    with pytest.raises(ParamError, match=refused.replace(": 1", ": 2") + " 1 "):
        FleetLab(images=1, mode="vllm-v1", replicas=4, prefill_replicas=2, encode_replicas=2).check()
    with pytest.raises(ParamError, match="images: 1 is not allowed with mode sglang"):
        FleetLab(images=1, encode_replicas=1).check()


def test_the_estimate_counts_the_encode_pools_requests_by_hand() -> None:
    """One router, 3 replicas of which 1 encodes: the router's fleet (40 requests, 3 replicas), the
    encode pool before 2 co-located replicas (40 requests, each with an image routed once more) and
    the single engine: 40 x 4 requests; advances 40 x 3 + (40 + 40) x 2 + 40 x 1."""
    lab = FleetLab(
        images=1, mode="vllm-v1", workload="sharegpt", requests=40, replicas=3, encode_replicas=1, routers="round-robin"
    )
    units = {u: n for n, u in lab.estimate().parts}
    assert units[FLEET_REQUESTS] == 40 * 4
    assert units[ADVANCES] == 40 * 3 + 80 * 2 + 40


@pytest.mark.skipif(sys.platform == "emscripten", reason="the app (Panel) is tested in CPython only")
def test_the_fleet_view_names_the_pools_and_shows_the_encode_replicas_row() -> None:
    """Encode 1 before 2 co-located replicas: the split table's row is named for both pools, its
    KV transfer cell empty, and the encode table's row holds the library's figures; without encode
    replicas the encode table is hidden."""
    from app.views.fleet import FleetView

    lab = FleetLab(images=1, mode="vllm-v1", requests=30, replicas=3, routers="round-robin", encode_replicas=1)
    result = lab.run()
    view = FleetView()
    view.update(lab, result)
    data = view.disaggregated.source.data
    assert data["c0"] == ["co-located", "encode 1 + co-located 2 ←"] and data["c6"] == ["", ""]
    (replica,) = result["disaggregation"]["disaggregated"]["encode"]["replicas"]
    row = [view.encode_table.source.data[f"c{i}"][0] for i in range(6)]
    assert row[:4] == ["0", "30", str(replica["images"]), str(replica["hits"])] and view.encode_pane.visible
    assert replica["images"] + replica["hits"] == 30
    plain = FleetLab(images=1, mode="vllm-v1", requests=30, replicas=3, routers="round-robin", prefill_replicas=1)
    view.update(plain, plain.run())
    assert not view.encode_pane.visible
    assert view.disaggregated.source.data["c0"][1] == "disaggregated 1 + 2 ←"


def test_a_splits_later_chat_turn_counts_its_ttft_from_its_own_arrival() -> None:
    """Multi-turn chat through prefill 1 + decode 1: each later turn arrives think_s after the turn it
    follows finished, and its TTFT counts from then (it did from its template's arrival, 0 s)."""
    lab = FleetLab(mode="vllm-v1", workload="multi-turn", requests=6, turns=3, think_s=2.0, rate=1.0)
    requests = lab.served_requests()
    later = [r for r in requests if r.after is not None]
    run = serve_split(requests, make, 1, 1, "round-robin", Link())
    finished = {i: v[0] + v[1] for i, v in run.served.items()}  # not the finish: arrival + TTFT, a lower bound
    for r in later:
        arrival, ttft_s = run.served[r.id][:2]
        assert arrival >= finished[r.after] + 2.0 and 0 < ttft_s < 1.0


def test_a_request_the_replicas_refuse_never_reaches_the_encode_pool() -> None:
    """A request longer than the model allows (576 + 1,600 + 100 tokens, scenario A allows 2,048) is
    refused at the fleet, before the encode pool (as a split refuses it before its prefill pool): its
    image is not encoded, and the next request's runs beside an encoder cache of one image."""
    lab = FleetLab(images=1, mode="vllm-v1", encoder_cache=576)
    too_long, fine = request(0, 5, text=1600, output=100), request(1, 6, arrival=1.0)
    encode = pool()
    run = serve([too_long, fine], lambda: lab.scheduler("vllm-v1"), 1, "round-robin", encode=encode)
    assert [(r.id, why.startswith("prompt + output")) for r, why in run.rejected] == [(0, True)]
    assert [s.id for s in run.runs[0].sequences] == [1]
    assert encode.figures()["replicas"][0]["requests"] == 1
