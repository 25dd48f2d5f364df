"""The lecture's exercises: question, prefilled inputs, the reader's own answer checked
against the one the library computes (within the exercise's stated tolerance), then the
library's answer and its explanation, and share URLs: of the exercise (with or without its
answer shown) and of its lab with the same parameters.

Inputs are the lab's own widgets, validated like the URL and the CLI. Answers are computed
off the event loop, one exercise at a time, the one in the URL first, each shown as soon as it
is known; changing an input recomputes that exercise only. Answers are remembered for every
session (`ANSWERS`); the static site starts with the preset answers its build computed
(`app/exercises.json`). The URL keeps the
exercise last worked on (`exercise=KEY`) and whether its answer is shown (`answer=shown`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import panel as pn

from app.i18n import tr, tr_figure, tr_message
from app.pages import Page
from app.runner import CANCELLED, Runner, under_lock
from app.text import plain
from app.widgets import as_text, link_button, widget_for
from kvweb.exercises import BY_KEY, EXERCISES, Exercise, Verdict, solved
from kvweb.lab import Lab, ParamError, Progress, shown
from kvweb.memo import Memo
from kvweb.query import to_query


def answer_key(key: str, lab: Lab) -> tuple[str, str]:
    return key, urlencode(to_query(lab))


ANSWERS: Memo[dict[str, Any]] = Memo(keep=256)  # (exercise, its lab's query) -> answer, every session's


@cache
def shipped_answers() -> dict[tuple[str, str], dict[str, Any]]:
    """The preset answers the static site was built with, keyed like `ANSWERS` ({} under `panel
    serve`); read when the page first looks for an answer, not at import."""
    path = resources.files("app").joinpath("exercises.json")
    shipped = json.loads(path.read_text()) if path.is_file() else {}
    return {answer_key(key, BY_KEY[key].make_lab()): answer for key, answer in shipped.items() if key in BY_KEY}


def known_answer(key: str, lab: Lab) -> dict[str, Any] | None:
    """An answer computed in this process, or shipped with the site, for this exercise and lab."""
    return ANSWERS.find(answer_key(key, lab)) or shipped_answers().get(answer_key(key, lab))


class AnswerJob:
    """Computes one exercise's answer; the runner calls `run` like a lab's."""

    def __init__(self, exercise: Exercise, lab: Lab) -> None:
        self.exercise, self.lab = exercise, lab

    def run(self, progress: Progress) -> dict[str, Any]:
        return ANSWERS.get(answer_key(self.exercise.key, self.lab), lambda: solved(self.exercise, self.lab, progress))


class ExerciseCard:
    def __init__(self, exercise: Exercise, page: ExercisesPage) -> None:
        self.exercise = exercise
        self.lab = exercise.make_lab()
        self.widgets = {name: widget_for(self.lab, name) for name in exercise.inputs}
        for widget in self.widgets.values():
            widget.param.watch(lambda event: page.changed(self), "value")
        self.page = page
        self.expected: float | str | None = None  # the library's answer to the check, once computed
        self.revealed = False
        check = exercise.check
        self.given = (
            pn.widgets.RadioButtonGroup(options={tr(c): c for c in check.choices}, value=None)
            if check.choices
            else pn.widgets.TextInput(placeholder=tr("a number"), width=160)
        )
        self.given.css_classes = [f"kv-ex-given-{exercise.key}"]
        self.verdict = plain(css_class=f"kv-ex-verdict-{exercise.key}")
        self.answer = plain(tr("computing..."), css_class=f"kv-ex-answer-{exercise.key}")
        self.message = plain(css_class=f"kv-ex-message-{exercise.key}", color="#a40000")
        self.message.visible = False
        self.share = plain(css_class=f"kv-ex-share-{exercise.key}", mono=True)
        self.link = plain(css_class=f"kv-ex-link-{exercise.key}", mono=True)
        self.link.styles = {**self.link.styles, "word-break": "break-all", "font-size": "85%"}
        self.share.styles = {**self.share.styles, "word-break": "break-all", "font-size": "85%"}
        open_lab = link_button(
            tr("Open in the lab"), f"kv-ex-open-{exercise.key}", lambda: page.navigate(to_query(self.lab))
        )
        self.solution = pn.Column(
            pn.pane.Markdown(f"**{tr('Answer')}** ({tr('computed by the library')}):"),
            pn.pane.Bokeh(self.answer, margin=(5, 10), sizing_mode="stretch_width"),
            pn.pane.Markdown(f"**{tr('Why')}:** {tr(exercise.explanation)}", sizing_mode="stretch_width"),
            visible=False,
            sizing_mode="stretch_width",
            css_classes=[f"kv-ex-solution-{exercise.key}"],
        )
        # One Column in the card: a collapsed Card hides each of its children in the page, and
        # each hidden child costs a layout of the whole page (as in app/shell.py's folds).
        self.card = pn.Card(
            pn.Column(
                pn.pane.Markdown(f"**{tr('Question')}:** {tr(exercise.question)}", sizing_mode="stretch_width"),
                pn.Row(
                    *self.widgets.values(), sizing_mode="stretch_width", css_classes=[f"kv-ex-inputs-{exercise.key}"]
                ),
                pn.pane.Bokeh(self.message),
                pn.pane.Markdown(
                    f"**{tr('Your answer')}:** {tr(check.prompt)} ({self.tolerance_text(check.tolerance)})",
                    sizing_mode="stretch_width",
                ),
                pn.Row(
                    self.given,
                    link_button(tr("Check"), f"kv-ex-check-{exercise.key}", self.check),
                    link_button(tr("Show answer"), f"kv-ex-reveal-{exercise.key}", lambda: self.reveal(True)),
                ),
                pn.pane.Bokeh(self.verdict),
                self.solution,
                pn.pane.Markdown(f"**{tr('Share this exercise')}:**"),
                pn.pane.Bokeh(self.link, sizing_mode="stretch_width"),
                pn.Row(pn.pane.Markdown(f"**{tr('Share URL')}:**"), open_lab),
                pn.pane.Bokeh(self.share, sizing_mode="stretch_width"),
                sizing_mode="stretch_width",
                margin=0,
            ),
            title=tr(exercise.title),
            sizing_mode="stretch_width",
            css_classes=[f"kv-ex-{exercise.key}"],
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

    @staticmethod
    def tolerance_text(tolerance: float) -> str:
        return f"{tr('right within')} ± {tolerance:g}" if tolerance else tr("exactly")

    def show_share(self) -> None:
        loc = pn.state.location
        base = (
            f"{loc.protocol}//{loc.hostname}{':' + loc.port if loc.port else ''}{loc.pathname}"
            if loc and loc.hostname
            else ""
        )
        self.share.text = f"{base}?{urlencode(to_query(self.lab))}"
        exercise = f"{base}?{urlencode({'page': 'exercises', 'exercise': self.exercise.key})}"
        self.link.text = f"{exercise}\n{exercise}&answer=shown  ({tr('with the answer')})"

    def check(self) -> None:
        """Judge the reader's answer against the library's, then show the library's."""
        given = self.given.value if self.exercise.check.choices else (self.given.value_input or self.given.value)
        if self.expected is None:
            self.verdict.text = tr("the library is still computing the answer; check again in a moment")
            return
        try:
            verdict = self.exercise.check.judge(self.expected, given or "")
        except ValueError as err:
            self.verdict.text = tr_message(str(err))
            self.verdict.styles = {**self.verdict.styles, "color": "#a40000"}
            return
        self.say(verdict)
        self.reveal(True)

    def say(self, verdict: Verdict) -> None:
        head = tr("Right") if verdict.correct else tr("Not quite")
        self.verdict.text = (
            f"{head}: {tr('the library computes')} {tr(verdict.expected)} ({self.tolerance_text(verdict.tolerance)})"
        )
        self.verdict.styles = {**self.verdict.styles, "color": "#1a7f37" if verdict.correct else "#a40000"}

    def reveal(self, shown_: bool) -> None:
        self.revealed = self.solution.visible = shown_
        self.page.focus = self.exercise.key
        self.page.remember()

    def show(self, lines: list[tuple[str, str]], expected: float | str) -> None:
        """The library's answer, a line per figure: "• label: value" (no padded columns: they
        would not line up in Chinese, and long labels wrap on a phone)."""
        self.expected = expected
        self.answer.text = "\n".join(
            "\u2022 " + tr("{0}: {1}", "qualifier").format(tr_figure(label), tr(value)) for label, value in lines
        )


