"""The views, and the last few labs' widgets, views and results, kept for a quick way back.

Coming back to a kept lab puts its widgets and view back instead of making new ones, and with
the same parameters its last result is shown without a rerun. They are not kept in the page,
hidden: Bokeh lays out hidden components too, and every widget change would pay for them
(docs/site.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import panel as pn

from app.i18n import tr
from app.view import LabView, view_class
from app.trace_picker import BrowserTraces
from app.widgets import widgets_for
from kvweb.lab import ADVANCED, PAPER_GPU, Lab

KEEP_LABS = 4  # labs whose widgets, view and last result are kept
FOLDS = ((ADVANCED, "details"), (PAPER_GPU, "assumptions"))  # parameter precedence -> folded card


@dataclass
class LabPane:
    """A lab's widgets and view as kept, and the last result shown with them."""

    widgets: dict[str, pn.widgets.Widget]
    controls: pn.Column
    view: pn.viewable.Viewable
    values: dict[str, Any] | None = None  # the parameters `result` was computed with
    result: dict[str, Any] | None = None


class LabPanes:
    """One view per view class and the panes of the last `KEEP_LABS` labs, made in the
    session's language (`clear` drops them all when it changes). `on_widget` hears every
    widget's change, `on_step` every player's; a view's links open their URL query with `navigate`."""

    def __init__(
        self, on_widget: Callable[[Any], None], on_step: Callable[[], None], navigate: Callable[[dict[str, str]], None]
    ) -> None:
        self.on_widget, self.on_step, self.navigate = on_widget, on_step, navigate
        self.traces = BrowserTraces(navigate)  # the trace files the browser keeps (its boxes: the shell places them)
        self.views: dict[type[LabView], LabView] = {}
        self.panes: dict[str, LabPane] = {}  # by lab name, the most recently shown last
        self.drawn: dict[LabView, dict[str, Any]] = {}  # the result each view draws

    def view(self, lab: Lab) -> LabView:
        cls = view_class(lab.lab_name)
        if cls not in self.views:
            self.views[cls] = cls()
            self.views[cls].navigate = self.navigate
            self.views[cls].player.param.watch(lambda event: self.on_step(), "value")
        return self.views[cls]

    def pane(self, lab: Lab, view: LabView) -> LabPane:
        """The lab's kept widgets (made on its first showing), now the most recently shown."""
        pane = self.panes.pop(lab.lab_name, None)
        if pane is None:
            widgets = widgets_for(lab, self.traces)
            for widget in widgets.values():
                widget.param.watch(self.on_widget, "value")
            groups: dict[float, list[pn.widgets.Widget]] = {}
            for n, w in widgets.items():
                groups.setdefault(lab.param[n].precedence or 0, []).append(w)
            folded = [fold(title, groups[level]) for level, title in FOLDS if level in groups]
            pane = LabPane(widgets, pn.Column(*groups.get(0, []), *folded, margin=0), view.panel)
        self.panes[lab.lab_name] = pane
        while len(self.panes) > KEEP_LABS:
            self.panes.pop(next(iter(self.panes)))
        return pane

    def clear(self) -> None:
        self.views.clear()
        self.panes.clear()
        self.drawn.clear()


def fold(title: str, widgets: list[pn.widgets.Widget]) -> pn.Card:
    """A folded card whose widgets join the page when it is first opened: until then they cost
    the page nothing (a roofline's 17 folded widgets with their tooltips are 49 of its first
    page's 254 Bokeh models, built by the server and drawn by the browser). The widgets exist
    and follow the lab all along; only their models wait.

    One Column in each card: a collapsed Card hides each of its children in the page, and each
    hidden child costs a layout of the whole page (seconds per switch beside a big view, with a
    dozen widgets folded)."""
    inner = pn.Column(margin=0)
    card = pn.Card(inner, title=tr(title), collapsed=True, width=290, css_classes=[f"kv-fold-{title}"])

    def opened(event: Any) -> None:
        if not event.new and not inner.objects:
            inner.objects = widgets

    card.param.watch(opened, "collapsed")
    return card
