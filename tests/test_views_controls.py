"""What the page shows around the figures: one percentage format in every view, help on every
parameter control (en and zh), the run's cancel button only inside its (hidden) progress box, and
the layer-memory figure showing every layer's type, window layers included."""

import re
import sys
from pathlib import Path

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import panel as pn  # noqa: E402

import kvweb.labs  # noqa: E402, F401
from app import i18n  # noqa: E402
from app.i18n import tr  # noqa: E402
from app.runner import HIDDEN  # noqa: E402
from app.view import percent  # noqa: E402
from app.views.layer_memory import COLORS, MARK_PX, NAMES, LayerMemoryView  # noqa: E402
from app.widgets import WithHelp, help_text, param_help, widget_for, widgets_for  # noqa: E402
from kvweb.lab import LABS, param_names  # noqa: E402
from kvweb.parsing import allowed  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "app"


@pytest.fixture
def english():
    i18n.use("en")
    yield
    i18n.use("en")


def test_a_percentage_is_written_one_way():
    assert percent(0.353) == "35.3 %" and percent(1) == "100.0 %" and percent(0.9, 0) == "90 %"
    assert percent(0) == "0.0 %" and percent(0.00049) == "0.0 %" and percent(0.12345, 2) == "12.35 %"


@pytest.mark.parametrize("path", sorted([*APP.glob("views/*.py"), *APP.glob("pages/*.py")]), ids=lambda p: p.name)
def test_no_view_writes_a_percentage_its_own_way(path):
    """Python's "{:.1%}" ("35.3%", no space) and Bokeh's "{0.0%}" are gone: `percent` and "{0.0 %}"."""
    if path.name == "schedulers.py":
        pytest.skip("app/views/schedulers.py is another engineer's (its figures already write 'x.x %')")
    source = path.read_text()
    assert not re.findall(r":[,.\d]*%\}|\{0[.0]*%\}|\d\}%", source), path.name


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("lab_name", sorted(LABS))
def test_every_parameter_control_has_its_help(lab_name, lang):
    i18n.use(lang)
    try:
        lab = LABS[lab_name]()
        widgets = widgets_for(lab)
        assert list(widgets) == param_names(type(lab))
        for name, widget in widgets.items():
            p = lab.param[name]
            shown = help_text(widget)
            assert shown == param_help(p) and tr(p.doc) in shown, (lab_name, name)
            if lang == "zh":
                assert re.search(r"[\u4e00-\u9fff]", shown) and shown != f"{p.doc} ({allowed(p)})", (lab_name, name)
            if "description" not in type(widget).param:  # a checkbox's or a slider's "?" is a TooltipIcon
                assert isinstance(widget, WithHelp) and isinstance(widget.tip, pn.widgets.TooltipIcon), (lab_name, name)
                assert widget.tip in widget._composite.objects and widget.control in widget._composite.objects
    finally:
        i18n.use("en")


def test_a_checkbox_with_help_is_its_checkbox(english):
    lab = LABS["roofline"]()
    box = widget_for(lab, "ignore_weights")
    assert isinstance(box, WithHelp) and isinstance(box.control, pn.widgets.Checkbox)
    assert "kv-param-ignore_weights" in box.control.css_classes and not box.css_classes  # the e2e tests' handle
    assert "true or false" in box.tip.value and "what-if" in box.tip.value
    seen = []
    box.param.watch(lambda event: seen.append(event.new), "value")
    box.control.value = not lab.ignore_weights  # the browser's click
    assert box.value == (not lab.ignore_weights) and seen == [not lab.ignore_weights]
    box.value = lab.ignore_weights  # the lab area puts the lab's value back
    assert box.control.value == lab.ignore_weights
    box.disabled = True  # a parameter the lab's values leave unread
    assert box.control.disabled
    model = pn.Column(box).get_root()
    assert {m.__class__.__name__ for m in model.references()} >= {"Checkbox", "TooltipIcon", "Tooltip"}


def test_a_slider_gets_its_help_too(english):
    lab = LABS["paged-equivalence"]()
    slider = widget_for(lab, "block_size")
    assert isinstance(slider, WithHelp) and isinstance(slider.control, pn.widgets.IntSlider)
    assert slider.value == lab.block_size and "an integer from" in help_text(slider)


def test_the_exercises_inputs_have_their_help(english):
    from app.pages.exercises import EXERCISES

    for exercise in EXERCISES:
        lab = exercise.make_lab()
        for name in exercise.inputs:
            assert help_text(widget_for(lab, name)) == param_help(lab.param[name]), (exercise.key, name)


def _count(layout, target) -> int:
    """How many times `target` sits in the layout tree (a component put in twice is drawn twice)."""
    children = getattr(layout, "objects", None) or []
    return sum((child is target) + _count(child, target) for child in children)


@pytest.mark.parametrize("page", ["exercises", "report"])
def test_the_cancel_button_is_only_in_the_hidden_progress_box(page, english):
    """The pages once put the runner's cancel button beside its progress box as well as in it:
    outside the box that hides while nothing runs, it stayed on the page."""
    if page == "exercises":
        from app.pages.exercises import ExercisesPage as PageClass
    else:
        from app.pages.report import ReportPage as PageClass
    shown = PageClass(lambda query: None)
    runner = shown.runner
    layout = shown.layout()
    assert _count(layout, runner.bar) == 1 and _count(runner.bar, runner.cancel) == 1
    assert _count(layout, runner.cancel) == 1  # only inside the bar
    assert runner.bar.styles == HIDDEN  # nothing runs yet


def test_window_layers_are_drawn_in_their_own_colour(english):
    """gpt-oss-20b (the lab's default): half its layers hold a 128-token window, 1/256 of a full
    layer's cache at 32k tokens, a bar under a pixel high. Each layer also has a mark of fixed size
    in its type's colour, in the legend beside the bars."""
    lab = LABS["layer-memory"]()
    assert lab.model == "gpt-oss-20b"
    result = lab.run()
    view = LayerMemoryView()
    view.update(lab, result)
    data = view.layers.data
    kinds = result["layers"]["kind"]
    assert kinds.count("sliding") == kinds.count("full") == len(kinds) // 2 > 0
    window = [i for i, k in enumerate(kinds) if k == "sliding"]
    full = [i for i, k in enumerate(kinds) if k == "full"]
    assert {data["kind"][i] for i in window} == {tr(NAMES["sliding"])} != {data["kind"][i] for i in full}
    assert {data["color"][i] for i in window} == {COLORS["sliding"]} != {data["color"][i] for i in full}
    assert [data["mb"][i] for i in window] == [result["layers"]["bytes_per_gpu"][i] / 1e6 for i in window]
    assert max(data["mb"]) / min(data["mb"][i] for i in window) > 200  # the bar alone would not show
    # the marks: one per layer, same source, fixed screen size, and the range leaves room for them
    assert view.marks.data_source is view.layers and view.marks.glyph.size == MARK_PX >= 8
    frame_px = 240  # about: the figure is 320 px high with its title and axis
    data_per_px = (max(data["mb"]) * 1.2 - view.by_layer.y_range.start) / frame_px
    assert view.by_layer.y_range.start <= min(data["mb"]) - 0.9 * MARK_PX / 2 * data_per_px
    # one legend entry per layer type, drawn with the bar and the mark
    legend = view.by_layer.legend[0]
    assert len(legend.items) == 1 and legend.items[0].label.field == "kind"
    assert view.marks in legend.items[0].renderers and len(legend.items[0].renderers) == 2
