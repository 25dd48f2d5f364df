"""The view contract: how a lab's result becomes Bokeh figures.

A view builds its figures and ColumnDataSources once, then `update` replaces their data
from a new result. Animated views get a `StepPlayer` and implement `show_step`; the shell
keeps the player's position in the URL (`step=`). Views never compute: everything they draw
is in the lab's result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import panel as pn
import param
from bokeh.models import (
    BasicTicker,
    ColumnDataSource,
    CustomJSTickFormatter,
    DataTable,
    InlineStyleSheet,
    Plot,
    Range1d,
    StringFormatter,
    TableColumn,
)
from panel.reactive import ReactiveHTML

from app.i18n import columns as text_width, tr
from app.redraw import one_message
from app.site.screen import screen
from app.text import LiveText
from kvweb.gpu.explain import Explanation
from kvweb.lab import Lab

VIEWS: dict[str, type[LabView]] = {}  # filled by importing app.views: `view_class`


def view_class(lab_name: str) -> type[LabView]:
    """The view of `lab_name`. The views are imported when the first lab is shown, not at start:
    the start page is the tour (a shorter cold load in the static site)."""
    import app.views  # noqa: F401  (registers every view)

    return VIEWS[lab_name]


def columns(*names: str) -> dict[str, list]:
    """Empty ColumnDataSource data with these columns."""
    return {n: [] for n in names}


def player_labels() -> dict[str, str]:
    """The player's words in the session's language: each button's label and tooltip, and the
    readout's template ({k}: the step shown, the one `step=` in the URL holds; {n}: the last)."""
    return {
        "first": tr("|< first"),
        "first_tip": tr("go to the first step"),
        "previous": tr("< back"),
        "previous_tip": tr("one step back (left arrow)"),
        "play": tr("play >"),
        "play_tip": tr("play the steps in order (space)"),
        "pause": tr("pause ||"),
        "pause_tip": tr("stop playing (space)"),
        "next": tr("next >"),
        "next_tip": tr("one step forward (right arrow)"),
        "last": tr("last >|"),
        "last_tip": tr("go to the last step"),
        "scrub_tip": tr("drag to any step"),
        "readout": tr("step {k} of {n}"),
    }


