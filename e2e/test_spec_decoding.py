"""The served app end to end on speculative decoding (vLLM V1 and SGLang, issue 38 part 1): the
URL's spec_tokens and acceptance run vLLM V1 and SGLang with drafts, the papers' engine says it does
not model it, the table gives the tokens kept a step and the capacity held ahead, a line the blocks
(vLLM) or token slots (SGLang) left beside the drafter's layer, and the memory map shows vLLM's
blocks held ahead for lookahead in their own colour, at the step the library's trace says, while
SGLang's step line says how many draft and verify slots its last step took and freed."""

from conftest import plain_text, table_header, table_rows, wait_ready, wait_until

from app.views.schedulers import LOOKAHEAD, STATES
from kvweb.labs.schedulers import SchedulersLab
from kvweb.serving.loop.continuous_batching import AHEAD

URL = "?lab=schedulers&spec_tokens=2&acceptance=0.8"
STATE = "(name) => Array.from(Bokeh.documents[0].get_model_by_name(name).data.state)"


def table(page) -> dict:
    header = table_header(page, "kv-schedulers-table")
    return {row[0]: dict(zip(header[1:], row[1:])) for row in table_rows(page, "kv-schedulers-table")}


def test_drafts_in_the_url_show_tokens_a_step_and_blocks_held_ahead(page, served_app, guard):
    result = SchedulersLab(spec_tokens=2, acceptance="0.8").run()  # the run the page shows
    v1, sglang = result["modes"]
    frames, at = v1["trace"]["frames"], result["timeline"]["frames"][0]
    step = next(i for i, f in enumerate(at) if frames[f]["owner"].count(AHEAD))  # a step whose map holds some
    page.goto(f"{served_app}{URL}&step={step}")
    wait_ready(page)
    rows = table(page)
    kept = rows["speculative decoding: tokens kept per request a step"]
    assert kept == {
        "paper": "-",
        "vllm-v1": f"{v1['spec']['tokens_per_step']:.2f}",
        "sglang": f"{sglang['spec']['tokens_per_step']:.2f}",
    }
    assert 1.0 < float(kept["vllm-v1"]) < 3.0
    ahead = rows["KV held ahead for lookahead, whole blocks (time avg)"]
    assert ahead["vllm-v1"] == f"{100 * v1['spec']['ahead_frac']:.2f} %"
    assert ahead["sglang"] == "0.00 %"  # its rejected drafts' slots are freed in their step
    assert rows["throughput (tokens/s)"]["paper"] == "-"
    line = plain_text(page, "kv-schedulers-spec").inner_text()
    said = f"vllm-v1: speculative decoding, 2 draft tokens a step (acceptance 0.8, 0.8): {kept['vllm-v1']} tokens"
    assert said in line and f"{v1['spec']['kv_blocks']:,} blocks instead of {result['kv_blocks']:,}" in line
    d = sglang["spec"]
    assert (
        f"sglang: speculative decoding, 2 draft tokens a step (acceptance 0.8, 0.8): {kept['sglang']} tokens a step; "
        f"each decode step takes 2 slots a request for the drafts (handed back once drafted) and 3 to verify, and "
        f"frees the rejected ones in the same step: {d['rejected_slots']:,} of {d['verify_slots']:,} verify slots"
        in line
    )
    assert f"{d['kv_slots']:,} token slots instead of {result['scenario']['kv_capacity_tokens']:,}" in line
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('step') === '{step}'")
    shown = page.evaluate(STATE, "schedulers-vllm-v1-cells")
    assert shown.count(LOOKAHEAD) == frames[at[step]]["owner"].count(AHEAD) > 0
    assert LOOKAHEAD not in page.evaluate(STATE, "schedulers-sglang-cells")  # SGLang holds no slot ahead
    held_ahead, steps = STATES[LOOKAHEAD][0], plain_text(page, "kv-schedulers-step").inner_text()
    assert f"{held_ahead} {shown.count(LOOKAHEAD)}" in steps and f"{held_ahead} 0" in steps
    slots = {k: d["at_frames"][k][result["timeline"]["frames"][1][step]] for k in ("drafts", "verify", "rejected")}
    assert slots["verify"] > 0 and (
        f"sglang: its last decode step took {slots['drafts']:,} slots for drafts (handed back once drafted) and "
        f"{slots['verify']:,} to verify, and freed the {slots['rejected']:,} rejected in the same step" in steps
    )
    assert guard.errors == []


