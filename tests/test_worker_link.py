"""app/site/link.py: the static site's worker sends document changes one by one, as Panel's link
does, except a redraw, which leaves as one message (that the page draws the same from it is
e2e: every static-site test goes through this link). And a redraw as the page receives it:
the step a new result opens on is drawn once, and changes that lay out a figure (titles,
legends, what is shown) come before new data, so the page applies the batch without waiting a
task in between (static/handler.js) and paints each figure once."""

import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

from bokeh.document import Document  # noqa: E402
from bokeh.document.events import ColumnDataChangedEvent, ModelChangedEvent  # noqa: E402
from bokeh.models import GlyphRenderer, LegendItem, TableColumn, Title  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

from app import redraw  # noqa: E402
from app.redraw import one_message  # noqa: E402
from app.shell import Shell  # noqa: E402
from app.site.link import Link  # noqa: E402


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
    link = Link(sent.append)
    monkeypatch.setattr(redraw, "_batch", link.one_message)
    with one_message():
        link.on_change(Event("x"))
        link.on_change(Event("y"))
    assert names(sent) == [["x", "y"]]


def changes_and_data(sent: list[list], kinds: type | tuple[type, ...]) -> tuple[list[int], list[int]]:
    """In the redraw (the longest message): where models of `kinds` change, and where new data comes."""
    redraw = max(sent, key=len)
    changed = [i for i, e in enumerate(redraw) if isinstance(e, ModelChangedEvent) and isinstance(e.model, kinds)]
    return changed, [i for i, e in enumerate(redraw) if isinstance(e, ColumnDataChangedEvent)]


@pytest.fixture
def served(monkeypatch):
    """A shell in a document whose changes go through a worker `Link` into `sent` (one list per
    message), running labs in this thread."""
    doc, sent = Document(), []
    with set_curdoc(doc):
        shell = Shell()
        shell.labs.runner.pool = None
        shell.layout.server_doc(doc)
        link = Link(sent.append)
        monkeypatch.setattr(redraw, "_batch", link.one_message)
        doc.on_change(link.on_change)
        yield shell, sent


def test_a_new_result_draws_its_opening_step_once_and_titles_come_before_data(served, monkeypatch):
    shell, sent = served
    shell.router.open("?lab=schedulers&requests=60&tp=2&step=500")  # past the end: the player stops at the last step
    view, draws = shell.labs.view, []
    last = view.player.value
    show_step = view.show_step
    monkeypatch.setattr(view, "show_step", lambda index: (draws.append(index), show_step(index)))
    sent.clear()
    shell.labs.widgets["tp"].value = 1  # a shorter trace (the player moves back into it), on maps of other sizes
    assert view.player.end < last
    assert draws == [view.player.end] == [view.player.value]
    titles, data = changes_and_data(sent, Title)
    assert len(titles) == 3 and len(data) >= 7  # each map's title; curves, table and cells
    assert max(titles) < min(data)


LAYS_OUT = (Title, LegendItem, TableColumn, GlyphRenderer)  # what the page lays out again when it changes


@pytest.mark.parametrize(
    ("lab", "change"),
    [("schedulers", ("block_size", 32)), ("engine", ("scenario", "B")), ("engine", ("compare", "contiguous"))],
)
def test_a_redraw_lays_out_before_new_data(served, lab, change):
    shell, sent = served
    shell.router.open(f"?lab={lab}&requests=40")
    sent.clear()
    shell.labs.widgets[change[0]].value = change[1]
    laid, data = changes_and_data(sent, LAYS_OUT)
    assert laid and data and max(laid) < min(data)
