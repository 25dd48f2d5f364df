"""A redraw as the page receives it (static site: app/worker.py sends it as one message):
the step a new result opens on is drawn once, and changes that lay out a figure (a map's
title) come before new data, so the page applies the batch without waiting a task in between
(static/handler.js) and paints each figure once."""
import sys
from pathlib import Path

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `app` is not an installed package

from bokeh.document import Document  # noqa: E402
from bokeh.document.events import ColumnDataChangedEvent, ModelChangedEvent  # noqa: E402
from bokeh.models import GlyphRenderer, LegendItem, TableColumn, Title  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

import app.worker as worker  # noqa: E402
from app.shell import Shell  # noqa: E402
from app.worker import Link  # noqa: E402


@pytest.fixture
def served(monkeypatch):
    """A shell in a document whose changes go through a worker `Link` into `sent` (one list per
    message), running labs in this thread."""
    doc, sent = Document(), []
    with set_curdoc(doc):
        shell = Shell()
        shell.runner._executor = None
        shell.layout.server_doc(doc)
        link = Link(sent.append)
        monkeypatch.setattr(worker, "_link", link)
        doc.on_change(link.on_change)
        yield shell, sent


def test_a_new_result_draws_its_opening_step_once_and_titles_come_before_data(served, monkeypatch):
    shell, sent = served
    shell.open_query("?lab=schedulers&requests=60&tp=2&step=500")  # past the end: the player stops at the last step
    view, draws = shell.view, []
    last = view.player.value
    show_step = view.show_step
    monkeypatch.setattr(view, "show_step", lambda index: (draws.append(index), show_step(index)))
    sent.clear()
    shell.widgets["tp"].value = 1  # a shorter trace (the player moves back into it), on maps of other sizes
    assert view.player.end < last
    assert draws == [view.player.end] == [view.player.value]
    redraw = max(sent, key=len)
    titles = [i for i, e in enumerate(redraw) if isinstance(e, ModelChangedEvent) and isinstance(e.model, Title)]
    data = [i for i, e in enumerate(redraw) if isinstance(e, ColumnDataChangedEvent)]
    assert len(titles) == 3 and len(data) >= 7  # each map's title; curves, table and cells
    assert max(titles) < min(data)


LAYS_OUT = (Title, LegendItem, TableColumn, GlyphRenderer)  # what the page lays out again when it changes


@pytest.mark.parametrize(("lab", "change"), [("schedulers", ("block_size", 32)), ("engine", ("scenario", "B")),
                                             ("engine", ("compare", "contiguous"))])
def test_a_redraw_lays_out_before_new_data(served, lab, change):
    shell, sent = served
    shell.open_query(f"?lab={lab}&requests=40")
    sent.clear()
    shell.widgets[change[0]].value = change[1]
    redraw = max(sent, key=len)
    laid = [i for i, e in enumerate(redraw) if isinstance(e, ModelChangedEvent) and isinstance(e.model, LAYS_OUT)]
    data = [i for i, e in enumerate(redraw) if isinstance(e, ColumnDataChangedEvent)]
    assert laid and data and max(laid) < min(data)
