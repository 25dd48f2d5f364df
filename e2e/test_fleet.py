"""The served app end to end on the fleet lab: opened by URL, it compares the routers' hit
rates; switching the replicas' scheduler to the papers' engine (a widget, written to the URL)
redraws them: no prefix cache, no hits. The plan links to it, and its run can be stopped, under
`panel serve` and in the static site."""

from urllib.parse import parse_qs

import pytest
from conftest import plain_text, set_param, wait_ready
from site_fixtures import site_server, static_site, wait_live  # noqa: F401  (fixtures)

DATA = "(name) => Bokeh.documents[0].get_model_by_name(name).data"


def test_the_fleet_lab_redraws_when_a_widget_changes(page, served_app, guard):
    page.goto(
        f"{served_app}?lab=fleet&workload=few-shot&scenario=B&requests=60&replicas=2&routers=round-robin,exact-prefix"
    )
    wait_ready(page)
    bars = page.evaluate(DATA, "fleet-bars")
    assert bars["router"] == ["round-robin", "exact-prefix"]
    assert bars["hit_rate"][1] > bars["hit_rate"][0] and bars["regret"][0] > bars["regret"][1] == 0
    assert len(page.evaluate(DATA, "fleet-load")["load"]) == 2  # a line per replica
    page.locator(".kv-param-mode select").select_option("paper")  # no prefix cache on any replica
    page.wait_for_function("() => location.search.includes('mode=paper')")
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('fleet-bars').data.hit_rate.every(h => h === 0)")
    query = {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}
    assert query["mode"] == "paper" and query["replicas"] == "2" and query["lab"] == "fleet"
    assert guard.errors == []


# priced by the roofline: cost_model=auto would prune the A100-80GB's candidates (no SGLang kernels there),
# and the progress and cancel checks count on four candidates
PLAN = (
    "lab=plan&model=llama-3-8b&gpus=A100-80GB,H100-SXM&tps=1&weight_precisions=16-bit&schedulers=sglang"
    "&replicas=1,2&routers=cost&requests=60&rate=8&cost_model=roofline"
)


def cancel_midway(page, requests: str, timeout_ms: int) -> int:
    """Make the plan bigger (a widget change runs it), wait for its bar to move, cancel: the URL's
    state is drawn again. Returns the bar's value when cancelled (of 1000)."""
    before = page.evaluate("location.search")
    set_param(page, "requests", requests)
    bar = page.locator("progress.kv-progress")
    bar.wait_for(state="visible", timeout=30_000)
    for _ in range(300):  # the plan reports each candidate as it finishes
        if int(bar.get_attribute("value") or 0) > 0:
            break
        page.wait_for_timeout(100)
    value = int(bar.get_attribute("value"))
    page.locator(".kv-cancel button").click()
    plain_text(page, "kv-message").filter(has_text="run cancelled").wait_for(timeout=timeout_ms)
    wait_ready(page)
    assert page.evaluate("location.search") == before
    return value


def follow_and_come_back(page, row: int, link: str, requests: str) -> None:
    """Row `row` of the plan's front opens the fleet lab (button `link`) with its configuration and
    the plan's workload, whose TTFT p90 is the plan's; Back returns to the plan as it was."""
    plan_search = page.evaluate("location.search")
    front = page.evaluate(DATA, "plan-pareto")
    key, ttft_s = front["c0"][row], float(front["c3"][row])
    button = page.locator(f"{link} button")
    assert key in button.inner_text()
    button.click()
    page.wait_for_function("() => location.search.includes('lab=fleet')")
    wait_ready(page)
    query = {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}
    gpu, tp, _, _, mode, replicas, router = key.split("/")
    assert (query["gpu"], query["tp"], query["mode"], query["replicas"], query["routers"]) == (
        gpu,
        tp[2:],
        mode,
        replicas[1:],
        router,
    )
    assert (query["model"], query["requests"], query["rate"], query["workload"]) == (
        "llama-3-8b",
        requests,
        "8.0",
        "sharegpt",
    )
    # (on a loaded machine the table's cells may arrive a patch after the status says ready)
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('fleet-table')?.data.c0 !== undefined")
    table = page.evaluate(DATA, "fleet-table")
    assert table["c0"] == [router]
    p90_ms = float(table["c2"][0].split(" / ")[1])  # TTFT p50 / p90 / p99 (ms)
    assert p90_ms == pytest.approx(1e3 * ttft_s, rel=0.01)  # the plan's figure, each shown to 3 digits
    page.go_back()
    page.wait_for_function("s => location.search === s", arg=plan_search)
    wait_ready(page)
    page.locator(f"{link} button").wait_for()
    assert page.evaluate(DATA, "plan-pareto")["c0"][row] == key