class StepPlayer(ReactiveHTML):
    """Play / pause / step / scrub through a trace, in the browser (no round trip per frame).

    Labelled buttons with tooltips, a "step k of N" readout of `value` (the number the URL's
    `step=` holds), and the keys left / right (one step) and space (play / pause) anywhere on
    the page except in a text box or on a slider. Playing stops at the last step.
    """

    # No string parameter may reach the browser: Panel cleans each with nh3, a compiled
    # package the static site (Pyodide) cannot carry. `name` is the only one; keep it home.
    name = param.String(default="step", precedence=-1)
    value = param.Integer(default=0, doc="the step shown")
    start = param.Integer(default=0)
    end = param.Integer(default=0, doc="the last step")
    interval = param.Integer(default=600, doc="milliseconds per step while playing")
    playing = param.Boolean(default=False)
    labels = param.Dict(default={}, doc="player_labels() of the session")

    _template = """
<div id="bar" style="display: flex; flex-wrap: wrap; align-items: center; gap: 4px; font: 13px sans-serif">
  <button id="first" class="first" onclick="${script('first')}"></button>
  <button id="previous" class="previous" onclick="${script('previous')}"></button>
  <button id="play" class="play" onclick="${script('play')}"></button>
  <button id="pause" class="pause" onclick="${script('pause')}"></button>
  <button id="next" class="next" onclick="${script('next')}"></button>
  <button id="last" class="last" onclick="${script('last')}"></button>
  <input id="scrub" class="scrubber" type="range" style="flex: 1 1 120px; min-width: 100px" oninput="${script('scrub')}"></input>
  <span id="readout" class="kv-step-readout" aria-live="polite" style="white-space: nowrap; font-weight: bold"></span>
</div>"""
    _scripts = {
        "render": """
            const L = data.labels
            for (const [id, el] of [["first", first], ["previous", previous], ["play", play], ["pause", pause],
                                    ["next", next], ["last", last]]) {
              el.textContent = L[id]
              el.title = L[id + "_tip"]
              el.setAttribute("aria-label", L[id + "_tip"])
            }
            scrub.title = L.scrub_tip
            state.go = (v) => { data.value = Math.max(data.start, Math.min(data.end, v)) }
            state.key = (e) => {
              if (!view.el.isConnected || view.el.getClientRects().length === 0) return
              if (e.ctrlKey || e.metaKey || e.altKey) return
              const t = e.composedPath()[0]
              const tag = t && t.tagName ? t.tagName : ""
              if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(tag)
                        || (t.getAttribute && t.getAttribute("role") === "slider"))) return
              if (e.key === "ArrowLeft") { data.playing = false; state.go(data.value - 1) }
              else if (e.key === "ArrowRight") { data.playing = false; state.go(data.value + 1) }
              else if (e.key === " " && tag !== "BUTTON") { if (data.playing) self.pause(); else self.play() }
              else return
              e.preventDefault()
            }
            document.addEventListener("keydown", state.key)
            self.show()
        """,
        "show": """
            scrub.min = data.start
            scrub.max = data.end
            scrub.value = data.value
            readout.textContent = data.labels.readout.replace("{k}", data.value).replace("{n}", data.end)
            play.setAttribute("aria-pressed", String(data.playing))
            play.style.fontWeight = data.playing ? "bold" : ""
        """,
        "value": "self.show()",
        "end": "self.show()",
        "start": "self.show()",
        "playing": """
            clearInterval(state.timer)
            if (data.playing) state.timer = setInterval(() => {
              if (data.value >= data.end) data.playing = false
              else data.value = data.value + 1
            }, data.interval)
            self.show()
        """,
        "first": "data.playing = false; state.go(data.start); first.blur()",
        "previous": "data.playing = false; state.go(data.value - 1); previous.blur()",
        "next": "data.playing = false; state.go(data.value + 1); next.blur()",
        "last": "data.playing = false; state.go(data.end); last.blur()",
        "play": "if (data.value >= data.end) data.value = data.start; data.playing = true; play.blur()",
        "pause": "data.playing = false; pause.blur()",
        "scrub": "data.playing = false; state.go(parseInt(scrub.value))",
        "remove": 'clearInterval(state.timer); document.removeEventListener("keydown", state.key)',
    }


def set_range(axis: Range1d, end: float, start: float = 0.0) -> None:
    """Set a figure's axis span from Python, and make it the one Reset goes back to.

    An automatic range (Bokeh's default DataRange1d) is worked out in the page while a figure
    paints; figures that share one move it in turn and repaint each other: a second round of
    paints after every redraw (about 90 ms of the schedulers lab's in the static site).
    """
    end = end if end > start else start + 1.0
    axis.update(start=start, end=end, reset_start=start, reset_end=end)


def steady_ticks(fig: Plot, digits: int) -> None:
    """Whole-number y tick labels, padded to `digits` digits with figure spaces (a digit's width).

    A y axis as wide as its widest label changes width with the range ("40" -> "100"), and BokehJS
    then lays out the page and paints every figure in it once more (~90 ms a redraw in the
    static site); padded labels keep the width, so a new range only repaints the figure.
    """
    fig.yaxis.ticker = BasicTicker(min_interval=1)
    fig.yaxis.formatter = CustomJSTickFormatter(
        args={"digits": digits}, code="return String(Math.round(tick)).padStart(digits, '\u2007')"
    )


def percent(fraction: float, digits: int = 1) -> str:
    """A fraction as every view writes a percentage: 0.353 -> "35.3 %" (`digits` decimals, a
    space before the sign). Bokeh hovers write theirs with the format "{0.0 %}"."""
    return f"{100 * fraction:.{digits}f} %"


