"""A lab's side of the app: its widgets, its run, and its view of the result.

`show(lab, messages, step)` puts a lab's widgets and view in place and shows its result (kept
or run); a widget change builds the lab again through `kvweb.parsing.make`, exactly as the CLI and
the URL do, and runs it. Each time what the lab shows changes (a result drawn, a step), it
calls `remember()`, which writes the URL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import panel as pn

from app.downloads import Downloads
from app.i18n import tr, tr_message
from app.panes import LabPanes
from app.redraw import one_message
from app.runner import CANCELLED, Runner, under_lock
from app.text import LiveText, plain
from app.view import LabView
from app.widgets import as_text
from kvweb.challenges import progress
from kvweb.jsonable import jsonable
from kvweb.lab import Lab, ParamError
from kvweb.parsing import make

Say = Callable[[list[str]], None]
Navigate = Callable[[dict[str, str]], None]
# The lab's figures while another lab is shown (its figures not yet drawn) and once they are: hidden
# by style, which repaints them alone (`visible` would lay out the whole page again).
VEILED, SHOWN = {"visibility": "hidden"}, {"visibility": "visible"}
# The page's side of `show`, run by the lab select when a person picks a lab (app/frame.py): at
# once, before the server or the worker has heard of the pick (0.5-1 s under `panel serve`, seconds
# in the static site), the figures of the lab still shown are veiled, its challenges cleared, and the
# status says the new lab is loading, as `show` will. Changes the page alone makes (`sync: false`):
# the app's next status and `SHOWN` replace them. `loading`: the word, in the session's language.
PICKED = """
for (const model of cb_obj.document.all_models) {
  const classes = model.css_classes ?? []
  if (classes.includes("kv-lab-main")) model.setv({styles: {visibility: "hidden"}}, {sync: false})
  else if (classes.includes("kv-status")) model.data.setv({content: {text: `${loading} ${cb_obj.value}`}}, {sync: false})
  else if (classes.includes("kv-tries")) model.data.setv({content: {text: ""}}, {sync: false})
}
"""
# The same at Back or Forward to another lab's entry (app/router.py: the history box's script, where
# `popped` is a model of the document): the lab select's script, for the lab the address now holds.
POPPED = """
const lab = new URLSearchParams(window.location.search).get("lab")
for (const model of popped.document.all_models)
  if ((model.css_classes ?? []).includes("kv-lab-select") && lab && lab !== model.value)
    for (const picked of (model.js_property_callbacks instanceof Map ? model.js_property_callbacks.get("change:value")
                          : model.js_property_callbacks["change:value"]) ?? [])
      picked.execute({document: model.document, value: lab})
