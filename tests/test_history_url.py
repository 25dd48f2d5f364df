"""The shell's URL state beyond a lab's parameters: a lab opened by the guided tour (`tour=N`)
and the exercises page (`exercise=KEY`, `answer=shown`); browser history is e2e/test_history.py.
And the labs the shell keeps (`KEEP_LABS`): coming back to one puts its widgets and view back,
and with the same parameters shows its last result without a rerun."""
import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import panel as pn  # noqa: E402
from bokeh.document import Document  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

from app import i18n  # noqa: E402
from app.pages.exercises import ExercisesPage  # noqa: E402
from app.pages.tour import STEPS  # noqa: E402
from app.shell import KEEP_LABS, Shell  # noqa: E402
from app.url import History  # noqa: E402
from kvweb.lab import LABS  # noqa: E402


@pytest.fixture
def shell(monkeypatch):
    """A shell that runs labs in this thread (the result is there on return) and lists the
    parameters of each run in `shell.runs`."""
    shell = Shell()
    shell.runner._executor = None
    shell.runs = []
    call = shell.runner._call
    monkeypatch.setattr(shell.runner, "_call",
                        lambda lab, generation: (shell.runs.append(lab.values()), call(lab, generation))[1])
    yield shell
    i18n.use("en")


def test_a_lab_from_the_tour_shows_the_way_back_and_on(shell):
    shell.open_query("?lab=block-tables&tour=2")
    assert shell.tour_step == 2 and shell.tour_bar.visible
    labels = [w.name for w in shell.tour_bar.objects[1:]]
    assert labels == ["← Guided tour", f"Next step: 3. {STEPS[2].title} →"]
    shell.open_query(f"?lab=fsm&tour={len(STEPS)}")  # the last step has no next one
    assert [w.name for w in shell.tour_bar.objects[1:]] == ["← Guided tour"]
    shell.open_query("?lab=fsm")
    assert shell.tour_step is None and not shell.tour_bar.visible


@pytest.mark.parametrize("bad", ["0", "99", "x", "①"])
def test_a_bad_tour_step_is_ignored_with_a_message(shell, bad):
    shell.open_query(f"?lab=roofline&tour={bad}&tokens=4096")
    assert shell.lab.lab_name == "roofline" and shell.lab.tokens == 4096 and shell.tour_step is None
    assert shell.message.text.startswith("tour: ") and f"an integer from 1 to {len(STEPS)}" in shell.message.text


def test_the_exercises_page_keeps_one_exercise_and_its_answer_in_the_url(shell, monkeypatch):
    monkeypatch.setattr(ExercisesPage, "shown", lambda self: None)  # the answers are not needed here
    shell.open_query("?page=exercises&exercise=watermark&answer=shown")
    page = shell.pages["exercises"]
    assert page.query() == {"exercise": "watermark", "answer": "shown"}
    assert page.cards["watermark"].solution.visible and not page.cards["watermark"].card.collapsed
    assert all(c.card.collapsed for k, c in page.cards.items() if k != "watermark")
    shell.open_query("?page=exercises&exercise=watermark")
    assert page.query() == {"exercise": "watermark"} and not page.cards["watermark"].solution.visible
    shell.open_query("?page=exercises&exercise=%3Cb%3E&answer=no")
    assert page.query() == {} and not any(c.card.collapsed for c in page.cards.values())
    assert "exercise: '<b>' is not allowed" in shell.message.text and "answer: 'no' is not allowed" in shell.message.text


def test_coming_back_with_the_same_parameters_reuses_widgets_view_and_result(shell):
    shell.open_query("?lab=roofline&tokens=4096")
    widgets, view, result = shell.widgets, shell.main.objects[1], shell.result
    shell.open_query("?lab=block-tables")
    assert shell.main.objects[1] is not view and shell.widgets is not widgets
    shell.open_query("?lab=roofline&tokens=4096")
    assert shell.widgets is widgets and shell.main.objects[1] is view and shell.result is result
    assert shell.controls.objects == [shell.panes["roofline"].controls]
    assert len(shell.runs) == 2  # roofline once, block-tables once
    assert shell.runs[0] == shell.lab.values()


def test_coming_back_with_other_parameters_sets_the_widgets_and_reruns_once(shell):
    shell.open_query("?lab=roofline&tokens=4096")
    shell.open_query("?lab=fsm")
    shell.open_query("?lab=roofline&tokens=1000&gpu=A100-80GB")
    assert shell.widgets["tokens"].value == 1000 and shell.widgets["gpu"].value == "A100-80GB"
    assert len(shell.runs) == 3 and shell.runs[-1]["tokens"] == 1000  # no run for each widget set
    assert shell.result["kv_capacity_tokens"] == LABS["roofline"](gpu="A100-80GB").run()["kv_capacity_tokens"]


def test_a_widget_change_after_coming_back_runs_the_lab_with_it(shell):
    shell.open_query("?lab=roofline")
    shell.open_query("?lab=fsm")
    shell.open_query("?lab=roofline")
    shell.widgets["tokens"].value = 3000
    assert shell.lab.tokens == 3000 and shell.runs[-1]["tokens"] == 3000 and len(shell.runs) == 3


def test_only_the_last_labs_are_kept(shell):
    names = ["roofline", "block-tables", "fsm", "fragmentation", "recovery", "radix-demo"][:KEEP_LABS + 1]
    for name in names:
        shell.open_query(f"?lab={name}")
    assert list(shell.panes) == names[1:]
    shell.open_query(f"?lab={names[0]}")  # made again, and run again
    assert len(shell.runs) == len(names) + 1 and list(shell.panes) == [*names[2:], names[0]]


def test_a_language_switch_makes_the_widgets_again_in_it(shell):
    shell.open_query("?lab=roofline")
    english = shell.widgets["tokens"]
    shell.open_query("?lab=roofline&lang=zh")
    assert shell.widgets["tokens"] is not english and shell.widgets["tokens"].name != english.name
    assert list(shell.panes) == ["roofline"]


def test_a_lab_view_that_does_not_fit_is_hidden_and_shown_again(shell):
    shell.open_query("?lab=roofline&model=llama-3-70b&gpu=A100-40GB")
    assert shell.fit_pane.visible and not shell.main.objects[1].visible
    shell.open_query("?lab=roofline")
    assert not shell.fit_pane.visible and shell.main.objects[1].visible


def test_folded_parameters_sit_in_one_column_of_their_card(shell):
    """A collapsed Card hides each child in the page, and each costs a layout of the page."""
    shell.open_query("?lab=schedulers")
    cards = [o for o in shell.panes["schedulers"].controls.objects if isinstance(o, pn.Card)]
    assert cards and all(len(c.objects) == 1 and isinstance(c.objects[0], pn.Column) for c in cards)
    folded = {w for c in cards for w in c.objects[0].objects}
    assert folded and folded < set(shell.widgets.values())


def test_the_history_box_carries_its_browser_part_on_its_own_model():
    """No Panel link: Panel would walk every model of the page after each layout change."""
    history = History()
    doc = Document()
    with set_curdoc(doc):
        root = history.layout.get_root(doc)
    entry, popped = root.children
    assert "kv-history" in popped.css_classes or "kv-history" in entry.css_classes
    entry = next(m for m in root.children if "kv-history" in m.css_classes)
    popped = next(m for m in root.children if m is not entry)
    (callback,) = entry.js_property_callbacks["change:value"]
    assert callback.args["popped"] is popped and "pushState" in callback.code