def test_the_plan_links_to_the_fleet_lab_and_back(page, served_app, guard):
    """The plan's cheapest (the front's first row) opens the fleet lab, and Back returns."""
    page.goto(f"{served_app}?{PLAN}")
    wait_ready(page)
    follow_and_come_back(page, 0, ".kv-plan-open-cheapest", "60")
    assert guard.errors == []


def test_a_plan_shows_its_progress_and_stops_between_candidates(page, served_app):
    """The plan runs through the app's runner: its bar moves as candidates finish, and cancel
    stops it and draws the URL's state again."""
    bigger = (
        PLAN.replace("tps=1", "tps=1,2").replace("=sglang", "=vllm-v1,sglang").replace("replicas=1,2", "replicas=1,2,3")
    )
    page.goto(f"{served_app}?{bigger}")
    wait_ready(page)
    # 24 candidates of 1,500 requests: about 8 s by the estimate
    assert 0 < cancel_midway(page, "1500", 10_000) < 1000


def test_the_plan_in_the_static_site(page, static_site, guard):
    """The same in the static site (Python in the page's worker: the plan's serial backend): a
    bigger plan's bar moves as candidates finish, cancel stops it (the URL's state drawn again)
    and the page still answers; the plan run again opens a front row in the fleet lab with the
    row's figures, and Back returns to the plan."""
    url = f"{static_site}?{PLAN}"
    page.goto(url)
    wait_live(page)
    page.evaluate("() => navigator.serviceWorker.ready.then(() => null)")
    page.goto(url)  # cross-origin isolated from the second visit on: cancel stops Python in place
    wait_live(page)
    assert page.evaluate("() => crossOriginIsolated")
    wait_ready(page)
    # 4 candidates of 1,500 requests: the bar moves by quarters; a candidate done, one left at least
    assert cancel_midway(page, "1500", 30_000) in (250, 500, 750)
    assert page.locator(".kv-param-requests input").first.input_value() == "60"
    set_param(page, "requests", "80")  # run again
    page.wait_for_function("() => location.search.includes('requests=80')", timeout=60_000)
    wait_ready(page)
    row = len(page.evaluate(DATA, "plan-pareto")["c0"]) - 1  # the front's last row: the fastest
    follow_and_come_back(page, row, f".kv-plan-open-{row}", "80")
    assert guard.errors == []


def test_the_fleet_and_the_plan_open_their_headline_figures_formulas(page, served_app):
    """A router's throughput and the cheapest fleet's cost open their arithmetic with the run's values."""
    import kvweb.labs  # noqa: F401  (registers every lab)
    from kvweb.lab import LABS

    fleet = LABS["fleet"](requests=40)
    explained = fleet.explain(fleet.run())
    page.goto(f"{served_app}?lab=fleet&requests=40")
    wait_ready(page)
    text = plain_text(page, "kv-fleet-explain-text")
    text.filter(has_text="round-robin: throughput = output tokens ÷ simulated time").wait_for()
    assert text.inner_text() == "\n\n".join(f"{r}: {e.text()}" for r, e in explained["throughput_tok_s"].items())
    plan = LABS["plan"](requests=30, replicas="1", gpus="H100-SXM", tps="1,2")
    best = plan.run()["cheapest"]
    page.goto(f"{served_app}?lab=plan&requests=30&replicas=1&gpus=H100-SXM&tps=1,2")
    wait_ready(page)
    cost = plain_text(page, "kv-plan-explain-text")
    cost.filter(has_text="cost per hour = GPUs × dollars per GPU-hour").wait_for()
    # one H100: cost_model=auto prices it by measured kernels and counts memory as vLLM does (the roofline needs two)
    assert cost.inner_text().splitlines()[:3] == [
        f"{best['key']}: cost per hour = GPUs × dollars per GPU-hour",
        "GPUs = 1; dollars per GPU-hour = 3 $",
        "= 3 $",
    ]