"""


class LabArea:
    """The lab shown (`lab`, its `widgets`, `view` and last `result`), its sidebar and its main area."""

    def __init__(self, say: Say, remember: Callable[[], None], restore: Callable[[], None], navigate: Navigate) -> None:
        self.say, self.remember, self.restore = say, remember, restore
        self.lab: Lab | None = None
        self.result: dict[str, Any] = {}
        self.widgets: dict[str, pn.widgets.Widget] = {}  # the shown lab's
        self.view: LabView | None = None
        self.kept = LabPanes(self._on_widget, remember, navigate)
        self._quiet = False  # while the widgets are set to follow the lab
        self.summary = pn.pane.Markdown("", width=280)
        self.controls = pn.Column()
        self.status = LiveText(css_class="kv-status", mono=True, margin=(2, 10))  # as the widgets above it
        # Whether the lab's model fits its GPU: one sentence when it does not (the view is then
        # hidden: nothing is drawn as if it ran) or when the result is a what-if.
        self.fit_note = plain(css_class="kv-fit-note", color="#8a4b00")
        self.fit_pane = pn.pane.Bokeh(self.fit_note, visible=False, sizing_mode="stretch_width")
        self.main = pn.Column(sizing_mode="stretch_width", css_classes=["kv-lab-main"], styles=SHOWN)
        self.runner = Runner()
        downloads = Downloads(self._record)
        # What to try (kvweb/challenges.py): ticked by the lab's own result, each answer shown once met
        # or once the learner has changed a value in the lab (a try)
        self.tries = LiveText(css_class="kv-tries")  # new text every run: no page layout
        self.tried: set[str] = set()
        self.sidebar = [self.summary, self.controls, downloads.layout, self.status, self.runner.bar, self.tries]

    def show(self, lab: Lab, messages: list[str], step: int | None = 0) -> None:
        """Open `lab`; step None: the frame its result opens on (`opening_step`, else 0). Until its
        result is drawn, the figures are veiled and the status says it is loading: no figure of
        the lab shown before (or of its view's last run) stands beside "ready"."""
        self.main.styles = VEILED
        self.status.text = f"{tr('loading')} {lab.lab_name}"
        self.tries.text = ""
        self.lab = lab
        self.summary.object = tr(lab.summary)
        self.view = self.kept.view(lab)
        pane = self.kept.pane(lab, self.view)
        self.widgets = pane.widgets
        self._quiet = True  # the widgets follow the lab: that is no learner's change
        try:
            for name, widget in pane.widgets.items():
                widget.value = getattr(lab, name)
        finally:
            self._quiet = False
        self._disable_ignored()
        with _frozen():  # Bokeh walks the document's models once, not once per layout
            self.controls.objects = [pane.controls]
            self.main.objects = [self.fit_pane, pane.view]
        if pane.result is not None and pane.values == lab.values():
            self._show_result(pane.result, None, messages, step)
        else:
            self.run(messages, step)

    @property
    def step(self) -> int:
        """The step the view shows (animated views; 0 before any view)."""
        return self.view.player.value if self.view is not None else 0

    def _on_widget(self, event: Any) -> None:
        if not self._quiet:
            under_lock(self._apply_widgets)

    def _apply_widgets(self) -> None:
        assert self.lab is not None
        texts = {name: as_text(w.value) for name, w in self.widgets.items()}
        try:
            lab = make(type(self.lab), texts)
        except ParamError as err:
            self.say([str(err)])
            pn.state.execute(self._revert_widgets)
            return
        if lab.values() == self.lab.values():
            return  # a widget went back to the lab's value
        self.tried.add(lab.lab_name)
        self.lab = lab
        self._disable_ignored()
        self.run([], self.step)  # kept where the trace is long enough

    def _disable_ignored(self) -> None:
        """A widget whose value the lab's values leave unread is shown disabled."""
        ignored = self.lab.ignored()
        for name, widget in self.widgets.items():
            widget.disabled = name in ignored

    async def _revert_widgets(self) -> None:
        """Refused input: every box shows the lab's value again. Run as a task, after the
        change event: a value set while Panel handles that widget's change is not sent back."""
        for name, widget in self.widgets.items():
            widget.value = getattr(self.lab, name)

    def run(self, messages: list[str], step: int | None = 0) -> None:
        """Run the lab; the URL's messages show at once, beside "running" (a refused value's
        reader learns why before the run that uses the default ends)."""
        assert self.lab is not None
        self.say(messages)
        self.status.text = f"{tr('running')} {self.lab.lab_name}"
        self.runner.start(self.lab, lambda result, error: self._show_result(result, error, messages, step))

    def _show_result(
        self, result: dict[str, Any] | None, error: str | None, messages: list[str], step: int | None
    ) -> None:
        if error == CANCELLED:  # back to what the URL shows: the state before this run
            self.status.text = tr("ready")
            self.restore()
            self.say([*messages, tr("run cancelled")])
            return
        self.result = result or {}
        self.say([*messages, error] if error else messages)
        assert self.lab is not None
        pane = self.kept.panes[self.lab.lab_name]  # a run for a lab no longer shown never ends here
        if result is not None:
            pane.values, pane.result = self.lab.values(), result
        note, fits = self.result.get("fit_note"), self.result.get("fits", True)
        self.fit_note.text = tr_message(note) if note else ""
        self.fit_pane.visible = bool(note)
        pane.view.visible = fits
        with one_message():  # the redraw reaches the page at once (static site)
            if self.view is not None and self.result and fits:
                with self.view.steps_held():
                    if self.kept.drawn.get(self.view) is not result:  # else the view shows it already
                        self.view.update(self.lab, self.result)
                        self.kept.drawn[self.view] = result
                    step = min(self.result.get("opening_step", 0) if step is None else step, self.view.player.end)
                    self.view.player.value = step
                self.view.show_step(step)
            self.main.styles = SHOWN
            self.remember()
            self._show_tries()
            self.status.text = tr("ready")

    def _show_tries(self) -> None:
        assert self.lab is not None
        tried = self.lab.lab_name in self.tried
        lines = (
            [
                f"{'☑' if met else '☐'} {tr(c.task)}" + (f"\n   {tr(c.answer)}" if met or tried else "")
                for c, met in progress(self.lab.lab_name, self.result)
            ]
            if self.result
            else []
        )
        self.tries.text = "\n".join([tr("What to try") + ":", *lines]) if lines else ""

    def _record(self) -> dict[str, Any]:
        assert self.lab is not None
        return {"lab": self.lab.lab_name, "params": jsonable(self.lab.values()), "result": self.result}


@contextmanager
def _frozen() -> Iterator[None]:
    doc = pn.state.curdoc
    if doc is None:
        yield
        return
    with doc.models.freeze():
        yield
