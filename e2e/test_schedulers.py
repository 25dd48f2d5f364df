"""The served app end to end on the schedulers lab: the tour's step "today's engines" opens it,
the three memory maps show cached-reusable memory only where a prefix cache exists, the table
compares the modes, switching prefix caching off redraws everything (and is written to the URL),
and a gpt-oss model shows vLLM V1's KV cache groups."""

from urllib.parse import parse_qs

from conftest import plain_text, table_header, table_rows, wait_ready, wait_until

from app.pages.tour import STEPS
from app.views.schedulers import STATES

DATA = "(name) => Bokeh.documents[0].get_model_by_name(name).data"
STATE = "(name) => Array.from(Bokeh.documents[0].get_model_by_name(name).data.state)"
CACHED = [name for name, _ in STATES].index("cached, reusable")  # a cell's state: its index in STATES


def query(page) -> dict:
    return {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}


def table(page) -> dict:
    """The figures table as rendered: row label -> mode -> cell."""
    header = table_header(page, "kv-schedulers-table")
    return {row[0]: dict(zip(header[1:], row[1:])) for row in table_rows(page, "kv-schedulers-table")}


def states(page, mode: str) -> list:
    """The state of each cell the map shows (the page colours it)."""
    return page.evaluate(STATE, f"schedulers-{mode}-cells")


def test_the_tour_step_opens_the_lab_and_its_maps_animate(page, served_app, guard):
    step = next(i for i, s in enumerate(STEPS) if s.links[0][1]["lab"] == "schedulers")  # "today's engines"
    page.goto(f"{served_app}?page=tour")
    page.locator(f".kv-tour-{step}-0 button").click()
    page.wait_for_function("() => location.search.includes('lab=schedulers')")
    wait_ready(page)
    # it opens on the frame with the most prefix reuse: cached memory shows without a click
    page.wait_for_function("() => /step=[1-9]/.test(location.search)")
    # (on a loaded machine the maps' cells may arrive a patch after the step is in the URL)
    page.wait_for_function(
        "() => ['vllm-v1', 'sglang'].every(m => Bokeh.documents[0]"
        ".get_model_by_name(`schedulers-${m}-cells`)?.data.state?.length > 0)"
    )
    assert CACHED in states(page, "vllm-v1") and CACHED in states(page, "sglang")
    opening = query(page)["step"]
    page.locator(".kv-player button.last").click()
    page.wait_for_function("s => new URLSearchParams(location.search).get('step') !== s", arg=opening)
    page.wait_for_timeout(500)
    hit = table(page)["prefix hit rate (prompt tokens)"]
    assert hit["paper"] == "0.0 %" and float(hit["vllm-v1"][:-2]) > 50 and float(hit["sglang"][:-2]) > 50
    assert CACHED not in states(page, "paper")  # the papers' engine keeps nothing after a request
    assert CACHED in states(page, "vllm-v1") and CACHED in states(page, "sglang")
    before = states(page, "sglang")
    page.locator(".kv-player button.first").click()
    page.wait_for_function("() => location.search.includes('step=0')")
    page.wait_for_function(
        "b => JSON.stringify(Array.from(Bokeh.documents[0].get_model_by_name("
        "'schedulers-sglang-cells').data.state)) !== JSON.stringify(b)",
        arg=before,
    )
    assert "vllm-v1:" in plain_text(page, "kv-schedulers-step").inner_text()
    assert guard.errors == []


def test_prefix_caching_off_keeps_nothing_reusable(page, served_app, guard):
    page.goto(f"{served_app}?lab=schedulers&requests=80&workload=few-shot")
    wait_ready(page)
    assert float(table(page)["prefix hit rate (prompt tokens)"]["vllm-v1"][:-2]) > 50
    page.locator(".kv-param-prefix_caching input").click()
    page.wait_for_function("() => location.search.includes('prefix_caching=false')")
    wait_ready(page)
    assert wait_until(lambda: table(page)["prefix hit rate (prompt tokens)"]["vllm-v1"] == "0.0 %")
    rows = table(page)
    assert rows["prefix hit rate (prompt tokens)"] == {"paper": "0.0 %", "vllm-v1": "0.0 %", "sglang": "0.0 %"}
    page.locator(".kv-player button.last").click()
    page.wait_for_function("() => /step=[1-9]/.test(location.search)")
    assert all(CACHED not in states(page, m) for m in ("paper", "vllm-v1", "sglang"))
    assert query(page)["workload"] == "few-shot"
    assert guard.errors == []


