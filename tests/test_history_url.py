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

import app.runner  # noqa: E402
from app import i18n  # noqa: E402
from app.pages.exercises import ExercisesPage  # noqa: E402
from app.pages.tour import STEPS  # noqa: E402
from app.panes import KEEP_LABS  # noqa: E402
from app.shell import Shell  # noqa: E402
from app.site.history import History  # noqa: E402
from app.site.location import install as install_location  # noqa: E402
from kvweb.jsonable import jsonable  # noqa: E402
from kvweb.lab import LABS, no_progress  # noqa: E402


@pytest.fixture
def shell(monkeypatch):
    """A shell that runs labs in this thread (the result is there on return) and lists the
    parameters of each run in `shell.runs`."""
    shell = Shell()
    shell.labs.runner.pool = None
    shell.runs = []
    call = shell.labs.runner._call
    monkeypatch.setattr(
        shell.labs.runner, "_call", lambda lab, generation: (shell.runs.append(lab.values()), call(lab, generation))[1]
    )
    yield shell
    i18n.use("en")


def test_a_lab_from_the_tour_shows_the_way_back_and_on(shell):
    shell.router.open("?lab=block-tables&tour=2")
    assert shell.route.tour == 2 and shell.frame.tour_bar.visible
    labels = [w.name for w in shell.frame.tour_bar.objects[1:]]
    assert labels == ["← Guided tour", f"Next step: 3. {STEPS[2].title} →"]
    shell.router.open(f"?lab=fsm&tour={len(STEPS)}")  # the last step has no next one
    assert [w.name for w in shell.frame.tour_bar.objects[1:]] == ["← Guided tour"]
    shell.router.open("?lab=fsm")
    assert shell.route.tour is None and not shell.frame.tour_bar.visible


@pytest.mark.parametrize("bad", ["0", "99", "x", "①"])
def test_a_bad_tour_step_is_ignored_with_a_message(shell, bad):
    shell.router.open(f"?lab=roofline&tour={bad}&tokens=4096")
    assert shell.labs.lab.lab_name == "roofline" and shell.labs.lab.tokens == 4096 and shell.route.tour is None
    assert (
        shell.frame.message.text.startswith("tour: ")
        and f"an integer from 1 to {len(STEPS)}" in shell.frame.message.text
    )


def test_the_exercises_page_keeps_one_exercise_and_its_answer_in_the_url(shell, monkeypatch):
    monkeypatch.setattr(ExercisesPage, "shown", lambda self: None)  # the answers are not needed here
    shell.router.open("?page=exercises&exercise=watermark&answer=shown")
    page = shell.pages["exercises"]
    assert page.query() == {"exercise": "watermark", "answer": "shown"}
    assert page.cards["watermark"].solution.visible and not page.cards["watermark"].card.collapsed
    assert all(c.card.collapsed for k, c in page.cards.items() if k != "watermark")
    shell.router.open("?page=exercises&exercise=watermark")
    assert page.query() == {"exercise": "watermark"} and not page.cards["watermark"].solution.visible
    shell.router.open("?page=exercises&exercise=%3Cb%3E&answer=no")
    assert page.query() == {} and not any(c.card.collapsed for c in page.cards.values())
    assert (
        "exercise: '<b>' is not allowed" in shell.frame.message.text
        and "answer: 'no' is not allowed" in shell.frame.message.text
    )


def test_coming_back_with_the_same_parameters_reuses_widgets_view_and_result(shell):
    shell.router.open("?lab=roofline&tokens=4096")
    widgets, view, result = shell.labs.widgets, shell.labs.main.objects[1], shell.labs.result
    shell.router.open("?lab=block-tables")
    assert shell.labs.main.objects[1] is not view and shell.labs.widgets is not widgets
    shell.router.open("?lab=roofline&tokens=4096")
    assert shell.labs.widgets is widgets and shell.labs.main.objects[1] is view and shell.labs.result is result
    assert shell.labs.controls.objects == [shell.labs.kept.panes["roofline"].controls]
    assert len(shell.runs) == 2  # roofline once, block-tables once
    assert shell.runs[0] == shell.labs.lab.values()


def test_coming_back_with_other_parameters_sets_the_widgets_and_reruns_once(shell):
    shell.router.open("?lab=roofline&tokens=4096")
    shell.router.open("?lab=fsm")
    shell.router.open("?lab=roofline&tokens=1000&gpu=A100-80GB")
    assert shell.labs.widgets["tokens"].value == 1000 and shell.labs.widgets["gpu"].value == "A100-80GB"
    assert len(shell.runs) == 3 and shell.runs[-1]["tokens"] == 1000  # no run for each widget set
    assert shell.labs.result["kv_capacity_tokens"] == LABS["roofline"](gpu="A100-80GB").run()["kv_capacity_tokens"]


def test_a_widget_change_after_coming_back_runs_the_lab_with_it(shell):
    shell.router.open("?lab=roofline")
    shell.router.open("?lab=fsm")
    shell.router.open("?lab=roofline")
    shell.labs.widgets["tokens"].value = 3000
    assert shell.labs.lab.tokens == 3000 and shell.runs[-1]["tokens"] == 3000 and len(shell.runs) == 3


