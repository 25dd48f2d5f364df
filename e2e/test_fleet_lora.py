"""The served app end to end on LoRA adapters in the fleet (issue 38, item 2): the URL's loras and
max_loras run every vLLM V1 replica with adapter slots, and the routers' table gives each router's
adapter loads (all replicas' and each one's) and the adapters in each replica's slots, as the
library computes them, in English and in Chinese; the plan's table names the pruned SGLang
candidates' reason and each simulated candidate's adapter loads."""

from conftest import table_header, table_rows, wait_ready

from kvweb.labs.fleet import FleetLab
from kvweb.labs.plan import PlanLab

PARAMS = dict(mode="vllm-v1", loras=8, max_loras=2, replicas=2, requests=60, routers="round-robin,lora-affinity")
URL = "?lab=fleet&" + "&".join(f"{k}={v}" for k, v in PARAMS.items())


def expected() -> dict[str, tuple[str, str]]:
    """Per router, the two cells worked out from the library's run the page shows."""
    result = FleetLab(**PARAMS).run()
    out = {}
    for row in result["routers"]:
        per = [p["lora"] for p in result["per_replica"][row["router"]]]
        assert row["adapter_loads"] == sum(p["loads"] for p in per)
        loads = f"{row['adapter_loads']:,} ({' / '.join(str(p['loads']) for p in per)})"
        out[row["router"]] = (loads, " | ".join(", ".join(map(str, p["in_slots"])) or "-" for p in per))
    return out


def shown(page) -> dict[str, tuple[str, str]]:
    header = table_header(page, "kv-fleet-table")
    return {row[0]: tuple(row[len(header) - 2 :]) for row in table_rows(page, "kv-fleet-table")}


def test_each_router_shows_its_adapter_loads_and_each_replicas_slots(page, served_app, guard):
    want = expected()
    assert int(want["round-robin"][0].split()[0]) > int(want["lora-affinity"][0].split()[0])
    page.goto(f"{served_app}{URL}")
    wait_ready(page)
    header = table_header(page, "kv-fleet-table")
    assert header[-2:] == ["LoRA adapter loads: all (per replica)", "LoRA adapters in each replica's slots"]
    assert shown(page) == want
    assert guard.errors == []


def test_the_adapter_columns_in_chinese(page, served_app, guard):
    want = expected()
    page.goto(f"{served_app}{URL}&lang=zh")
    wait_ready(page)
    header = table_header(page, "kv-fleet-table")
    assert header[-2:] == ["LoRA 适配器 (adapter) 加载次数：总计（各副本）", "各副本槽位中的 LoRA 适配器 (adapter)"]
    assert shown(page) == want
    assert guard.errors == []


PLAN = dict(
    model="llama-3.1-8b",
    gpus="H100-SXM",
    tps="1",
    weight_precisions="16-bit",
    schedulers="paper,vllm-v1,sglang",
    replicas="2",
    routers="round-robin,lora-affinity",
    loras=8,
    max_loras=2,
    requests=50,
    rate=4.0,
    cost_model="roofline",
)


def test_the_plan_prunes_the_papers_engine_by_name_and_shows_each_candidates_adapter_loads(page, served_app, guard):
    result = PlanLab(**PLAN).run()
    want = {
        r["key"]: (f"{r['adapter_loads']:,}" if r["pruned"] is None else "", r["pruned"]) for r in result["candidates"]
    }
    page.goto(f"{served_app}?lab=plan&" + "&".join(f"{k}={v}" for k, v in PLAN.items()))
    wait_ready(page)
    header = table_header(page, "kv-plan-candidates")
    assert header[-1] == "LoRA adapter loads"
    rows = {row[0]: row for row in table_rows(page, "kv-plan-candidates")}
    assert {k: r[-1] for k, r in rows.items()} == {k: w[0] for k, w in want.items()}
    pruned = [k for k, w in want.items() if w[1] is not None]
    assert len(pruned) == 2 and all("/paper/" in k and rows[k][-2] == "runs no LoRA adapters" for k in pruned)
    assert sum("/sglang/" in k or "/vllm-v1/" in k for k in rows) == 4 and all(
        rows[k][-1] for k in rows if k not in pruned
    )
    assert guard.errors == []