def padded_end(*values: Any) -> float:
    """An axis end 5 % above the largest of the values (number arrays or lists), as Bokeh's
    automatic range pads it."""
    return 1.05 * max((float(np.max(v)) for v in values if len(v)), default=0.0)


def serving_rows() -> dict[str, tuple[str, Any]]:
    """The figures-table rows the engine's and the schedulers' tables both show, by key, in
    the session's language: (label, run -> cell text)."""
    return {
        "throughput": (tr("throughput (tokens/s)"), lambda r: f"{r['throughput_tok_s']:,.1f}"),
        "slo": (tr("SLO attainment"), lambda r: f"{100 * r['slo_attainment']:.1f} %"),
        "requests": (
            tr("requests/s: arrived / served (whole run)"),
            lambda r: f"{r['arrival_rate_per_s']:.2f} / {r['requests_per_s_whole_run']:.2f}",
        ),
        "batch": (tr("mean batch"), lambda r: f"{r['mean_batch']:.1f}"),
        "preemptions": (tr("preemptions"), lambda r: f"{r['preemptions']:,}"),
        "recomputed": (tr("recomputed tokens"), lambda r: f"{r['recomputed_tokens']:,}"),
        "time": (tr("simulated time (s)"), lambda r: f"{r['sim_time_s']:.1f}"),
        "finished": (tr("finished / rejected"), lambda r: f"{r['finished']:,} / {r['rejected']:,}"),
    }


def figures_rows(
    rows: list[tuple[str, Any]], runs: list[dict[str, Any] | None], names: list[str]
) -> tuple[list[str], list[list[str]]]:
    """A figures table for `TextTable.show`: `rows` are (label, run -> cell text); the header
    names the runs, each row is a label and one cell per run ("-" for a run that did not run)."""
    return ["", *names], [[label, *("-" if r is None else get(r) for r in runs)] for label, get in rows]


CHAR_PX = 7.0  # one column of text (a Chinese character takes two) in a table cell, in pixels
CELL_PAD_PX = 14  # a cell's padding and border
ROW_PX = 26  # a table row
LINE_PX = 17  # one line of a row label that wraps
MAX_ROWS = 16  # more rows scroll inside the table
PHONE_PX = 370  # a table wider than this scrolls sideways on a phone (390 px), its first column fixed
LABEL_WIDE_PX = 480  # on a wider page, a first column of row labels at most this wide: one line each
LABEL_PX = (140, 240)  # on a phone, a first column of row labels is at most as wide as the phone leaves beside
# one column of figures, within these bounds: a longer label wraps
WORDS = r"[\u2e80-\uffff]|[^\s\u2e80-\uffff]+"  # a word or a Chinese character: lines break between them
HEADER_LINE_PX = 16  # one line of a column's title (BokehJS's header: 16 px lines, 8 px padding)


def table_css(header_lines: int, wrapping: list[int]) -> str:
    """The columns of text in `wrapping` (their longest cell on several lines: `wrapped_lines`; rows
    as tall as the most lines) wrap, and the titles wrap on `header_lines` lines; figures never wrap,
    nor text laid out on one line (a font wider than `CHAR_PX` then cuts its end, never a second line)."""
    wrap = f"white-space: normal; overflow-wrap: anywhere; line-height: {LINE_PX}px; padding-top: 4px;"
    cells = "".join(f".slick-cell.l{i} {{ {wrap} }}\n" for i in wrapping)
    return (
        cells + f".slick-header-columns .slick-header-column.ui-state-default {{ white-space: normal; "
        f"height: {HEADER_LINE_PX * header_lines}px; }}\n"
    )