def test_a_sweep_of_draft_lengths_names_the_one_that_pays_most(page, served_app, guard):
    """Under load and a low acceptance, TPOT p50 falls to a shortest k and rises after it: the line
    names the library's best k with its TPOT beside no drafts', and the figure draws every k, a line
    for each engine (vLLM V1 and SGLang), each one's best k starred."""
    values = {"workload": "sharegpt", "rate": "20", "spec_tokens": "5", "acceptance": "0.3", "spec_sweep": "true"}
    swept = SchedulersLab(**{**values, "rate": 20.0, "spec_tokens": 5, "spec_sweep": True}).run()["spec_sweep"]
    mode, s = "vllm-v1", swept["vllm-v1"]
    tpot = {p["k"]: p["tpot_p50_s"] for p in s["points"]}
    assert 0 < s["best_k"] < 5 and tpot[5] > tpot[s["best_k"]]  # longer drafts stop paying here
    page.goto(served_app + "?lab=schedulers&" + "&".join(f"{k}={v}" for k, v in values.items()))
    wait_ready(page)
    line = plain_text(page, "kv-schedulers-sweep").inner_text()
    best = s["best_k"]
    assert f"{mode}: draft lengths 0 to 5 at acceptance 0.3: the lowest TPOT p50 is at k = {best} " in line
    assert f"({1000 * tpot[best]:.2f} ms, {1000 * tpot[0]:.2f} ms without drafts)" in line
    sglang = swept["sglang"]  # swept beside it, its line in its own colour
    assert f"sglang: draft lengths 0 to 5 at acceptance 0.3: the lowest TPOT p50 is at k = {sglang['best_k']} " in line
    drawn = "() => Array.from(Bokeh.documents[0].get_model_by_name('schedulers-spec-sweep-{0}').data.{1})"
    for m in ("vllm-v1", "sglang"):
        assert page.evaluate(drawn.format(m, "k")) == [0, 1, 2, 3, 4, 5]
    stars = page.evaluate(drawn.format("best", "k"))
    assert stars == [s["best_k"], sglang["best_k"]] and guard.errors == []


def test_a_draft_model_in_the_url_is_named_with_the_blocks_it_leaves(page, served_app, guard):
    """drafter=llama-3.1-8b drafting for llama-3.1-70b on 4 x H100: the line names the draft model,
    its weights a GPU and the blocks left beside its 32 layers, as the library's run says."""
    values = {"scenario": "B", "model": "llama-3.1-70b", "tp": 4, "spec_tokens": 3, "drafter": "llama-3.1-8b"}
    result = SchedulersLab(**values).run()
    v1 = next(m for m in result["modes"] if m["mode"] == "vllm-v1")
    page.goto(served_app + "?lab=schedulers&" + "&".join(f"{k}={v}" for k, v in values.items()))
    wait_ready(page)
    line = plain_text(page, "kv-schedulers-spec").inner_text()
    assert (
        f"vllm-v1: speculative decoding, 3 draft tokens a step (acceptance 0.8, 0.8, 0.8): "
        f"{v1['spec']['tokens_per_step']:.2f} tokens" in line
    )
    assert (
        f"the llama-3.1-8b drafter (4.01 GB of weights a GPU) keeps its layers' KV in the same blocks: "
        f"{v1['spec']['kv_blocks']:,} blocks instead of {result['kv_blocks']:,}" in line
    )
    assert v1["spec"]["kv_blocks"] < 0.7 * result["kv_blocks"]
    box = page.locator(".kv-param-drafter select").first
    assert box.is_enabled() and box.input_value() == "llama-3.1-8b"
    page.goto(f"{served_app}?lab=schedulers&drafter=mtp")  # no drafts: the drafter is not read
    wait_ready(page)
    assert wait_until(lambda: page.locator(".kv-param-drafter select").first.is_disabled())
    assert guard.errors == []
