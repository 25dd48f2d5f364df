"""The served app end to end on images (vLLM V1's encoder cache, issue 38 item 3): the URL's images
and image_pool run vLLM V1 with an image in every prompt, the other modes say they do not model
images, the table gives the encoder cache's hits against the embeddings computed, a line the images
and the encoder's budget and cache, and the step's line the embeddings held and the hits at the step
the library's trace says (its strip under the maps holding as many), in English and in Chinese."""

from conftest import plain_text, table_header, table_rows, wait_ready

from kvweb.labs.schedulers import SchedulersLab

PARAMS = {"workload": "few-shot", "requests": 200, "images": 1, "image_pool": 1}
URL = "?lab=schedulers&" + "&".join(f"{k}={v}" for k, v in PARAMS.items())


def table(page) -> dict:
    header = table_header(page, "kv-schedulers-table")
    return {row[0]: dict(zip(header[1:], row[1:])) for row in table_rows(page, "kv-schedulers-table")}


def hit_step(result: dict) -> tuple[int, int, int]:
    """The first step after the encoder cache's first hit: (step, embeddings held, hits so far)."""
    (v1,) = result["modes"]
    encoder, at = v1["encoder"], result["timeline"]["frames"][0]
    step = next(i for i, f in enumerate(at) if encoder["hits_at"][f] > 0)
    return step, encoder["held"][at[step]], encoder["hits_at"][at[step]]


def test_an_image_in_every_prompt_shows_the_encoder_cache_and_its_hits(page, served_app, guard):
    result = SchedulersLab(**PARAMS).run()  # the run the page shows
    (v1,) = result["modes"]
    encoder = v1["encoder"]
    assert encoder["computed"] == 576  # one image: computed once
    step, held, hits = hit_step(result)
    page.goto(f"{served_app}{URL}&step={step}")
    wait_ready(page)
    rows = table(page)
    assert rows["encoder cache hits / embeddings computed"] == {
        "paper": "-",
        "vllm-v1": f"{encoder['hits']:,} / 576",
        "sglang": "-",
    }
    assert rows["chunks cut for the encoder / images evicted"]["vllm-v1"] == "0 / 0"
    line = plain_text(page, "kv-schedulers-images").inner_text()
    assert "vllm-v1: 1 images of 576 tokens in each request, drawn from 1 distinct images" in line
    assert "encoder budget 2,048 embeddings a step, encoder cache 2,048 embeddings" in line
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{step}'")
    shown = f"vllm-v1: encoder cache: {held:,} of 2,048 embeddings held, {hits:,} hits"
    assert shown in plain_text(page, "kv-schedulers-step").inner_text()
    strip = page.evaluate("""() => {
        const doc = Bokeh.documents[0];
        const data = doc.get_model_by_name('schedulers-encoder-cache').data;
        const held = data instanceof Map ? data.get('held') : data.held;
        return {visible: doc.get_model_by_name('schedulers-encoder-strip').visible, held: Array.from(held)};
    }""")
    assert strip == {"visible": True, "held": [held]}
    assert guard.errors == []


def test_the_encoder_cache_lines_in_chinese(page, served_app, guard):
    step, held, hits = hit_step(SchedulersLab(**PARAMS).run())
    page.goto(f"{served_app}{URL}&step={step}&lang=zh")
    wait_ready(page)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{step}'")
    shown = f"vllm-v1: 编码器缓存：存放 {held:,} / 2,048 个嵌入，命中 {hits:,} 次"
    assert shown in plain_text(page, "kv-schedulers-step").inner_text()
    assert (
        "每个请求 1 张图像，每张 576 个 token，从 1 张不同图像中抽取"
        in plain_text(page, "kv-schedulers-images").inner_text()
    )
    assert "编码器缓存 (encoder cache) 命中 / 计算的嵌入 (embedding) 数" in table(page)
    assert guard.errors == []
