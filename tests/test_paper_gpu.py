"""The paper GPU's assumptions, one definition in every lab that prices work, and the rule that a
configuration which cannot run says so instead of being priced (issue 10, parts 2 and 3)."""

import pytest

import kvweb.labs  # noqa: F401
from kvweb.gpu import GPUS, MODELS, CostModel
from kvweb.lab import LABS, PAPER_GPU, param_names
from kvweb.parsing import make
from kvweb.labs.paper_gpu import PaperGPULab

PRICED = ("roofline", "engine", "max-rate", "sweep", "recovery", "prefill-savings")
ASSUMPTIONS = [
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
CHOICES = ["tp", "weight_precision", "kv_precision"]  # shown beside each priced lab's own parameters


def test_every_priced_lab_has_the_same_assumptions_and_no_other_lab_has_them():
    assert {name for name, cls in LABS.items() if issubclass(cls, PaperGPULab)} >= set(PRICED)
    for name, cls in LABS.items():
        folded = [n for n in param_names(cls) if cls.param[n].precedence == PAPER_GPU]
        if issubclass(cls, PaperGPULab):
            assert folded == ASSUMPTIONS and set(CHOICES) <= set(param_names(cls)), name
            assert all(cls.param[n].precedence is None for n in CHOICES), name  # shown, not folded
            assert cls().assumptions() == PaperGPULab().assumptions(), name
        else:
            assert folded == [] and not set(CHOICES) & set(param_names(cls)), name


def test_the_defaults_are_the_lectures_and_the_cost_models():
    lab = PaperGPULab()
    assert (lab.compute_eff, lab.step_overhead_ms, lab.memory_eff, lab.mem_util) == (0.7, 0.5, 0.8, 0.9)
    assert (lab.block_overhead_us, lab.host_link_gb_s, lab.swap_copies, lab.ignore_weights) == (
        10.0,
        0.0,
        "per-block",
        False,
    )
    assert (lab.tp, lab.weight_precision, lab.kv_precision, lab.interconnect_gb_s, lab.allreduce_latency_us) == (
        1,
        "16-bit",
        "16-bit",
        0.0,
        10.0,
    )
    assert lab.cost_model("H100-SXM", MODELS["llama-3-8b"]) == CostModel(GPUS["H100-SXM"], MODELS["llama-3-8b"])


@pytest.mark.parametrize("lab", ["recovery", "roofline"])
def test_the_recompute_figure_follows_the_assumptions(lab):
    # 2048 tokens of Llama-3-8B on H100-SXM: FLOPs / (989e12 x compute_eff) + step overhead
    flops = 2 * 32 * 218_103_808 * 2048 + 2 * 4096 * 128_256 + 4 * 32 * 32 * 128 * 2048 * 2049 / 2
    texts = {"model": "llama-3-8b", "gpu": "H100-SXM", "tokens": "2048"}
    r = make(lab, texts).run()
    assert r["recompute_s"] == pytest.approx(flops / (989e12 * 0.7) + 0.5e-3)
    r = make(lab, {**texts, "compute_eff": "0.5", "step_overhead_ms": "1"}).run()
    assert r["recompute_s"] == pytest.approx(flops / (989e12 * 0.5) + 1e-3)


def test_the_host_link_and_copy_granularity_reach_the_engine():
    base = {"scenario": "A", "rate": "10", "requests": "60", "preemption": "swap", "compare": "none"}
    plain = make("engine", base).run()
    slow = make("engine", {**base, "host_link_gb_s": "5", "swap_copies": "per-layer-kv"}).run()
    assert plain["swapped_bytes"] > 0  # scenario A at 10/s does preempt
    assert slow["sim_time_s"] > plain["sim_time_s"]


def test_llama_70b_on_one_h100_is_not_priced_as_if_it_ran():
    r = make("roofline", {"model": "llama-3-70b", "gpu": "H100-SXM"}).run()
    assert r["fits"] is False and r["kv_capacity_tokens"] == 0
    assert r["fit_note"].startswith("llama-3-70b does not fit on one H100-SXM: its weights take 141.1 GB and 72.0 GB")
    assert not {"decode_step_s", "decode_tokens_per_s", "prefill_s", "kv_capacity_blocks", "roofline"} & set(r)
    rec = make("recovery", {"model": "llama-3-70b", "gpu": "H100-SXM"}).run()
    assert rec["fits"] is False and "recompute_s" not in rec and "per_block_size" not in rec
    assert all(not g["fits"] and g["rows"] == [] for g in rec["by_gpu"])  # 126.9 GB usable on an H200 is too little
    savings = make("prefill-savings", {"model": "llama-3-70b"}).run()
    assert savings["fits"] is False and "prefill_s_no_cache" not in savings


def test_the_what_if_is_explicit_and_labelled():
    r = make("roofline", {"model": "llama-3-70b", "gpu": "H100-SXM", "ignore_weights": "true"}).run()
    assert r["fits_what_if"] is True and r["fits_for_real"] is False and "fits" not in r
    assert r["fit_note"].startswith("what-if:") and "for real it does not fit" in r["fit_note"]
    assert r["kv_capacity_tokens"] == 72e9 // (2 * 80 * 8 * 128 * 2) and r["decode_tokens_per_s"] > 0
    assert make("roofline", {"model": "llama-3-8b", "gpu": "H100-SXM"}).run()["fit_note"] is None


@pytest.mark.parametrize("lab", ["engine", "max-rate", "sweep"])
def test_a_serving_lab_whose_model_does_not_fit_serves_nothing(lab):
    # OPT-13B-like's 26.2 GB of weights do not fit half of an A100-40GB
    r = make(lab, {"scenario": "A", "mem_util": "0.5", "requests": "20"}).run()
    assert r["fits"] is False and r["kv_capacity_tokens"] == 0 and "does not fit on one A100-40GB" in r["fit_note"]
    assert r["scenario"]["name"] == "A"
    assert not {"throughput_tok_s", "max_rate", "rows"} & set(r)
    ok = make(
        lab,
        {"scenario": "A", "requests": "20", "rel_tol": "0.5"}
        if lab == "max-rate"
        else {"scenario": "A", "requests": "20"},
    ).run()
    assert ok["fits"] is True and ok["fit_note"] is None and ok["kv_capacity_tokens"] == 11_969


def test_a_decode_batch_that_does_not_fit_is_priced_as_a_named_what_if():
    r = make("roofline", {}).run()  # 32 sequences x 1024 tokens = 32,768 > 11,969 tokens of KV
    assert r["decode_batch_fits"] is False and r["kv_capacity_tokens"] == 11_969
    assert {"decode_step_s_what_if", "decode_allreduce_s_what_if", "decode_tokens_per_s_what_if"} <= set(r)
    assert not {"decode_step_s", "decode_allreduce_s", "decode_tokens_per_s"} & set(r)
    assert r["decode_tokens_per_s_what_if"] == pytest.approx(32 / r["decode_step_s_what_if"])
    fits = make("roofline", {"batch": "8"}).run()  # 8 x 1024 = 8,192 tokens fit
    assert fits["decode_batch_fits"] is True and fits["decode_tokens_per_s"] == pytest.approx(8 / fits["decode_step_s"])
