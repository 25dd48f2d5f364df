"""The `trace_file` parameter's control: a trace file picked, or dropped on the picker, is read by the page's
Python (the server's under `panel serve`, the web worker's in the static site), kept there
(`kvweb.serving.traces.remember`) and named by its key, `name:rows:digest`: the parameter's value, which the
share URL carries. What the picker says of the file is plain text, never markup.
"""
from __future__ import annotations

from typing import Any

import panel as pn
import param

from app.i18n import tr, tr_message
from app.text import plain
from kvweb.lab import ParamError
from kvweb.serving import traces

ACCEPT = ".jsonl,.json,.csv,.txt"


class TracePicker(pn.widgets.CompositeWidget):
    """A file input, what was read (or why not), and a button that clears the file; `value` is the key."""

    value = param.String(default="")
    description = param.String(default="", doc="the parameter's help, shown by the file input")

    def __init__(self, value: str, label: str, help_text: str, width: int) -> None:
        super().__init__(value=value, description=help_text, width=width)
        self.input = pn.widgets.FileInput(accept=ACCEPT, multiple=False, description=help_text, width=width,
                                          css_classes=["kv-param-trace_file"])
        self.said = plain(css_class="kv-trace-file-said", mono=True)
        self.clear = pn.widgets.Button(name=tr("clear the trace file"), css_classes=["kv-trace-file-clear"],
                                       width=width // 2, visible=bool(value))
        self._composite[:] = [pn.pane.Bokeh(plain(f"{label} ({tr('pick or drop a trace file')})"), width=width),
                              self.input, pn.pane.Bokeh(self.said, width=width), self.clear]
        self.input.param.watch(self._picked, "value")
        self.clear.on_click(lambda event: setattr(self, "value", ""))
        self.param.watch(lambda event: self._show(), "value")
        self._show()

    def _picked(self, event: Any) -> None:
        if not event.new:
            return
        try:
            trace = traces.remember(event.new, self.input.filename or "trace")
        except ParamError as err:
            self.said.text = tr_message(str(err))
            return
        if trace.key == self.value:
            self._show()
        self.value = trace.key

    def _show(self) -> None:
        """What the picker holds: the file's name, rows, format and rows skipped, or that none is picked."""
        self.clear.visible = bool(self.value)
        if not self.value:
            self.said.text = tr("no trace file picked")
            return
        try:
            summary = traces.recall(self.value).summary()
        except ParamError as err:
            self.said.text = tr_message(str(err))
            return
        self.said.text = tr("{0}: {1} rows ({2}), {3} skipped, digest {4}").format(
            summary["name"], f"{summary['rows']:,}", summary["format"], f"{summary['skipped']:,}", summary["digest"])