class ExercisesPage(Page):
    name = "exercises"
    label = "Exercises"

    def __init__(self, navigate) -> None:  # noqa: ANN001
        super().__init__(navigate)
        self.focus: str | None = None  # the exercise last worked on (kept in the URL)
        self.cards = {e.key: ExerciseCard(e, self) for e in EXERCISES}
        self.stale = set(self.cards)
        if pn.state.location is not None:  # the browser tells its host after the page is built
            pn.state.location.param.watch(
                lambda event: [c.show_share() for c in self.cards.values()], ["hostname", "port", "pathname"]
            )
        self.runner = Runner()
        self._layout = pn.Column(
            pn.pane.Markdown(f"## {tr('Exercises')}\n\n{tr(INTRO)}", sizing_mode="stretch_width"),
            self.runner.bar,
            *(c.card for c in self.cards.values()),
            sizing_mode="stretch_width",
            max_width=1100,
        )

    def layout(self) -> pn.viewable.Viewable:
        return self._layout

    def shown(self) -> None:
        for card in self.cards.values():
            card.show_share()  # the host may have become known since the page was built
        if self.stale:
            self.compute()

    def restore(self, query: Mapping[str, str]) -> list[str]:
        """`exercise=KEY` opens that exercise alone (the others folded); `answer=shown` shows its answer."""
        key, answer = query.get("exercise"), query.get("answer")
        messages = []
        if key is not None and key not in BY_KEY:
            messages.append(f"exercise: {shown(key)} is not allowed; expected one of {', '.join(BY_KEY)}; ignored")
            key = None
        if answer not in (None, "shown"):
            messages.append(f"answer: {shown(answer)} is not allowed; expected one of shown; ignored")
        self.focus = key
        for card in self.cards.values():
            card.card.collapsed = key is not None and card.exercise.key != key
        if key is not None:
            card = self.cards[key]
            card.revealed = card.solution.visible = answer == "shown"
        return messages

    def query(self) -> dict[str, str]:
        if self.focus is None:
            return {}
        return {"exercise": self.focus, **({"answer": "shown"} if self.cards[self.focus].revealed else {})}

    def changed(self, card: ExerciseCard) -> None:
        under_lock(lambda: self._recompute(card))

    def _recompute(self, card: ExerciseCard) -> None:
        if card.read_inputs():
            self.stale.add(card.exercise.key)
            card.answer.text = tr("computing...")
            card.expected = None
            card.verdict.text = ""
            self.compute()

    def compute(self) -> None:
        """Show every stale answer already known; compute the next one (the URL's first)."""
        for key in sorted(self.stale):
            card = self.cards[key]
            if (known := known_answer(key, card.lab)) is not None:
                card.show(known["lines"], known["expected"])
                self.stale.discard(key)
        if self.stale:
            key = self.focus if self.focus in self.stale else next(k for k in self.cards if k in self.stale)
            card = self.cards[key]
            self.runner.start(AnswerJob(card.exercise, card.lab), lambda answer, error: self._done(key, answer, error))

    def _done(self, key: str, answer: dict[str, Any] | None, error: str | None) -> None:
        if answer is not None:
            self.cards[key].show(answer["lines"], answer["expected"])
            self.stale.discard(key)
            self.compute()
        elif error and error != CANCELLED:
            for stale in self.stale:
                self.cards[stale].answer.text = tr_message(error)


INTRO = (
    "The lecture's exercises, answered by running the labs. Change an input and the answer is "
    "recomputed; the share URL opens the lab with the same parameters."
)
