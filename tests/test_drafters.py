"""Speculative decoding's drafters (kvweb/serving/schedulers/drafters.py, issue 38 item 1): EAGLE's head,
DeepSeek-V3's MTP module and a separate draft model, each with its weights and its layers' KV in the
target's blocks (hand-counted pools), the same lookahead slots, a draft model's passes priced by hand,
its blocks hashed without the next token, and the lab's choice, refusals and figures."""

from __future__ import annotations

import sys
from functools import cache
from typing import Any

import numpy as np
import pytest

import kvweb.labs  # noqa: F401
from kvweb.gpu.cost import CostModel
from kvweb.gpu.measured_cost import is_measured
from kvweb.gpu.specs import GPUS, MODELS
from kvweb.lab import ParamError
from kvweb.labs.schedulers import SchedulersLab
from kvweb.serving.load.workload import Request
from kvweb.serving.schedulers.drafters import drafter_blocks, drafter_refusal, make_drafter
from kvweb.serving.schedulers.spec_decode import Drafts, SpecV1Scheduler
from kvweb.serving.schedulers.v1_scheduler import V1Config
from test_spec_decoding import steps_of

LLAMA_4_H100 = CostModel(GPUS["H100-SXM"], MODELS["llama-3.1-70b"], tp=4)
DEEPSEEK_8_H200 = CostModel(GPUS["H200"], MODELS["deepseek-v3"], tp=8, weight_precision="fp8-block")
LLAMA_FP8_H200 = CostModel(GPUS["H200"], MODELS["llama-3.1-70b"], weight_precision="fp8")


def test_each_drafters_pool_on_four_h100s_by_hand():
    """llama-3.1-70b on 4 x H100 (16-bit): 72 GB usable a GPU less its weights' quarter
    (80 x 855,638,016 + 2 x 128,256 x 8192 = 70,552,387,584 parameters: 35,276,193,792 bytes) leaves
    36,723,806,208 bytes; a token's KV is 80 layers x 2 x 2 KV heads x 128 x 2 bytes = 81,920 a GPU.
    - no drafter: 448,288 tokens, 28,018 blocks of 16;
    - eagle: one layer (855,638,016 x 2 / 4 = 427,819,008 bytes) and its 1,024 bytes a token:
      36,295,987,200 / 82,944 = 437,596 tokens, 27,349 blocks;
    - llama-3.1-8b as a draft model: its own weights whole (32 x 218,103,808 + 2 x 128,256 x 4096 =
      8,029,995,008 parameters, 4,014,997,504 bytes a GPU), its 32 layers' 32,768 bytes a token in the
      same blocks (vLLM's one UniformTypeKVCacheSpecs group): 32,708,808,704 / 114,688 = 285,198
      tokens, 17,824 blocks: 36 % fewer than without it."""
    eagle, draft = make_drafter("eagle", LLAMA_4_H100.model), make_drafter("llama-3.1-8b", LLAMA_4_H100.model)
    assert LLAMA_4_H100.kv_bytes_free_per_gpu == 36_723_806_208
    assert (eagle.weight_bytes(LLAMA_4_H100), eagle.kv_bytes_per_token(LLAMA_4_H100)) == (427_819_008, 1024)
    assert (draft.weight_bytes(LLAMA_4_H100), draft.kv_bytes_per_token(LLAMA_4_H100)) == (4_014_997_504, 32_768)
    blocks = [drafter_blocks(LLAMA_4_H100, 16, d) for d in (None, eagle, draft)]
    assert blocks == [28_018, 27_349, 17_824]


def test_mtp_on_eight_h200s_by_hand():
    """deepseek-v3 on 8 x H200 in fp8-block: (671,025,397,760 - 1,853,358,080) x 1 byte + the
    embedding and head's 1,853,358,080 x 2 = 84,109,844,480 bytes a GPU; 126.9 GB usable leaves
    42,790,155,520; 61 latent layers of 576 x 2 bytes = 70,272 a token (whole on every GPU).
    MTP's module: one MoE layer (MLA 187,105,280 + 256 experts x 44,040,192 + the shared one +
    router 1,835,008 = 11,507,269,632 parameters: DeepSeek's "11.5B unique") and eh_proj
    (2 x 7168 x 7168 = 102,760,448), 1 byte each over 8 GPUs: 1,451,253,760 bytes; the embedding and
    head are the target's. Its one latent layer adds 1,152 bytes a token:
    - none: 608,921 tokens, 38,057 blocks;
    - mtp: 41,338,901,760 / 71,424 = 578,781 tokens, 36,173 blocks;
    - eagle (a head of the same layer, no eh_proj counted): 578,961 tokens, 36,185 blocks."""
    mtp, eagle = make_drafter("mtp", DEEPSEEK_8_H200.model), make_drafter("eagle", DEEPSEEK_8_H200.model)
    assert mtp.model.params - mtp.shared == 11_507_269_632 and mtp.unpriced == 102_760_448
    assert DEEPSEEK_8_H200.kv_bytes_free_per_gpu == 42_790_155_520
    assert (mtp.weight_bytes(DEEPSEEK_8_H200), mtp.kv_bytes_per_token(DEEPSEEK_8_H200)) == (1_451_253_760, 1152)
    blocks = [drafter_blocks(DEEPSEEK_8_H200, 16, d) for d in (None, mtp, eagle)]
    assert blocks == [38_057, 36_173, 36_185]


