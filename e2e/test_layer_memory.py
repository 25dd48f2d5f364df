"""The served app end to end on the layer-memory lab (issue 27, part 4): the default model layer by
layer, a widget change, a pasted config.json, and the tour's step 'Today's models'."""

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from conftest import plain_text, set_param, wait_ready

CONFIGS = Path(__file__).parent.parent / "kvweb" / "gpu" / "configs"


def numbers(page):
    page.locator(".kv-layer-numbers .slick-cell").first.wait_for()
    return " ".join(page.locator(".kv-layer-numbers .slick-cell").all_inner_texts())


def query(page):
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_the_default_model_layer_by_layer_and_a_context_change(page, served_app):
    page.goto(f"{served_app}?lab=layer-memory")
    wait_ready(page)
    note = plain_text(page, "kv-layer-note")
    assert note.inner_text().startswith(
        "gpt-oss-20b: 12 sliding window, 12 full attention. One request of 32,768 tokens"
    )
    assert "24,576" in numbers(page)  # 12 full layers x 2 x 8 x 64 x 2 B per token
    set_param(page, "context", "100")  # below the window every layer keeps every token: 24 x 112 x 2,048 B
    page.wait_for_function("() => location.search.includes('context=100')")
    wait_ready(page)
    note.filter(has_text="One request of 100 tokens takes 0.005505 GB").wait_for()


def test_a_pasted_config_builds_the_model_and_stays_in_the_url(page, served_app):
    compact = json.dumps(json.loads((CONFIGS / "qwen3-next-80b-a3b.json").read_text()), separators=(",", ":"))
    page.goto(f"{served_app}?lab=layer-memory&gpu=H200&tp=4")
    wait_ready(page)
    set_param(page, "config", compact)  # read once model=config is chosen
    page.wait_for_function("() => location.search.includes('num_hidden_layers')")
    wait_ready(page)
    page.locator(".kv-param-model select").select_option("config")
    page.wait_for_function("() => location.search.includes('model=config')")
    wait_ready(page)
    plain_text(page, "kv-layer-note").filter(has_text="config: 36 linear state, 12 full attention").wait_for()
    assert json.loads(query(page)["config"]) == json.loads(compact)


def test_the_tour_step_opens_todays_models(page, served_app):
    page.goto(served_app)
    page.locator(".kv-tour-7-0 button").click()
    page.wait_for_function("() => location.search.includes('lab=layer-memory')")
    wait_ready(page)
    q = query(page)
    assert (q["model"], q["gpu"], q["tp"], q["tour"]) == ("gpt-oss-120b", "H200", "8", "8")
    plain_text(page, "kv-layer-note").filter(has_text="gpt-oss-120b: 18 sliding window, 18 full attention").wait_for()
