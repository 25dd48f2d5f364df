"""The shell's URL state beyond a lab's parameters: a lab opened by the guided tour (`tour=N`)
and the exercises page (`exercise=KEY`, `answer=shown`); browser history is e2e/test_history.py."""
import sys
from pathlib import Path

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `app` is not an installed package

from app.pages.exercises import ExercisesPage  # noqa: E402
from app.pages.tour import STEPS  # noqa: E402
from app.shell import Shell  # noqa: E402


@pytest.fixture
def shell():
    shell = Shell()
    shell.runner._executor = None  # run labs in this thread: the result is there on return
    return shell


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