def fit_widths(header: list[str], cells: list[list[Any]], max_px: int = 360) -> list[int]:
    """Each column's width in pixels: enough for its header and its widest cell, Chinese
    characters counted twice, at most `max_px`. `cells`: one list per column."""
    return [
        min(max_px, CELL_PAD_PX + round(CHAR_PX * max(text_width(str(t)) for t in [title, *column])))
        for title, column in zip(header, cells)
    ]


def wrapped_lines(text: str, width_px: int) -> int:
    """How many lines `text` takes in a cell `width_px` wide, wrapped between words and between
    Chinese characters (a word wider than the cell anywhere). A tenth of the line is kept spare:
    a font's widths vary about `CHAR_PX`."""
    if CELL_PAD_PX + CHAR_PX * text_width(text) <= width_px:
        return 1
    room = max(1, int(0.9 * (width_px - CELL_PAD_PX) / CHAR_PX))  # columns of text a line holds
    lines, used, space = 1, 0, False
    for token in re.findall(rf"\s+|{WORDS}", text):
        if token.isspace():
            space = True
            continue
        width = text_width(token)
        if used and used + space + width > room:
            lines, used = lines + 1, width
        else:
            used += space + width
        space = False
        while used > room:  # a word longer than a line breaks anywhere
            lines, used = lines + 1, used - room
    return lines


def titled_widths(header: list[str], data: dict[str, list[str]], widths: list[int], figures: list[bool]) -> list[int]:
    """A column of figures under a longer title is as wide as its figures, or as its title on two
    lines if that is wider, and never narrower than the title's longest word (a title breaks only
    between words): figures stay narrow, their titles wrap. Other columns keep `widths`."""
    narrow = []
    for title, cells, width, figure in zip(header, data.values(), widths, figures):
        if figure:
            least = max(fit_widths([""], [cells])[0], fit_widths([""], [re.findall(WORDS, title)])[0])
            width = next((w for w in range(least, width, 7) if wrapped_lines(title, w) <= 2), width)
        narrow.append(width)
    return narrow


def phone_widths(widths: list[int]) -> list[int]:
    """A table of row labels and figures too wide for a phone: its label column narrowed to what
    the phone leaves beside its widest column of figures, within `LABEL_PX` (its labels then
    wrap). Other tables keep their widths."""
    if len(widths) < 2 or sum(widths) <= PHONE_PX:
        return widths
    low, high = LABEL_PX
    return [min(widths[0], max(low, min(high, PHONE_PX - max(widths[1:])))), *widths[1:]]


def wide_widths(header: list[str], labels: list[str], widths: list[int]) -> list[int]:
    """A table of row labels on a page wider than a phone's: its label column as wide as its
    longest label, up to `LABEL_WIDE_PX` (beyond the other columns' bound), so each label
    takes one line. Other columns keep `widths`."""
    return [*fit_widths(header[:1], [labels], LABEL_WIDE_PX), *widths[1:]]


def fixed_columns(widths: list[int]) -> int | None:
    """A table too wide for a phone keeps its first column in view while the others scroll
    sideways (`frozen_columns`): the row's labels, or the figure that names the row (a rate, k, a
    step). A table of one column has nothing beside it to scroll."""
    return 1 if len(widths) > 1 and sum(widths) > PHONE_PX else None


def text_table(header: list[str], rows: list[list[Any]]) -> tuple[dict[str, list[str]], list[int]]:
    """A table's cells as DataTable columns `c0, c1, ...` of text (numbers formatted by the
    caller, so the cells read as the library's figures), and the columns' widths."""
    data = {f"c{i}": [str(row[i]) for row in rows] for i in range(len(header))}
    return data, fit_widths(header, list(data.values()))


def is_figure(cells: list[str]) -> bool:
    """Whether a column holds figures (every cell starts like a number): those align right."""
    return bool(cells) and all(c[:1].isdigit() or c[:2].lstrip("-+.")[:1].isdigit() for c in cells if c)


