"""app/worker.py: the static site's worker sends document changes one by one, as Panel's link
does, except a redraw, which leaves as one message (that the page draws the same from it is
e2e: every static-site test goes through this link)."""
import sys
from pathlib import Path

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `app` is not an installed package

import app.worker as worker  # noqa: E402
from app.worker import Link, one_message  # noqa: E402


class Event:
    def __init__(self, name: str, setter: str | None = None) -> None:
        self.name, self.setter = name, setter


def names(sent: list[list[Event]]) -> list[list[str]]:
    return [[e.name for e in batch] for batch in sent]


def test_changes_leave_one_by_one_outside_and_together_inside_in_order():
    sent: list[list[Event]] = []
    link = Link(sent.append, setter="js")
    link.on_change(Event("a"))
    link.on_change(Event("from the page", setter="js"))  # the page has it already
    with link.one_message():
        link.on_change(Event("b"))
        with link.one_message():  # nested: the outer one sends
            link.on_change(Event("c"))
        link.on_change(Event("from the page", setter="js"))
        link.on_change(Event("d"))
        assert names(sent) == [["a"]]
    link.on_change(Event("e"))
    with link.one_message():
        pass  # nothing changed: nothing is sent
    assert names(sent) == [["a"], ["b", "c", "d"], ["e"]]


def test_a_failing_redraw_still_sends_what_it_changed():
    sent: list[list[Event]] = []
    link = Link(sent.append)
    with pytest.raises(ValueError), link.one_message():
        link.on_change(Event("half"))
        raise ValueError("a view failed")
    link.on_change(Event("after"))
    assert names(sent) == [["half"], ["after"]]  # and the link is back to one by one


def test_one_message_goes_through_the_workers_link(monkeypatch):
    sent: list[list[Event]] = []
    monkeypatch.setattr(worker, "_link", Link(sent.append))
    with one_message():
        worker._link.on_change(Event("x"))
        worker._link.on_change(Event("y"))
    assert names(sent) == [["x", "y"]]