def test_a_host_tier_in_the_url_shows_its_figure(page, served_app, guard):
    page.goto(f"{served_app}?lab=schedulers&requests=120&rate=6&mem_util=0.75&host_tier_gb=40")
    wait_ready(page)
    page.locator(
        ".kv-schedulers-table .slick-cell", has_text="host tier: prompt tokens from GPU / host / computed"
    ).wait_for()
    rows = table(page)
    by_tier = rows["host tier: prompt tokens from GPU / host / computed"]
    assert by_tier["paper"] == rows["TTFT p50 / p99 without the host tier (ms)"]["paper"] == "-"
    for mode in ("vllm-v1", "sglang"):
        held = page.evaluate(DATA, f"schedulers-host-tier-{mode}")["held"]
        assert len(held) > 10 and max(held) > 0  # the tier fills as the GPU caches
        assert int(by_tier[mode].split(" / ")[1].replace(",", "")) > 0  # prompt tokens from the host
        assert rows["TTFT p50 / p99 without the host tier (ms)"][mode] != "-"
    assert page.evaluate("() => Bokeh.documents[0].get_model_by_name('schedulers-host-tier-figure').visible")
    assert float(query(page)["host_tier_gb"]) == 40


def test_a_gpt_oss_model_shows_vllms_kv_cache_groups(page, served_app, guard):
    # issue 27: a model with sliding-window layers; vLLM V1 keeps them in a group of their own
    page.goto(f"{served_app}?lab=schedulers&scenario=B&model=gpt-oss-20b&workload=long-context&requests=40")
    wait_ready(page)
    groups = plain_text(page, "kv-schedulers-groups")
    groups.filter(has_text="vLLM V1's KV cache groups, one pool of blocks of 16 tokens").wait_for()
    text = groups.inner_text()
    assert "0: sliding window (128 tokens), 12 layers: 9 blocks per request of the maximum length" in text
    assert "1: full attention, 12 layers: 512 blocks per request of the maximum length" in text
    rows = table(page)
    assert rows["most requests at once"]["paper"] == "-"  # SGLang serves it on its full and window pools
    assert rows["most requests at once"]["vllm-v1"] != "-" and rows["most requests at once"]["sglang"] != "-"
    assert query(page)["model"] == "gpt-oss-20b"
    assert guard.errors == []


GROUPS = """(mode) => { const doc = Bokeh.documents[0];
  const cells = doc.get_model_by_name(`schedulers-${mode}-groups-cells`).data;
  return {group: Array.from(cells.group), state: Array.from(cells.state),
          titles: doc.get_model_by_name(`schedulers-${mode}-groups-titles`).data.text,
          shown: doc.get_model_by_name(`schedulers-${mode}-groups`).visible}; }"""


def test_a_gpt_oss_model_draws_each_kv_cache_groups_map_and_steps_them(page, served_app, guard):
    # issue 27: vLLM V1's one pool drawn once per group, a band each, stepped with the player
    page.goto(f"{served_app}?lab=schedulers&scenario=B&model=gpt-oss-20b&workload=long-context&requests=40")
    wait_ready(page)
    page.wait_for_function(
        "() => Bokeh.documents[0].get_model_by_name('schedulers-vllm-v1-groups-cells').data.state.length > 0"
    )
    shown = page.evaluate(GROUPS, "vllm-v1")
    assert shown["shown"] and shown["titles"] == [
        "0: sliding window (128 tokens), 12 layers",
        "1: full attention, 12 layers",
    ]
    assert shown["group"] == [0] * 1024 + [1] * 1024  # the one pool of 76,762 blocks, 1,024 cells a group
    assert CACHED in shown["state"]  # freed window blocks and finished requests' blocks, still hashed
    note = plain_text(page, "kv-schedulers-group-note").inner_text()
    assert note.startswith("vllm-v1: one pool of blocks, drawn once per KV cache group")
    page.locator(".kv-player button.first").click()
    page.wait_for_function("() => location.search.includes('step=0')")
    page.wait_for_function(
        "b => JSON.stringify(Array.from(Bokeh.documents[0].get_model_by_name("
        "'schedulers-vllm-v1-groups-cells').data.state)) !== JSON.stringify(b)",
        arg=shown["state"],
    )
    assert query(page)["model"] == "gpt-oss-20b"
    assert guard.errors == []


