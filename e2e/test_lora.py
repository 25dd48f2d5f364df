"""The served app end to end on LoRA adapters (vLLM V1 and SGLang, issue 38 item 2): the URL's loras
and max_loras run vLLM V1 and SGLang with adapters, the papers' engine says it does not model them,
the table gives the KV beside the adapters' slots (vLLM's blocks, SGLang's token slots) and the
adapters loaded, a line per engine the slots' bytes, and the step's line the adapters in GPU slots
and the requests waiting for a slot at the step the library's trace says, and under each engine's map
a band of its adapter slots, each named by what the trace has in it at the step (the papers' engine's
map a short title with its reason inside), in English and in Chinese."""

from conftest import plain_text, table_header, table_rows, wait_ready

from kvweb.labs.schedulers import SchedulersLab

URL = "?lab=schedulers&loras=8&max_loras=2"


def table(page) -> dict:
    header = table_header(page, "kv-schedulers-table")
    return {row[0]: dict(zip(header[1:], row[1:])) for row in table_rows(page, "kv-schedulers-table")}


def waiting_step(result: dict) -> tuple[int, dict[str, tuple[int, int]]]:
    """A step at which requests wait for a slot in vLLM V1, and each engine's (adapters in slots,
    requests waiting) there."""
    frames = dict(zip((m["mode"] for m in result["modes"]), result["timeline"]["frames"]))
    loras = {m["mode"]: m["lora"] for m in result["modes"]}
    step = next(i for i, f in enumerate(frames["vllm-v1"]) if loras["vllm-v1"]["skipped"][f] > 0)
    at = {mode: frames[mode][step] for mode in loras}
    return step, {mode: (lora["in_slots"][at[mode]], lora["skipped"][at[mode]]) for mode, lora in loras.items()}


SLOTS = """() => {
    const doc = Bokeh.documents[0], note = (mode) => doc.get_model_by_name(`${mode}-map-note`).text;
    const slots = (mode) => doc.get_model_by_name(`schedulers-${mode}-lora-slots`).data;
    const band = (mode) => ({names: [...slots(mode).name], bytes: [...slots(mode).bytes], heading: note(mode)});
    return {'vllm-v1': band('vllm-v1'), sglang: band('sglang'), paper: note('paper'),
            paperTitle: doc.get_model_by_name('schedulers-paper-map').title.text};
}"""


def slot_names(result: dict, step: int, empty: str, base: str) -> dict[str, list[str]]:
    """What each engine's slots hold at the step, as its map names it."""
    frames = dict(zip((m["mode"] for m in result["modes"]), result["timeline"]["frames"]))
    return {
        m["mode"]: [f"lora-{a}" if a > 0 else base if a else empty for a in m["lora"]["slots"][frames[m["mode"]][step]]]
        for m in result["modes"]
    }


def test_adapters_in_the_url_show_their_slots_and_the_requests_waiting_for_one(page, served_app, guard):
    result = SchedulersLab(loras=8, max_loras=2).run()  # the run the page shows
    lora, sglang = (m["lora"] for m in result["modes"])
    step, at_step = waiting_step(result)
    page.goto(f"{served_app}{URL}&step={step}")
    wait_ready(page)
    rows = table(page)
    assert rows["KV blocks beside the LoRA adapters' slots"] == {
        "paper": "-",
        "vllm-v1": f"{lora['kv_blocks']:,}",
        "sglang": f"{sglang['kv_tokens']:,} token slots",
    }
    loaded = rows["LoRA adapters loaded over the host link / seconds"]
    assert loaded["vllm-v1"] == f"{lora['loads']:,} / {lora['load_s']:.3f}" and lora["loads"] >= 8
    assert loaded["sglang"] == f"{sglang['loads']:,} / {sglang['load_s']:.3f}" and sglang["loads"] >= 8
    assert rows["throughput (tokens/s)"]["paper"] == "-" and rows["throughput (tokens/s)"]["sglang"] != "-"
    line = plain_text(page, "kv-schedulers-lora").inner_text()
    slot_mb = f"{lora['slot_bytes'] / 1e6:,.1f}"
    said = f"vllm-v1: 8 LoRA adapters of rank 16 on q, k, v, o; max_loras 2: 2 slots of {slot_mb} MB"
    assert said in line and f"{lora['kv_blocks']:,} blocks instead of {result['kv_blocks']:,}" in line
    said = (
        f"sglang: 8 LoRA adapters of rank 16 on q, k, v, o; max_loras_per_batch 2: 2 slots of {slot_mb} MB "
        "beside the KV cache (the base model counts as an adapter and starts in one of them), "
        f"{sglang['kv_tokens']:,} token slots instead of {result['scenario']['kv_capacity_tokens']:,}"
    )
    assert said in line
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{step}'")
    for mode, (in_slots, waiting) in at_step.items():
        shown = f"{mode}: LoRA adapters: {in_slots} in GPU slots, requests waiting for a slot: {waiting}"
        assert shown in plain_text(page, "kv-schedulers-step").inner_text()
    band = page.evaluate(SLOTS)
    names = slot_names(result, step, "empty", "base model")
    for mode, lora_of in (("vllm-v1", lora), ("sglang", sglang)):
        assert band[mode]["names"] == names[mode] and len(names[mode]) == 2
        assert band[mode]["bytes"] == [lora_of["slot_bytes"]] * 2
    tokens, blocks = f"{lora['slot_kv_tokens']:,.0f}", f"{lora['slot_kv_tokens'] / result['block_size']:,.3g}"
    heading = f"LoRA adapter slots: 2 x {slot_mb} MB, each the KV of {tokens} tokens"
    assert band["vllm-v1"]["heading"] == f"{heading} ({blocks} blocks)" and band["sglang"]["heading"] == heading
    assert band["paperTitle"] == "paper: not run" and band["paper"] == "it does not model LoRA\nadapters"
    assert guard.errors == []


def test_the_adapters_lines_in_chinese(page, served_app, guard):
    result = SchedulersLab(loras=8, max_loras=2).run()
    step, at_step = waiting_step(result)
    in_slots, waiting = at_step["vllm-v1"]
    page.goto(f"{served_app}{URL}&step={step}&lang=zh")
    wait_ready(page)
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{step}'")
    shown = f"vllm-v1: LoRA 适配器：GPU 槽位中 {in_slots} 个，等待槽位的请求 {waiting} 个"
    assert shown in plain_text(page, "kv-schedulers-step").inner_text()
    lines = plain_text(page, "kv-schedulers-lora").inner_text()
    assert "个秩 (rank) 为 16 的 LoRA 适配器" in lines and "max_loras_per_batch 2：KV cache 旁有 2 个" in lines
    assert "LoRA 适配器槽位旁的 KV 块数" in table(page)
    band = page.evaluate(SLOTS)
    assert band["vllm-v1"]["names"] == slot_names(result, step, "空", "基础模型 (base model)")["vllm-v1"]
    assert band["sglang"]["names"] == slot_names(result, step, "空", "基础模型 (base model)")["sglang"]
    heading = band["vllm-v1"]["heading"]
    assert heading.startswith("LoRA 适配器槽位：2 x ") and heading.endswith("个块）的 KV")
    assert band["paperTitle"] == "paper: 未运行" and band["paper"] == "它不模拟 LoRA 适配器 (adapter)"
    assert guard.errors == []