class TextTable:
    """A table of text, a Bokeh DataTable: `show(header, rows)` replaces its header and cells.

    Each column is as wide as its text (Chinese included), a row label on one line. A table too
    wide for a phone scrolls sideways inside itself, never the page, its first column (row labels
    or the figure naming the row) fixed while the others scroll (`fixed_columns`: two grids side
    by side on the page). On a phone's page (app/site/screen.py) a first column of row labels is
    also narrowed and its labels wrap (`phone_widths`), so each label shows beside a column of
    figures; the table lays itself out again when the page crosses a phone's width. A column of
    figures is as narrow as its figures, its title wrapping (`titled_widths`). Cells are text,
    never HTML. Columns of figures align right, the others (labels, names) left.

    A new header, alignment, page width or a cell wider than its column gives the table new
    columns (a re-render and a layout of the page); otherwise only the cells change, and the page
    repaints the table alone (BokehJS 3.9 redraws the rows of new data with as many rows only
    through the guard in app/site/resources.py: bokeh#15328)."""

    def __init__(self, name: str, css_class: str, max_rows: int = MAX_ROWS) -> None:
        self.max_rows = max_rows  # more rows scroll inside the table
        self.source = ColumnDataSource({}, name=name)
        self.style = InlineStyleSheet(css=table_css(1, []))
        self.table = DataTable(
            source=self.source,
            columns=[],
            index_position=None,
            sortable=False,
            reorderable=False,
            autosize_mode="none",
            row_height=ROW_PX,
            height=ROW_PX + 8,
            sizing_mode="stretch_width",
            css_classes=[css_class],
            stylesheets=[self.style],
        )
        self.pane = pn.pane.Bokeh(self.table, sizing_mode="stretch_width")
        self.shown: tuple[list[str], dict[str, list[str]], list[int]] | None = None  # header, cells, widths
        self.narrow = False  # laid out for a phone's page
        self.screen = screen()
        if self.screen is not None:
            self.screen.tables.add(self)

    def show(self, header: list[str], rows: list[list[Any]]) -> None:
        data, widths = text_table(header, rows)
        self.source.data = data
        self.shown = (header, data, widths)
        self.relayout()

    def relayout(self) -> None:
        """Lay the cells shown out for the page's width: the columns' widths, the rows' height."""
        if self.shown is None:
            return
        header, data, widths = self.shown
        narrow = self.screen is not None and self.screen.narrow
        align = [StringFormatter(text_align="right" if is_figure(cells) else "left") for cells in data.values()]
        labels = bool(align) and align[0].text_align == "left"  # a first column of row labels
        widths = titled_widths(header, data, widths, [f.text_align == "right" for f in align])
        if labels:
            widths = phone_widths(widths) if narrow else wide_widths(header, data["c0"], widths)
        columns = self.table.columns
        if (
            [c.title for c in columns] != header
            or narrow != self.narrow
            or any(c.width < w for c, w in zip(columns, widths))
            or [c.formatter.text_align for c in columns] != [f.text_align for f in align]
        ):
            self.table.columns = [
                TableColumn(field=f"c{i}", title=title, width=w, formatter=f, sortable=False)
                for i, (title, w, f) in enumerate(zip(header, widths, align))
            ]
        self.narrow = narrow
        widths = [c.width for c in self.table.columns]
        texts = [(i, f"c{i}") for i, f in enumerate(align) if f.text_align == "left"]  # labels, names, outputs
        lines = {i: max((wrapped_lines(t, widths[i]) for t in data[c]), default=1) for i, c in texts}
        titles = max((wrapped_lines(t, w) for t, w in zip(header, widths)), default=1)
        self.style.css = table_css(titles, [i for i, n in lines.items() if n > 1])
        lines = max(lines.values(), default=1)
        row = ROW_PX if lines == 1 else lines * LINE_PX + 8
        wide = sum(widths) > PHONE_PX  # a phone scrolls it sideways, its first column fixed
        rows = len(data["c0"]) if data else 0
        self.table.update(
            row_height=row,
            frozen_columns=fixed_columns(widths),
            height=ROW_PX + HEADER_LINE_PX * (titles - 1) + row * min(rows, self.max_rows) + 8 + (18 if wide else 0),
        )

    def select(self, row: int) -> None:
        """Mark one row (the one the figure shows)."""
        self.source.selected.indices = [row]