@pytest.mark.parametrize(
    "cost, drafter",
    [(LLAMA_FP8_H200, "eagle"), (LLAMA_FP8_H200, "llama-3.1-8b"), (DEEPSEEK_8_H200, "mtp")],
)
def test_every_drafter_holds_eagles_lookahead_slots(cost, drafter):
    """The scheduling rule is the same (vLLM's num_lookahead_tokens = k for EAGLE, MTP and a draft
    model): tests/test_spec_decoding.py's hand-checked request (prompt 30, k = 3, acceptance 0.6,
    seed 0) keeps the same KV and holds the same blocks over its first ten steps."""
    s = SpecV1Scheduler(cost, V1Config(512, prefix_caching=False), Drafts(3, (0.6,) * 3, 0, drafter))
    kv = [30, 31, 32, 34, 37, 39, 41, 42, 45, 47]
    blocks = [3, 3, 3, 3, 3, 3, 3, 3, 4, 4]
    assert steps_of(s, [Request(0, 0.0, 30, 40)])[:10] == [{0: (v, b)} for v, b in zip(kv, blocks)]


def test_a_draft_models_passes_in_a_step_by_hand():
    """llama-3.1-70b in FP8 on one H200 drafted by llama-3.1-8b (FP8, its embedding and LM head 16-bit):
    one request (prompt 100, output 2), k = 3, nothing accepted. After the verify step the draft model
    runs 3 forwards, each reading its weights (6,979,321,856 x 1 + 1,050,673,152 x 2 = 9,080,668,160
    bytes) and its KV (32 layers x 2 x 8 x 128 x 2 = 131,072 bytes a token): the first over the 4
    verified tokens after 100 (104 tokens of KV), then one token at contexts 102 and 103; memory-bound
    (the first pass's 2 x 8.03e9 x 4 FLOPs take 46 us at 1979 TFLOP/s x 0.7), each with its 0.5 ms:
    (3 x 9,080,668,160 + 131,072 x 309) / (4.8e12 x 0.8) = 7.104819 ms + 1.5 ms = 8.604819 ms."""
    s = SpecV1Scheduler(LLAMA_FP8_H200, V1Config(512, prefix_caching=False), Drafts(3, (0.0,) * 3, 0, "llama-3.1-8b"))
    drafted: list[float] = []
    s.run([Request(0, 0.0, 100, 2)], observer=lambda q, step: drafted.append(q.draft_s))
    by_hand = (3 * 9_080_668_160 + 131_072 * 309) / (4.8e12 * 0.8) + 3 * 0.5e-3
    assert drafted[1] - drafted[0] == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(8.6048192e-3, abs=1e-10)
    assert 2 * 8_029_995_008 * 4 / (1979e12 * 0.7) < 9_080_668_160 / (4.8e12 * 0.8)


def test_a_draft_models_blocks_are_hashed_without_the_next_token():
    """EAGLE's KV at a block's last position reads the token after it (vLLM hashes the block with it:
    a shared prefix of two whole blocks is found one block short); a draft model's does not (vLLM's
    num_hash_lookahead_tokens is 0 for it): B finds both blocks of A's 32 shared tokens."""
    shared = np.arange(1, 33)
    a, b = (np.concatenate([shared, np.arange(start, start + 15)]) for start in (100, 200))
    requests = [Request(0, 0.0, 42, 5, tokens=a), Request(1, 10.0, 42, 5, tokens=b)]  # prompt 42, output 5
    hits = []
    for drafter in ("eagle", "llama-3.1-8b"):
        s = SpecV1Scheduler(LLAMA_FP8_H200, V1Config(512, prefix_caching=True), Drafts(2, (0.5, 0.5), 0, drafter))
        s.run(requests)
        hits.append((s.lookahead_hashes, s.hit_tokens))
    assert hits == [(True, 16), (False, 32)]
    # MTP schedules as EAGLE (vLLM 0.33: use_eagle, num_hash_lookahead_tokens 1, no drafting slot)
    mtp = SpecV1Scheduler(DEEPSEEK_8_H200, V1Config(512, prefix_caching=True), Drafts(2, (0.5, 0.5), 0, "mtp"))
    assert (mtp.lookahead, mtp.lookahead_hashes, mtp.draft_slots) == (2, True, 0)


