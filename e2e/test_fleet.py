"""The served app end to end on the fleet lab: opened by URL, it compares the routers' hit
rates; switching the replicas' scheduler to the papers' engine (a widget, written to the URL)
redraws them: no prefix cache, no hits."""
from urllib.parse import parse_qs

from conftest import wait_ready

DATA = "(name) => Bokeh.documents[0].get_model_by_name(name).data"


def test_the_fleet_lab_redraws_when_a_widget_changes(page, served_app, guard):
    page.goto(f"{served_app}?lab=fleet&workload=few-shot&scenario=B&requests=60&replicas=2"
              "&routers=round-robin,exact-prefix")
    wait_ready(page)
    bars = page.evaluate(DATA, "fleet-bars")
    assert bars["router"] == ["round-robin", "exact-prefix"]
    assert bars["hit_rate"][1] > bars["hit_rate"][0] and bars["regret"][0] > bars["regret"][1] == 0
    assert len(page.evaluate(DATA, "fleet-load")["load"]) == 2  # a line per replica
    page.locator(".kv-param-mode select").select_option("paper")  # no prefix cache on any replica
    page.wait_for_function("() => location.search.includes('mode=paper')")
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('fleet-bars').data.hit_rate"
                           ".every(h => h === 0)")
    query = {k: v[0] for k, v in parse_qs(page.evaluate("location.search").lstrip("?")).items()}
    assert query["mode"] == "paper" and query["replicas"] == "2" and query["lab"] == "fleet"
    assert guard.errors == []
