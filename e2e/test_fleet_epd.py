"""The served app end to end on encode/prefill/decode disaggregation in the fleet (issue 38, item
3): a URL with images and encode replicas shows the encode pool before a prefill/decode split in the
disaggregation table, and the encode replica's row (requests, images encoded, cache hits, encoder
busy time, embeddings sent) as the library computes it."""

from conftest import table_header, table_rows, wait_ready

from app.views.fleet import encode_rows
from kvweb.labs.fleet import FleetLab

PARAMS = dict(mode="vllm-v1", images=1, image_pool=3, replicas=3, encode_replicas=1, prefill_replicas=1, requests=40)
PARAMS["routers"] = "round-robin"
URL = "?lab=fleet&" + "&".join(f"{k}={v}" for k, v in PARAMS.items())


def test_the_encode_pool_shows_its_row_beside_the_split(page, served_app, guard):
    encode = FleetLab(**PARAMS).run()["disaggregation"]["disaggregated"]["encode"]
    (want,) = encode_rows(encode)[1]
    assert int(want[2]) <= 3 < int(want[1]) == 40  # 40 requests; 3 images, all held in the cache of 2048
    page.goto(f"{served_app}{URL}")
    wait_ready(page)
    assert table_header(page, "kv-fleet-encode") == [
        "encode replica",
        "requests",
        "images encoded",
        "encoder cache hits",
        "encoder busy (ms)",
        "embeddings sent (MB)",
    ]
    assert table_rows(page, "kv-fleet-encode") == [want]
    names = [row[0] for row in table_rows(page, "kv-fleet-disaggregation")]
    assert names == ["co-located", "disaggregated 1 + 1 + 1 ←"]
    assert guard.errors == []