@pytest.mark.parametrize(
    "name, target, why",
    [
        ("mtp", "llama-3.1-70b", "it ships no MTP module; mtp drafts for deepseek-v3 only (use eagle)"),
        ("llama-3.1-70b", "llama-3.1-70b", "a draft model must be smaller (70.6 B parameters)"),
        ("qwen2.5-7b", "llama-3.1-70b", "and share its vocabulary (128,256 tokens): qwen2.5-7b has 7.6 B and 152,064"),
        ("qwen3-next-80b-a3b", "qwen3-235b-a22b", "qwen3-next-80b-a3b's layers mix kinds"),
    ],
)
def test_a_drafter_that_cannot_draft_is_refused_with_its_reason(name, target, why):
    assert why in drafter_refusal(name, MODELS[target])
    with pytest.raises(ValueError, match=f"drafter: {name} is not allowed with model {target}; "):
        make_drafter(name, MODELS[target])
    assert drafter_refusal("eagle", MODELS[target]) is None


@cache
def lab_run(drafter: str) -> dict[str, Any]:
    """llama-3.1-70b on 4 x H100 (roofline), 40 requests of scenario B with 3 drafts a step."""
    values = dict(scenario="B", model="llama-3.1-70b", tp=4, requests=40, spec_tokens=3, cost_model="roofline")
    return SchedulersLab(**values, drafter=drafter).run()


def test_the_lab_names_its_drafter_and_refuses_one_with_one_line():
    """The lab's `drafter`: read only with drafts; each run's figures name it and count its blocks;
    a draft model that does not fit, or cannot draft, is one line naming what is allowed."""
    assert "drafter" in SchedulersLab(drafter="mtp").ignored()
    SchedulersLab(drafter="mtp").check()  # no drafts: not read
    assert "drafter" not in SchedulersLab(spec_tokens=2).ignored()
    with pytest.raises(ParamError, match="^drafter: mtp is not allowed with model opt-13b-like; it ships no MTP"):
        SchedulersLab(spec_tokens=2, drafter="mtp").check()
    with pytest.raises(
        ParamError,
        match=r"^drafter: llama-3.1-8b is not allowed on 2 x H100-SXM; its weights \(8.0 GB a GPU\) leave no KV "
        r"cache beside llama-3.1-70b \(use eagle or more GPUs\)$",
    ):
        SchedulersLab(scenario="B", model="llama-3.1-70b", tp=2, spec_tokens=2, drafter="llama-3.1-8b").check()
    heads = "^drafter: qwen2.5-7b is not allowed on 8 x H100-SXM; its 28 query heads do not split over 8 GPUs"
    with pytest.raises(ParamError, match=heads):  # qwen2.5-72b's 64 do; at tp 4 the 7B's 28 split too
        SchedulersLab(scenario="B", model="qwen2.5-72b", tp=8, spec_tokens=2, drafter="qwen2.5-7b").check()
    SchedulersLab(scenario="B", model="qwen2.5-72b", tp=4, spec_tokens=2, drafter="qwen2.5-7b").check()
    runs = {d: lab_run(d)["modes"][0] for d in ("eagle", "llama-3.1-8b")}
    assert [(m["spec"]["drafter"], m["spec"]["kv_blocks"]) for m in runs.values()] == [
        ("eagle", 27_349),
        ("llama-3.1-8b", 17_824),
    ]
    # the same draws, the same tokens kept; a whole 8B model's passes cost each step more than one layer's
    assert runs["eagle"]["spec"]["kept"] == runs["llama-3.1-8b"]["spec"]["kept"]
    assert runs["eagle"]["tpot_s"]["p50"] < runs["llama-3.1-8b"]["tpot_s"]["p50"]


