"""Every label, explanation and message the app shows has a Simplified Chinese form."""

import ast
import re
import sys
from pathlib import Path

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import app  # noqa: E402
import kvweb.labs  # noqa: E402, F401
from app import i18n  # noqa: E402
from app.catalogs import source  # noqa: E402
from app.i18n import tr, tr_figure, tr_message  # noqa: E402
from app.pages.tour import INTRO, STEPS  # noqa: E402
from kvweb.exercises import EXERCISES  # noqa: E402
from kvweb.lab import LABS, param_names  # noqa: E402
from kvweb.reproduce import INTRO as REPORT_INTRO, reproduce  # noqa: E402

APP = Path(app.__file__).resolve().parent
PO = source("zh")
CJK = re.compile(r"[\u4e00-\u9fff]")
# Names that read the same in both languages (technical identifiers and units).
TECHNICAL = re.compile(r"^([a-z0-9_\-]+|[A-Z0-9\-]+|KV/token \(KiB\)|KiB|GB)$")


def read_catalog() -> list:
    from babel.messages.pofile import read_po

    with PO.open("rb") as f:
        return [m for m in read_po(f) if m.id]


CATALOG = read_catalog()
ZH = {m.id: m.string for m in CATALOG if not m.context}  # the plain entries, English -> Chinese


@pytest.fixture(autouse=True)
def chinese():
    i18n.use("zh")
    yield
    i18n.use("en")


def translated(text: str, translate=tr) -> bool:
    return bool(TECHNICAL.match(text)) or bool(CJK.search(translate(text)))


def lab_texts():
    for name, cls in sorted(LABS.items()):
        yield f"{name}: title", cls.title
        yield f"{name}: summary", cls.summary
        for p in param_names(cls):
            yield f"{name}: {p}", cls.param[p].doc


@pytest.mark.parametrize("where, text", list(lab_texts()), ids=lambda x: x if ":" in x else "")
def test_every_lab_title_summary_and_parameter_doc_has_chinese(where, text):
    assert text and text in ZH and CJK.search(ZH[text]), where