def test_only_the_last_labs_are_kept(shell):
    names = ["roofline", "block-tables", "fsm", "fragmentation", "recovery", "radix-demo"][: KEEP_LABS + 1]
    for name in names:
        shell.router.open(f"?lab={name}")
    assert list(shell.labs.kept.panes) == names[1:]
    shell.router.open(f"?lab={names[0]}")  # made again, and run again
    assert len(shell.runs) == len(names) + 1 and list(shell.labs.kept.panes) == [*names[2:], names[0]]


def test_a_language_switch_makes_the_widgets_again_in_it(shell):
    shell.router.open("?lab=roofline")
    english = shell.labs.widgets["tokens"]
    shell.router.open("?lab=roofline&lang=zh")
    assert shell.labs.widgets["tokens"] is not english and shell.labs.widgets["tokens"].name != english.name
    assert list(shell.labs.kept.panes) == ["roofline"]


def test_a_lab_view_that_does_not_fit_is_hidden_and_shown_again(shell):
    shell.router.open("?lab=roofline&model=llama-3-70b&gpu=A100-40GB")
    assert shell.labs.fit_pane.visible and not shell.labs.main.objects[1].visible
    shell.router.open("?lab=roofline")
    assert not shell.labs.fit_pane.visible and shell.labs.main.objects[1].visible


def test_folded_parameters_join_one_column_of_their_card_when_it_is_first_opened(shell):
    """Until then they follow the lab without a model in the page; then one Column holds them (a
    collapsed Card hides each child in the page, and each costs a layout of the page)."""
    shell.router.open("?lab=roofline&mem_util=0.8&ignore_weights=true")
    cards = [o for o in shell.labs.kept.panes["roofline"].controls.objects if isinstance(o, pn.Card)]
    assert [c.css_classes for c in cards] == [["kv-fold-details"], ["kv-fold-assumptions"]]
    assert all(len(c.objects) == 1 and isinstance(c.objects[0], pn.Column) and not c.objects[0].objects for c in cards)
    widgets = shell.labs.widgets
    assert widgets["mem_util"].value == 0.8 and widgets["ignore_weights"].value is True  # folded, and set
    doc = Document()
    with set_curdoc(doc):
        shell.layout.get_root(doc)
        assert not widgets["mem_util"]._models and widgets["tokens"]._models  # only shown widgets are in the page
        for card in cards:
            card.collapsed = False
        assert widgets["mem_util"]._models  # opened: now in the page
    folded = [w for c in cards for w in c.objects[0].objects]
    assert len(folded) == 17 and set(folded) < set(widgets.values())  # 7 details, 10 assumptions
    cards[0].collapsed, cards[0].collapsed = True, False  # folded and opened again: the same widgets, once
    assert [w for c in cards for w in c.objects[0].objects] == folded


def test_a_sessions_first_document_already_shows_its_url(monkeypatch):
    """The URL is opened while the session's document is built, not once the page has loaded: the
    first document the page gets holds the lab drawn with the URL's values, and the URL written;
    the history box's script runs once the page has rendered it (the page could not hear it before)."""
    monkeypatch.setattr(app.runner, "server_pool", lambda: None)  # the run is called here, as the quick lane does
    search = "?lab=roofline&tokens=4096&lang=zh"
    doc = Document()
    with set_curdoc(doc):
        install_location(
            {"pathname": "/main", "search": search, "href": "http://127.0.0.1/main" + search, "origin": "x"}
        )
        shell = Shell()  # as app/main.py: no page has loaded, no document_ready has come
        assert shell.route.lab.tokens == 4096 and shell.labs.widgets["tokens"].value == 4096
        assert shell.labs.result == jsonable(LABS["roofline"](tokens=4096).run(no_progress))  # run,
        assert (
            shell.labs.kept.drawn[shell.labs.view] is shell.labs.result and shell.labs.status.text == "就绪 (ready)"
        )  # drawn
        pushes, written = shell.router.history.entry.value.split(" ")
        assert pushes == "0" and written.startswith("?lab=roofline&") and "&tokens=4096&" in written
        shell.layout.server_doc(doc)
        ready = dict(doc.to_json(deferred=False)["callbacks"]["entries"])["document_ready"]
        boxes = [  # each box's script replays its value once the page has rendered it: the history's, the screen's
            doc.get_model_by_id(dict(c["attributes"]["args"]["entries"])["box"]["id"])
            for c in ready
            if c["attributes"]["code"] == "box.properties.value.change.emit()"
        ]
        (box,) = [b for b in boxes if b.css_classes == ["kv-history"]]
        assert box.value == f"0 {written}" and len(boxes) == 2
    i18n.use("en")


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


def test_a_language_switch_draws_the_same_route_in_the_other_language(shell, monkeypatch):
    monkeypatch.setattr(ExercisesPage, "shown", lambda self: None)  # the answers are not needed here
    shell.router.open("?lab=block-tables&num_blocks=16&step=3")
    shell.frame.lang_select.value = "zh"
    assert {k: shell.current().query()[k] for k in ("num_blocks", "step", "lang")} == {
        "num_blocks": "16",
        "step": "3",
        "lang": "zh",
    }
    shell.router.open("?page=exercises&exercise=watermark&answer=shown")
    shell.frame.lang_select.value = "en"
    assert shell.current().query() == {"page": "exercises", "exercise": "watermark", "answer": "shown"}