def test_a_draft_model_without_measured_kernels_has_its_passes_priced_by_the_roofline():
    """qwen2.5-7b at tp 4 (7 query heads and one KV head a GPU) has no measured attention table: its
    passes are priced by the roofline on the same GPUs and assumptions, the target's by its kernels;
    MXFP4 (experts only) is refused for a draft model without experts."""
    lab = SchedulersLab(scenario="B", model="qwen2.5-72b", tp=4, spec_tokens=2, drafter="qwen2.5-7b")
    lab.check()
    cost = lab.scheduler_cost("vllm-v1")
    passes = make_drafter("qwen2.5-7b", cost.model).cost(cost)
    assert is_measured(cost) and type(passes) is CostModel
    assert (passes.gpu, passes.tp, passes.mem_util, passes.model.name) == (cost.gpu, 4, cost.mem_util, "qwen2.5-7b")
    mxfp4 = dict(scenario="B", model="qwen3-235b-a22b", tp=8, weight_precision="mxfp4", spec_tokens=2)
    with pytest.raises(
        ParamError, match="^weight_precision mxfp4 quantizes routed experts only .*; qwen3-32b has none"
    ):
        SchedulersLab(**mxfp4, drafter="qwen3-32b").check()


@pytest.mark.skipif(sys.platform == "emscripten", reason="the app (Panel) is tested in CPython only")
def test_the_view_names_the_drafter_and_its_refusals_read_in_chinese():
    from app import i18n
    from app.i18n import tr_message
    from app.views.schedulers import spec_text

    result = lab_run("llama-3.1-8b")
    line = spec_text(result["modes"], result["kv_blocks"])
    assert line.endswith(
        "the llama-3.1-8b drafter (4.01 GB of weights a GPU) keeps its layers' KV in the same blocks: 17,824 blocks "
        "instead of 28,018"
    )
    refusals = []
    for values in (
        dict(spec_tokens=2, drafter="mtp"),
        dict(scenario="B", model="llama-3.1-70b", spec_tokens=2, drafter="qwen2.5-7b"),
        dict(
            scenario="B",
            model="qwen3-235b-a22b",
            tp=8,
            weight_precision="fp8",
            spec_tokens=2,
            drafter="qwen3-next-80b-a3b",
        ),
        dict(scenario="B", model="llama-3.1-70b", tp=2, spec_tokens=2, drafter="llama-3.1-8b"),
        dict(scenario="B", model="qwen2.5-72b", tp=8, spec_tokens=2, drafter="qwen2.5-7b"),
    ):
        with pytest.raises(ParamError) as error:
            SchedulersLab(**values).check()
        refusals.append(str(error.value))
    i18n.use("zh")
    try:
        assert spec_text(result["modes"], result["kv_blocks"]).endswith(
            "草稿器 (drafter) llama-3.1-8b（每个 GPU 4.01 GB 权重）把它各层的 KV 放在同样的块里：17,824 个块，而不是 28,018 个"
        )
        zh = [tr_message(line) for line in refusals]
    finally:
        i18n.use("en")
    assert (
        zh[0]
        == "drafter：mtp 不允许与模型 opt-13b-like 同用；它没有随模型发布的 MTP 模块；mtp 只为 deepseek-v3 起草（请用 eagle）"
    )
    assert zh[1].startswith(
        "drafter：qwen2.5-7b 不允许与模型 llama-3.1-70b 同用；草稿模型 (draft model) 必须更小（70.6 B 参数）"
    )
    assert zh[2].startswith(
        "drafter：qwen3-next-80b-a3b 不允许与模型 qwen3-235b-a22b 同用；qwen3-next-80b-a3b 的层混合了"
    )
    assert zh[4].startswith(
        "drafter：qwen2.5-7b 不允许用在 8 x H100-SXM 上；它的 28 个查询头 (query head) 不能均分到 8 个 GPU 上"
    )
    assert zh[3] == (
        "drafter：llama-3.1-8b 不允许用在 2 x H100-SXM 上；它的权重（每个 GPU 8.0 GB）使 llama-3.1-70b 旁边没有 KV cache "
        "的空间（请用 eagle 或更多 GPU）"
    )


def test_a_draft_model_takes_one_more_token_of_the_budget_a_request():
    """vLLM's draft-model input keeps one token more a request (`max_num_new_slots_for_drafting` = 1):
    with a budget of 7, two prompts of 3 tokens both run whole beside EAGLE (3 + 3); beside a draft
    model the first takes 3 + 1, and the second gets 3 - 1 = 2 tokens of its prompt (chunked)."""
    seen = []
    for drafter in ("eagle", "llama-3.1-8b"):
        config = V1Config(512, max_seqs=2, token_budget=7, prefix_caching=False)
        s = SpecV1Scheduler(LLAMA_FP8_H200, config, Drafts(2, (0.5, 0.5), 0, drafter))
        first: list = []
        s.run(
            [Request(0, 0.0, 3, 4), Request(1, 0.0, 3, 4)],
            observer=lambda q, step: (
                first or first.append((sorted(q.running), [(x.id, x.computed) for x in q.prefilling]))
            ),
        )
        seen.append(first[0])
    assert seen == [([0, 1], []), ([0], [(1, 2)])]
