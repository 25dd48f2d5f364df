"""The lecture's exercises: question, prefilled inputs, the answer the library computes,
an explanation and a share URL that opens the exercise's lab with its parameters.

Inputs are the lab's own widgets, validated like the URL and the CLI. Answers are computed
off the event loop; changing an input recomputes that exercise only.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import panel as pn

from app.i18n import columns, tr, tr_figure, tr_message
from app.pages import Page
from app.runner import CANCELLED, Runner, under_lock
from app.text import plain
from app.widgets import as_text, link_button, widget_for
from kvweb.exercises import EXERCISES, Exercise
from kvweb.lab import Lab, ParamError, Progress, to_query


class AnswerJob:
    """Computes the answers of some exercises; the runner calls `run` like a lab's."""

    def __init__(self, todo: dict[str, tuple[Exercise, Lab]]) -> None:
        self.todo = todo

    def run(self, progress: Progress) -> dict[str, Any]:
        answers = {}
        for i, (key, (exercise, lab)) in enumerate(self.todo.items()):
            progress(i / len(self.todo), key)
            answer = exercise.solve(lab, progress)
            answers[key] = {"lines": answer.lines}
        return answers


class ExerciseCard:
    def __init__(self, exercise: Exercise, page: ExercisesPage) -> None:
        self.exercise = exercise
        self.lab = exercise.make_lab()
        self.widgets = {name: widget_for(self.lab, name) for name in exercise.inputs}
        for widget in self.widgets.values():
            widget.param.watch(lambda event: page.changed(self), "value")
        self.answer = plain(tr("computing..."), css_class=f"kv-ex-answer-{exercise.key}", mono=True)
        self.message = plain(css_class=f"kv-ex-message-{exercise.key}", color="#a40000")
        self.message.visible = False
        self.share = plain(css_class=f"kv-ex-share-{exercise.key}", mono=True)
        self.share.styles = {**self.share.styles, "word-break": "break-all", "font-size": "85%"}
        open_lab = link_button(tr("Open in the lab"), f"kv-ex-open-{exercise.key}",
                               lambda: page.navigate(to_query(self.lab)))
        self.card = pn.Card(
            pn.pane.Markdown(f"**{tr('Question')}:** {tr(exercise.question)}", sizing_mode="stretch_width"),
            pn.Row(*self.widgets.values(), sizing_mode="stretch_width", css_classes=[f"kv-ex-inputs-{exercise.key}"]),
            pn.pane.Bokeh(self.message),
            pn.pane.Markdown(f"**{tr('Answer')}** ({tr('computed by the library')}):"),
            pn.pane.Bokeh(self.answer),
            pn.pane.Markdown(f"**{tr('Why')}:** {tr(exercise.explanation)}", sizing_mode="stretch_width"),
            pn.Row(pn.pane.Markdown(f"**{tr('Share URL')}:**"), open_lab),
            pn.pane.Bokeh(self.share, sizing_mode="stretch_width"),
            title=tr(exercise.title), sizing_mode="stretch_width", css_classes=[f"kv-ex-{exercise.key}"],
        )
        self.show_share()

    def read_inputs(self) -> bool:
        """Take the widgets' values through the lab's validation; False (with a message) if bad."""
        try:
            self.lab = self.exercise.make_lab({n: as_text(w.value) for n, w in self.widgets.items()})
        except ParamError as err:
            self.message.text = tr_message(str(err))
            self.message.visible = True
            return False
        self.message.visible = False
        self.show_share()
        return True

    def show_share(self) -> None:
        loc = pn.state.location
        base = f"{loc.protocol}//{loc.hostname}{':' + loc.port if loc.port else ''}{loc.pathname}" if loc and loc.hostname else ""
        self.share.text = f"{base}?{urlencode(to_query(self.lab))}"

    def show(self, lines: list[tuple[str, str]]) -> None:
        labels = [tr_figure(label) for label, _ in lines]
        width = max(map(columns, labels))
        self.answer.text = "\n".join(f"{label}{' ' * (width - columns(label))}  {tr(value)}"
                                      for label, (_, value) in zip(labels, lines))



class ExercisesPage(Page):
    name = "exercises"
    label = "Exercises"

    def __init__(self, navigate) -> None:  # noqa: ANN001
        super().__init__(navigate)
        self.cards = {e.key: ExerciseCard(e, self) for e in EXERCISES}
        self.stale = set(self.cards)
        self.runner = Runner()
        self._layout = pn.Column(
            pn.pane.Markdown(f"## {tr('Exercises')}\n\n{tr(INTRO)}", sizing_mode="stretch_width"),
            pn.Row(self.runner.bar, self.runner.cancel),
            *(c.card for c in self.cards.values()), sizing_mode="stretch_width", max_width=1100,
        )

    def layout(self) -> pn.viewable.Viewable:
        return self._layout

    def shown(self) -> None:
        if self.stale:
            self.compute()

    def changed(self, card: ExerciseCard) -> None:
        under_lock(lambda: self._recompute(card))

    def _recompute(self, card: ExerciseCard) -> None:
        if card.read_inputs():
            self.stale.add(card.exercise.key)
            card.answer.text = tr("computing...")
            self.compute()

    def compute(self) -> None:
        todo = {k: (self.cards[k].exercise, self.cards[k].lab) for k in self.cards if k in self.stale}
        self.runner.start(AnswerJob(todo), self._done)

    def _done(self, answers: dict[str, Any] | None, error: str | None) -> None:
        for key, answer in (answers or {}).items():
            self.cards[key].show(answer["lines"])
            self.stale.discard(key)
        if error and error != CANCELLED:
            for key in self.stale:
                self.cards[key].answer.text = tr_message(error)


INTRO = ("The lecture's exercises, answered by running the labs. Change an input and the answer is "
         "recomputed; the share URL opens the lab with the same parameters.")