def test_sglang_draws_its_full_and_window_pools_as_two_bands(page, served_app, guard):
    # issue 27: SGLang keeps window layers' KV in a pool of its own; each pool is a band, stepped with the player
    page.goto(f"{served_app}?lab=schedulers&scenario=B&model=gpt-oss-20b&workload=long-context&requests=40")
    wait_ready(page)
    page.wait_for_function(
        "() => Bokeh.documents[0].get_model_by_name('schedulers-sglang-groups-cells').data.state.length > 0"
    )
    shown = page.evaluate(GROUPS, "sglang")
    assert shown["shown"] and shown["titles"] == [
        "0: full attention, 12 layers",
        "1: sliding window (128 tokens), 12 layers",
    ]
    assert (
        page.evaluate("() => Bokeh.documents[0].get_model_by_name('schedulers-sglang-groups').title.text")
        == "sglang: each pool's map"
    )
    # the full pool's 682,337 token slots and the window pool's 545,869, in at most 1,024 cells each
    assert shown["group"] == [0] * 1023 + [1] * 1023
    held = [s for g, s in zip(shown["group"], shown["state"]) if g == 1]
    assert CACHED in held  # finished requests' window KV, still in the tree
    note = plain_text(page, "kv-schedulers-group-note").inner_text()
    assert "sglang: a pool of its own for each kind of layer, drawn one each; the full pool holds every token" in note
    page.locator(".kv-player button.first").click()
    page.wait_for_function("() => location.search.includes('step=0')")
    page.wait_for_function(
        "b => JSON.stringify(Array.from(Bokeh.documents[0].get_model_by_name("
        "'schedulers-sglang-groups-cells').data.state)) !== JSON.stringify(b)",
        arg=shown["state"],
    )
    assert guard.errors == []


def test_measured_step_times_and_a_calibration_from_the_url_are_named_in_the_header(page, served_app, guard):
    """cost_model=measured and a pasted benchmark run in a share URL: the header names the kernels,
    the held-out error and the fit to the run, as the lab's JSON does."""
    from urllib.parse import quote

    from kvweb.lab import LABS

    run = (
        '{"backend": "vllm", "max_concurrency": 16, "completed": 200, "total_input_tokens": 204800, '
        '"total_output_tokens": 51200, "mean_ttft_ms": 160.0, "mean_tpot_ms": 11.5}'
    )
    params = {"scenario": "B", "cost_model": "measured", "requests": 40, "calibration": run}
    expected = LABS["schedulers"](**params).run()["step_cost"]
    page.goto(f"{served_app}?lab=schedulers&scenario=B&cost_model=measured&requests=40&calibration={quote(run)}")
    wait_ready(page)
    header = plain_text(page, "kv-schedulers-header")
    header.filter(has_text="calibrated to your 1 run").wait_for()
    assert header.inner_text().splitlines()[-1] == f"step times: {expected['vllm-v1']}; {expected['sglang']}"
    assert "step overhead 2.79 ms" in expected["vllm-v1"] and "±18 %" in expected["vllm-v1"]
    assert query(page)["calibration"] == run and guard.errors == []


def test_a_headline_figure_opens_its_formula_for_each_mode(page, served_app):
    """Under the table: throughput opens as output tokens over simulated time, per mode, with the
    run's own values; the prefix hit rate as tokens from the cache over prompt tokens."""
    from kvweb.lab import LABS

    lab = LABS["schedulers"](requests=40)
    explained = lab.explain(lab.run())
    page.goto(f"{served_app}?lab=schedulers&requests=40")
    wait_ready(page)
    text = plain_text(page, "kv-schedulers-explain-text")
    text.filter(has_text="vllm-v1: throughput = output tokens ÷ simulated time").wait_for()
    assert text.inner_text() == "\n\n".join(f"{mode}: {e.text()}" for mode, e in explained["throughput_tok_s"].items())
    page.locator(".kv-schedulers-explain select").select_option(label="prefix hit rate (prompt tokens)")
    text.filter(has_text="prompt tokens from the cache ÷ prompt tokens").wait_for()
    hits = explained["prefix_hit_rate"]["sglang"].text().splitlines()[1]
    assert hits in text.inner_text() and hits.startswith("prompt tokens from the cache = ")
