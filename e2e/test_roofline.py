"""The served app end to end on the roofline lab: load, widget change, share URL (hostile URLs:
test_hostile.py)."""

from urllib.parse import parse_qs, urlparse

from conftest import plain_text, set_param, wait_ready


def numbers(page):
    """The figures table's cells (label, value, label, value, ...) as one text."""
    page.locator(".kv-roofline-numbers .slick-cell").first.wait_for()
    return " ".join(page.locator(".kv-roofline-numbers .slick-cell").all_inner_texts())


def cell(page, text):
    """The figures table's cell holding `text` (wait for it)."""
    return page.locator(".kv-roofline-numbers .slick-cell", has_text=text)


def query(page):
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_loads_and_a_widget_change_updates_figure_and_url(page, served_app):
    page.goto(f"{served_app}?lab=roofline")  # with no lab and no page the guided tour opens
    wait_ready(page)
    assert "KV capacity (tokens)" in numbers(page) and "11,969" in numbers(page)  # never 1.197e+04
    assert query(page)["lab"] == "roofline"
    page.locator(".kv-param-gpu select").select_option("A100-80GB")
    page.wait_for_function("() => location.search.includes('gpu=A100-80GB')")
    wait_ready(page)
    # (0.9 * 80e9 - 26,194,984,960) // 819,200 = 55,914 tokens (the lecture's OPT-13B-like, own LM head)
    cell(page, "55,914").wait_for()
    set_param(page, "tokens", "4096")
    page.wait_for_function("() => location.search.includes('tokens=4096')")


def test_share_url_restores_parameters(page, served_app):
    page.goto(f"{served_app}?lab=roofline&gpu=H100-SXM&model=llama-3-8b&block_size=32")
    wait_ready(page)
    assert page.locator(".kv-param-gpu select").input_value() == "H100-SXM"
    assert page.locator(".kv-param-model select").input_value() == "llama-3-8b"
    assert page.locator(".kv-param-block_size input").input_value() == "32"
    assert "128" in numbers(page) and "426,788" in numbers(page)  # 426,788 tokens of 128 KiB
    q = query(page)
    assert q["gpu"] == "H100-SXM" and q["block_size"] == "32"
    assert not plain_text(page, "kv-message").is_visible()


def test_a_model_that_does_not_fit_says_so_and_draws_nothing(page, served_app):
    page.goto(f"{served_app}?lab=roofline&gpu=H100-SXM&model=llama-3-70b")
    wait_ready(page)
    note = plain_text(page, "kv-fit-note")
    assert note.inner_text().startswith("llama-3-70b does not fit on one H100-SXM: its weights take 141.1 GB")
    assert not page.locator(".kv-roofline-numbers").is_visible()  # no decode rate as if it ran
    page.locator(".kv-fold-assumptions").first.locator(".card-header").click()
    page.locator(".kv-param-ignore_weights input").first.check()
    page.wait_for_function("() => location.search.includes('ignore_weights=true')")
    wait_ready(page)
    note.filter(has_text="what-if: the weights of llama-3-70b (141.1 GB)").wait_for()
    cell(page, "219,726").wait_for()  # 72e9 // 327,680 tokens
    page.goto(f"{served_app}?lab=roofline&gpu=H100-SXM&model=llama-3-70b&lang=zh")
    wait_ready(page)
    assert "放不进一个 H100-SXM" in plain_text(page, "kv-fit-note").inner_text()


def test_every_lab_that_prices_work_folds_the_same_assumptions(page, served_app):
    names = [
        "mem_util",
        "compute_eff",
        "memory_eff",
        "step_overhead_ms",
        "block_overhead_us",
        "host_link_gb_s",
        "swap_copies",
        "interconnect_gb_s",
        "allreduce_latency_us",
        "ignore_weights",
    ]
    for lab in ("roofline", "recovery", "engine", "max-rate", "sweep", "prefill-savings"):
        page.goto(f"{served_app}?lab={lab}&requests=20")
        page.locator(".kv-fold-assumptions").first.wait_for()
        card = page.locator(".kv-fold-assumptions").first
        card.locator(".card-header").click()
        for name in names:
            card.locator(f".kv-param-{name}").first.wait_for()
        assert card.locator("[class*='kv-param-']").count() == len(names), lab
    page.goto(f"{served_app}?lab=cache-schedule")
    page.locator(".kv-fold-details").first.wait_for()
    assert page.locator(".kv-fold-assumptions").count() == 0


def test_tensor_parallelism_and_precision_change_the_figures(page, served_app):
    page.goto(f"{served_app}?lab=roofline&gpu=H100-SXM&model=llama-3.1-70b&batch=64")
    wait_ready(page)
    assert "does not fit on one H100-SXM" in plain_text(page, "kv-fit-note").inner_text()
    page.locator(".kv-param-tp select").select_option("4")
    page.wait_for_function("() => location.search.includes('tp=4')")
    wait_ready(page)
    # (72 GB - 70.55 GB x 2 B / 4) // 81,920 B of 16-bit KV per token on each GPU = 448,288 tokens
    cell(page, "448,288").wait_for()
    page.locator(".kv-param-weight_precision select").select_option("fp8")
    page.locator(".kv-param-kv_precision select").select_option("fp8")
    page.wait_for_function("() => location.search.includes('kv_precision=fp8')")
    wait_ready(page)
    # FP8 weights (embedding and LM head 16-bit) and KV: (72 GB - 72.65 GB / 4) // 40,960 B = 1,314,369
    # tokens; the all-reduce share shown
    cell(page, "1,314,369").wait_for()
    assert "of which all-reduce (ms)" in numbers(page) and "19.5" in numbers(page)
    page.goto(f"{served_app}?lab=roofline&gpu=H100-SXM&model=qwen2.5-7b&tp=8&lang=zh")
    wait_ready(page)
    assert "无法分到 8 个 GPU 上" in plain_text(page, "kv-fit-note").inner_text()


def test_a_figure_opens_its_formula_with_the_values_put_in(page, served_app):
    """Under the figures: pick a figure, read its formula, its values and where it comes from; the
    numbers are the table's (KV capacity 11,969 tokens, one decode step 43.14 ms)."""
    page.goto(f"{served_app}?lab=roofline")
    wait_ready(page)
    explanation = plain_text(page, "kv-roofline-explain-text")
    explanation.filter(has_text="= 11,969 tokens").wait_for()
    assert explanation.inner_text().splitlines()[:2] == [
        "KV capacity = ⌊memory left for KV, one GPU ÷ KV per token, one GPU⌋",
        "memory left for KV, one GPU = 9,805,015,040 B; KV per token, one GPU = 819,200 B",
    ]
    page.locator(".kv-roofline-explain select").select_option(label="one decode step (ms)")
    explanation.filter(has_text="= 0.04314 s").wait_for()
    assert "compute efficiency 0.7, memory efficiency 0.8, 0.5 ms a step" in explanation.inner_text()
    assert "43.14" in numbers(page)  # the table's figure
    page.goto(f"{served_app}?lab=roofline&lang=zh")
    explanation.filter(has_text="来源：纸面屋顶线模型的假设").wait_for(timeout=60_000)
