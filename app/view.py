"""The view contract: how a lab's result becomes Bokeh figures.

A view builds its figures and ColumnDataSources once, then `update` replaces their data
from a new result. Animated views get a player (play / pause / step / scrubber) and
implement `show_step`; the shell keeps the player's position in the URL (`step=`).
Views never compute: everything they draw is in the lab's result.
"""
from __future__ import annotations

from typing import Any, ClassVar

import panel as pn

from kvweb.lab import Lab

VIEWS: dict[str, type[LabView]] = {}


def columns(*names: str) -> dict[str, list]:
    """Empty ColumnDataSource data with these columns."""
    return {n: [] for n in names}


class LabView:
    labs: ClassVar[tuple[str, ...]] = ()
    animated: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.labs:
            VIEWS[name] = cls

    def __init__(self) -> None:
        self.player = pn.widgets.Player(
            name="step", start=0, end=0, value=0, interval=600, loop_policy="once",
            show_loop_controls=False, width=420, visible=self.animated,
            css_classes=["kv-player"],
        )
        self.player.param.watch(lambda event: self.show_step(event.new), "value")

    def layout(self) -> pn.viewable.Viewable:
        raise NotImplementedError

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        raise NotImplementedError

    def set_steps(self, count: int) -> None:
        """Animated views call this from `update`: the scrubber spans the trace."""
        self.player.end = max(0, count - 1)
        if self.player.value > self.player.end:
            self.player.value = self.player.end

    def show_step(self, index: int) -> None:
        """Animated views draw step `index` of the last result."""