def literal_tr_calls():
    """Every tr("...") / tr_figure("...") with a literal argument anywhere in app/."""
    for path in sorted(APP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("tr", "tr_figure")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                context = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
                yield f"{path.name}:{node.lineno}", node.args[0].value, context


@pytest.mark.parametrize("where, text, context", list(literal_tr_calls()))
def test_every_app_label_has_chinese(where, text, context):
    if context:  # a template of ours, e.g. "{0}: {1}" -> "{0}：{1}"
        assert tr(text, context) != text, f"{where}: {text!r} ({context})"
    else:
        assert translated(text), f"{where}: {text!r}"


def test_tour_and_exercises_have_chinese():
    texts = [
        INTRO,
        *(s.title for s in STEPS),
        *(s.text for s in STEPS),
        *(label for s in STEPS for label, _ in s.links),
    ]
    texts += [t for e in EXERCISES for t in (e.title, e.question, e.explanation, e.check.prompt, *e.check.choices)]
    texts += [label for e in EXERCISES for label, _ in e.answer().lines]
    assert [t for t in texts if not translated(t, tr_figure)] == []


def test_report_has_chinese():
    report = reproduce(
        quick=True,
        only=[
            "paper-gpu",
            "external-fragmentation",
            "recovery",
            "few-shot",
            "fsm",
            "paged-vs-reserved",
            "swap-vs-recompute",
            "beam-search",
            "lecture",
        ],
    )
    texts = [report["title"], REPORT_INTRO, report["units"]]
    for s in report["sections"]:
        texts += [s["title"], s["paper"], *s["columns"], *(label for label, _ in s["figures"])]
        texts += [s["differs"]] if s["differs"] else []
        for c in s["charts"]:
            texts += [c["title"], c["x_label"], c["y_label"], *(x["name"] for x in c["series"])]
    assert [t for t in texts if t != "%" and not translated(t, tr_figure)] == []


def test_every_section_title_and_paper_quote_is_in_the_table():
    from kvweb.reproduce import EXPERIMENTS

    for e in EXPERIMENTS:
        assert e.title in ZH and e.paper in ZH and (not e.differs or e.differs in ZH), e.key


def test_the_app_reads_every_entry_of_the_catalog():
    """The catalog the app reads holds what the .po says: nothing stale."""
    assert len(CATALOG) > 700
    stale = [m.id for m in CATALOG if tr(m.id, m.context) != m.string]
    assert stale == []


def test_technical_terms_keep_their_english_name():
    for term, english in (
        ("Block tables", "block table"),
        ("copy-on-write", "copy-on-write"),
        ("Preemption", "preemption"),
        ("radix tree", "radix tree"),
        ("watermark", "watermark"),
    ):
        assert english in tr(term)


def test_messages_are_translated_and_keep_user_text():
    line = tr_message("block_size: '<b>x' is not allowed; expected an integer from 1 to 64; using the default")
    assert "<b>x" in line and "1 到 64 之间的整数" in line and "改用默认值" in line
    page = tr_message("page: 'zz' is not allowed; expected one of tour, exercises, report; using the default")
    assert "'zz'" in page and "以下之一" in page
    assert (
        tr_message("step: 'x' is not allowed; expected a whole number; using 0")
        == "step：'x' 不允许；应为 整数；改用 0"
    )
    assert (
        tr_message("the URL query is 9000 characters long; at most 8000 are read")
        == "URL 查询有 9000 个字符；至多读取 8000 个"
    )
    mxfp4 = tr_message(
        "weight_precision mxfp4 quantizes routed experts only (as gpt-oss ships); llama-3.1-8b has "
        "none: use 16-bit, fp8, fp8-block, int8 or int4; using the defaults for weight_precision"
    )
    assert mxfp4.startswith("weight_precision mxfp4 只量化路由专家（gpt-oss 的发布方式）；llama-3.1-8b 没有路由专家")


def test_fit_notes_are_translated():
    from kvweb.gpu import GPUS, MODELS, CostModel

    unfit = tr_message(CostModel(GPUS["H100-SXM"], MODELS["llama-3-70b"]).fit()["fit_note"])
    assert unfit.startswith("llama-3-70b 放不进一个 H100-SXM：权重占 141.1 GB，可用的只有 72.0 GB（80 GB 的 90%）")
    what_if = tr_message(CostModel(GPUS["H100-SXM"], MODELS["llama-3-70b"], ignore_weights=True).fit()["fit_note"])
    assert what_if == "假设情形 (what-if)：llama-3-70b 的权重（141.1 GB）不计入 H100-SXM 可用的 72.0 GB；实际上它放不下"


def test_figure_labels_translate_qualifier_and_phrase():
    assert tr_figure("A: paged / oracle throughput") == "场景 A：吞吐量 paged / oracle"
    assert tr_figure("mean size 512: failures, of which with enough free tokens").startswith("平均大小 512：")
    assert tr_figure("llama-3-8b (H100-SXM): swap") == "llama-3-8b (H100-SXM)：换出/换入 (swap)"
    i18n.use("en")
    assert tr_figure("A: paged / oracle throughput") == "A: paged / oracle throughput"


def test_every_parameter_has_a_chinese_label_beside_its_name():
    from app.widgets import param_label

    for cls in LABS.values():
        for name in param_names(cls):
            label = param_label(name)
            assert label.startswith(f"{name} · ") and CJK.search(label), f"{cls.lab_name}.{name}"
    i18n.use("en")
    assert param_label("block_size") == "block_size"


def test_every_message_template_and_qualifier_has_chinese():
    templates = [(t, "message") for _, t in (*i18n._MESSAGES, *i18n._PHRASES)]
    templates += [(t, "qualifier") for _, t in i18n._QUALIFIERS]
    assert [t for t, context in templates if not CJK.search(tr(t, context))] == []


def test_the_tensor_parallel_fit_notes_are_translated():
    from kvweb.gpu import GPUS, MODELS, CostModel

    h100 = GPUS["H100-SXM"]
    unfit = tr_message(CostModel(h100, MODELS["llama-3.1-405b"], tp=8).fit()["fit_note"])
    assert unfit.startswith("llama-3.1-405b 放不进 8 个 H100-SXM：权重每个 GPU 占 101.5 GB，可用的只有 72.0 GB")
    heads = tr_message(CostModel(h100, MODELS["qwen2.5-7b"], tp=8).fit()["fit_note"])
    assert heads == "qwen2.5-7b 无法分到 8 个 GPU 上：它的 28 个查询头不是 8 的倍数，所以不计价"


def test_the_budget_refusal_is_translated():
    line = (
        "requests, block_size: this run is estimated at 95 s of work (10 requests through the papers' engine), "
        "over the budget of 20 s; lower requests or raise block_size"
    )
    assert tr_message(line) == (
        "requests, block_size：这次运行估计需要 95 秒的计算（10 个经过论文引擎的请求），"
        "超出了 20 秒的预算；调低 requests 或调高 block_size"
    )
    # a URL's refusal, its values then reset: the refusal inside is translated too
    reset = (
        "requests: this run is estimated at 30 s of work (5 KV blocks filled, 7 blocks hashed), over the budget "
        "of 20 s; lower requests; using the defaults for requests"
    )
    assert tr_message(reset) == (
        "requests：这次运行估计需要 30 秒的计算（5 个填满的 KV 块，7 个计算哈希的块），超出了 20 秒的预算；"
        "调低 requests；改用以下参数的默认值：requests"
    )


def test_every_unit_of_work_has_chinese():
    import kvweb.budget as budget

    units = [u for u in vars(budget).values() if isinstance(u, budget.Unit)]
    assert len(units) >= 12 and all(CJK.search(tr(u.name, "unit")) for u in units)


@pytest.mark.parametrize(
    "config",
    [
        "{",
        "[1]",
        '{"num_hidden_layers": 2, "flux": 1}',
        '{"num_hidden_layers": 2}',
        '{"num_hidden_layers": "2"}',
        '{"text_config": 3}',
        "",
    ],
)
def test_a_refused_config_json_says_why_in_chinese_and_keeps_the_field(config):
    from kvweb.query import from_query

    _, messages = from_query({"lab": "layer-memory", "model": "config", "config": config})
    (line,) = messages
    zh = tr_message(line)
    assert CJK.search(zh) and "config" in zh
    for field in ("flux", "hidden_size", "num_hidden_layers", "text_config"):
        assert (field in line) == (field in zh)


def test_the_planners_messages_are_translated():
    from kvweb.lab import ParamError
    from kvweb.labs.plan import PlanLab

    lines = []
    too_many = {
        "replicas": ",".join(map(str, range(1, 33))),
        "weight_precisions": "16-bit,fp8,int8,int4",
        "kv_precisions": "16-bit,fp8",
    }  # 3 GPUs x 4 tp x 4 x 2 x 2 schedulers x 32 = 6,144 candidates
    for bad in ({"tps": "1,3"}, {"replicas": "0"}, {"prices": "H100-SXM=free"}, too_many):
        with pytest.raises(ParamError) as error:
            PlanLab(**bad).check()
        lines.append(tr_message(str(error.value)))
    assert lines[0] == "tps：'3' 不允许；应为 逗号分隔的列表，每项取自：1, 2, 4, 8"
    assert lines[1].endswith("逗号分隔的列表，每项为 1 到 32 之间的整数")
    assert "GPU=每 GPU 小时美元（大于 0，至多 1000）" in lines[2]
    assert lines[3].endswith("应为 网格中至多 4,096 个候选")


def test_the_fleet_labs_messages_are_translated():
    from kvweb.lab import ParamError
    from kvweb.labs.fleet import FleetLab

    lines = []
    for bad in (
        {"max_len": 1},
        {"mode": "paper", "prefill_replicas": 1},
        {"mode": "vllm-v1", "model": "gpt-oss-20b", "scenario": "B", "prefill_replicas": 1},
    ):
        with pytest.raises(ParamError) as error:
            FleetLab(**bad).check()
        lines.append(tr_message(str(error.value)))
    assert lines[0] == "max_len：1 不允许；应为 0（用场景自带的）或 2 到 32768"
    assert lines[1].endswith("或在 mode 为 sglang 或 vllm-v1 时取 1 到 3（replicas - 1：至少一个副本做解码）")
    assert lines[2].startswith("prefill_replicas：1 不允许与模型 gpt-oss-20b 同用")


def test_a_refused_config_and_a_measured_model_without_tables_are_translated():
    from kvweb.gpu.hf_config import from_config
    from kvweb.lab import LABS, ParamError

    lines = []
    with pytest.raises(ParamError) as error:
        from_config('{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "index_topk": 8}')
    lines.append(tr_message(str(error.value)))
    with pytest.raises(ParamError) as error:
        LABS["schedulers"](cost_model="measured").check()
    lines.append(tr_message(str(error.value)))
    assert lines[0].startswith("config.json：index_topk（sparse attention") and lines[0].endswith("）不在模型范围内")
    assert lines[1] == (
        "cost_model：measured：no measured kernels for A100-40GB; they exist for A100-80GB, H100-SXM, "
        "H200, B200；请改用 cost_model=roofline"
    )


def test_block_means_a_kv_block_only():
    """块 is the KV block (docs/translation.md): GPUs are counted with 个, never 块."""
    for text in ZH.values():
        assert not re.search(r"块 ?(GPU|H100|H200|A100|B200|纸面)|块张量并行|[0-9a-z}] 块 \{", text), text
    assert tr("tp", "param") == "张量并行 GPU 数"
    assert tr("GPUs") == "个 GPU"  # the roofline table's unit: "张量并行 (个 GPU)", once "张量并行 (块)"


def test_layer_types_are_named_in_chinese_with_their_english_name():
    for english, chinese in (
        ("full attention", "全注意力"),
        ("sliding window", "滑动窗口"),
        ("linear state", "线性注意力状态"),
    ):
        assert tr(english) == f"{chinese} ({english})"