class Explainer:
    """A picker of a view's headline figures and, under it, the chosen one's formula with the values
    put in (the library's `Explanation`s: kvweb/gpu/explain.py), one per run when a view shows several.
    Plain text, in the session's language."""

    def __init__(self, css_class: str) -> None:
        self.explained: dict[str, dict[str, Explanation]] = {}
        self.select = pn.widgets.Select(name=tr("how is it computed?"), css_classes=[css_class], width=320)
        self.select.param.watch(lambda event: self._draw(), "value")
        self.text = LiveText(css_class=f"{css_class}-text", mono=True)  # new text every run: no page layout
        self.layout = pn.Column(self.select, self.text, sizing_mode="stretch_width")

    def show(self, explained: dict[str, dict[str, Explanation]], labels: dict[str, str], default: str) -> None:
        """`explained`: figure key -> run name ("" for one run) -> its explanation; `labels`: the
        figures' names as the view shows them. The figure picked stays picked when it is still there."""
        self.explained = explained
        chosen = self.select.value if self.select.value in explained else default
        self.select.param.update(options={labels[key]: key for key in explained}, value=chosen)
        self._draw()

    def _draw(self) -> None:
        runs = self.explained.get(self.select.value, {})
        self.text.text = "\n\n".join(f"{name}: {e.text(tr)}" if name else e.text(tr) for name, e in runs.items())


def no_navigation(query: dict[str, str]) -> None:
    """A view's links before the app gives it the router's `navigate` (a view made alone, in tests)."""


class LabView:
    labs: ClassVar[tuple[str, ...]] = ()
    animated: ClassVar[bool] = False
    # Opens another URL query as if it had been typed (a link to another lab): the router's, set
    # by the app (app/panes.py).
    navigate: Callable[[dict[str, str]], None] = staticmethod(no_navigation)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.labs:
            VIEWS[name] = cls

    def __init__(self) -> None:
        self.player = StepPlayer(
            labels=player_labels(),
            visible=self.animated,
            css_classes=["kv-player"],
            sizing_mode="stretch_width",
            min_height=36,
            margin=(5, 10),
        )
        self.player.param.watch(self._on_step, "value")
        self._held = False

    def _on_step(self, event: param.parameterized.Event) -> None:
        if self._held:
            return
        with one_message():  # one step, one message to the page (static site)
            self.show_step(event.new)

    @contextmanager
    def steps_held(self) -> Iterator[None]:
        """Moves of the player inside draw nothing: the caller draws the step it lands on once.
        (A new result moves it twice: `set_steps` keeps it within the trace, then the shell picks
        the step to open on; each draw is three memory maps sent to the page.)"""
        self._held = True
        try:
            yield
        finally:
            self._held = False

    def layout(self) -> pn.viewable.Viewable:
        """The view's figures and texts in one Panel layout (called once: see `panel`)."""
        raise NotImplementedError

    @cached_property
    def panel(self) -> pn.viewable.Viewable:
        """The layout, made once and kept: the shell puts the same one back when a learner comes
        back to the lab, instead of making a new one."""
        return self.layout()

    def update(self, lab: Lab, result: dict[str, Any]) -> None:
        raise NotImplementedError

    def set_steps(self, count: int) -> None:
        """Animated views call this from `update`: the scrubber spans the trace."""
        self.player.end = max(0, count - 1)
        if self.player.value > self.player.end:
            self.player.value = self.player.end

    def show_step(self, index: int) -> None:
        """Animated views draw step `index` of the last result."""
