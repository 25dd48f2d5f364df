"""The app shell: pages and lab navigation, schema-made widgets, URL state, messages, downloads.

The URL always holds the current lab and every parameter (plus `step` for animated
views, and `tour` for a lab the guided tour opened), or the page shown
(`page=tour|exercises|report`, with the page's own keys); opening it restores them. With
neither, the guided tour opens. A lab or page change adds a browser history entry; any other
change (a widget, a step, the language) replaces the current one, and Back or Forward opens
the entry's URL. Text from the URL is only ever shown through
`app.text.plain` (textContent): nothing from a URL is rendered as HTML.
"""
from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

import panel as pn

import app.views  # noqa: F401  (registers every view)
import kvweb.labs  # noqa: F401  (registers every lab)
from app import i18n, style
from app.i18n import tr, tr_message
from app.pages import Page, pages
from app.pages.tour import STEPS
from app.runner import CANCELLED, Runner, under_lock
from app.text import LiveText, plain
from app.url import URL_EXTRAS, History, install
from app.view import VIEWS, LabView
from app.widgets import as_text, link_button, widgets_for
from app.worker import one_message
from kvweb.jsonable import flatten, jsonable
from kvweb.lab import ADVANCED, LABS, PAPER_GPU, Lab, ParamError, shown
from kvweb.parsing import make, to_number
from kvweb.query import DEFAULT_LAB, from_query, to_query

# Characters; a longer query is refused as a whole. A share URL must fit: a 4000-character
# trace percent-encoded is up to 12,000, and the other parameters take far less than 4000.
MAX_QUERY = 16_000
MAX_STEP = 999_999
log = logging.getLogger(__name__)
LABS_NAV = "lab"  # the navigation entry that shows the labs
KEEP_LABS = 4  # labs whose widgets, view and last result are kept for a quick way back
FOLDS = ((ADVANCED, "details"), (PAPER_GPU, "assumptions"))  # parameter precedence -> folded card


@dataclass
class LabPane:
    """A lab's widgets and view as kept by the shell, and the last result shown with them."""
    widgets: dict[str, pn.widgets.Widget]
    controls: pn.Column
    view: pn.viewable.Viewable
    values: dict[str, Any] | None = None  # the parameters `result` was computed with
    result: dict[str, Any] | None = None


class Shell:
    def __init__(self) -> None:
        style.install()  # phones, wrapping, CJK fonts, viewport (app/style.py)
        self.lab: Lab | None = None
        self.result: dict[str, Any] = {}
        self.widgets: dict[str, pn.widgets.Widget] = {}  # the shown lab's
        self.views: dict[type[LabView], LabView] = {}
        self.view: LabView | None = None
        self.panes: dict[str, LabPane] = {}  # by lab name, the most recently shown last
        self.drawn: dict[LabView, dict[str, Any]] = {}  # the result each view draws
        self._quiet = False  # while the shell sets widgets itself
        self.page: str | None = None  # the page shown; None while a lab is shown
        self.pages: dict[str, Page] = {}
        self._search = None
        self._entry: str | None = None  # the lab or page of the browser's current history entry
        self.history = History()
        self.tour_step: int | None = None  # the tour step that opened the lab shown
        self.tour_bar = pn.Row(css_classes=["kv-tour-bar"], visible=False)
        self.nav = pn.widgets.RadioButtonGroup(css_classes=["kv-nav"], button_type="light")
        self.nav.param.watch(self._on_nav, "value")
        self.lab_select = pn.widgets.Select(width=280, css_classes=["kv-lab-select"])
        self.lab_select.param.watch(self._on_lab_select, "value")
        self.lang_select = pn.widgets.RadioButtonGroup(
            options={label: code for code, label in i18n.LANGS.items()}, value="en", css_classes=["kv-lang"],
        )
        self.lang_select.param.watch(self._on_lang, "value")
        self.summary = pn.pane.Markdown("", width=280)
        self.controls = pn.Column()
        # (a LiveText, never hidden: empty, it takes no room; a Div's new text or a hidden box shown
        # again would make BokehJS lay out the whole lab: ~0.3 s on the schedulers lab)
        self.message = LiveText(css_class="kv-message", color="#a40000", mono=True, margin=(2, 10))
        self.status = LiveText(css_class="kv-status", mono=True, margin=(2, 10))  # as the widgets above it
        # Whether the lab's model fits its GPU: one sentence when it does not (the view is then
        # hidden: nothing is drawn as if it ran) or when the result is a what-if.
        self.fit_note = plain(css_class="kv-fit-note", color="#8a4b00")
        self.fit_pane = pn.pane.Bokeh(self.fit_note, visible=False, sizing_mode="stretch_width")
        self.main = pn.Column(sizing_mode="stretch_width")
        self.runner = Runner()
        downloads = pn.Row(
            pn.widgets.FileDownload(callback=self._json_file, filename="result.json", label="result.json", width=130),
            pn.widgets.FileDownload(callback=self._csv_file, filename="result.csv", label="result.csv", width=130),
        )
        sidebar = pn.Column(
            self.lab_select, self.summary, self.controls, downloads, self.status,
            self.runner.bar, self.runner.cancel, width=300,
        )
        self.header = pn.pane.Markdown()
        # The lab area and the page area both stay in the document and are shown in turn:
        # detaching the sidebar's models and attaching them again confuses the front end.
        self.lab_area = pn.Column(self.tour_bar, pn.Row(sidebar, self.main, sizing_mode="stretch_width"),
                                  sizing_mode="stretch_width", visible=False)
        self.page_area = pn.Column(sizing_mode="stretch_width", visible=False)
        self.layout = pn.Column(pn.Row(self.header, self.nav, self.lang_select), self.message,
                                self.page_area, self.lab_area, self.history.layout, sizing_mode="stretch_width")
        if pn.state.curdoc is not None:
            install()  # before Panel makes a Location that parses the query itself
            pn.state.onload(self._on_load)
        else:
            self.open_query("")

    def _on_load(self) -> None:
        """The browser's URL is known only once the page has loaded (in a worker, too)."""
        self.history.on_pop(self._on_pop)
        self.open_query(pn.state.location.search)

    def _on_pop(self, search: str) -> None:
        """Back or Forward: the browser already shows the entry; the app follows its URL."""
        self._entry = None  # the next URL written replaces the entry, whatever it shows
        self.open_query(search)

    # -- URL ----------------------------------------------------------------
    def open_query(self, search: str) -> None:
        """Restore the lab, parameters and step a URL holds; bad parts become messages.

        Whatever goes wrong on the way, the page stays usable: it shows the tour and says so.
        """
        if search == self._search:
            return
        try:
            self._open(search)
        except Exception as err:  # noqa: BLE001  (no URL may leave a blank page)
            log.warning("could not open the URL query %s: %r", shown(search, 200), err)
            self.show_page("tour", [f"this URL could not be opened ({type(err).__name__}); showing the tour"])

    def _open(self, search: str) -> None:
        messages: list[str] = []
        if len(search) > MAX_QUERY:
            messages.append(f"the URL query is {len(search)} characters long; at most {MAX_QUERY} are read")
            search = ""
        query = dict(parse_qsl(search.lstrip("?"), keep_blank_values=True))
        lang = query.get("lang", "en")
        if lang not in i18n.LANGS:
            messages.append(f"lang: {shown(lang)} is not allowed; expected one of {', '.join(i18n.LANGS)}; "
                            "using the default")
            lang = "en"
        self._set_lang(lang)
        page = query.get("page")
        if page is not None or "lab" not in query:
            if page is not None and page not in pages():
                messages.append(f"page: {shown(page)} is not allowed; expected one of {', '.join(pages())}; "
                                "using the default")
                page = None
            self.show_page(page or "tour", messages, query)
            return
        lab, problems = from_query(query, ignore=URL_EXTRAS)
        self.tour_step = self._tour_step(query.get("tour"), problems)
        step = to_number(query.get("step", "0"), integer=True)
        if step is None or not 0 <= step <= MAX_STEP:
            problems.append(f"step: {shown(query['step'])} is not allowed; expected a whole number; using 0")
            step = 0
        self.show(lab, messages + problems, step if "step" in query else None)

    @staticmethod
    def _tour_step(text: str | None, problems: list[str]) -> int | None:
        if text is None:
            return None
        step = to_number(text, integer=True)
        if step is None or not 1 <= step <= len(STEPS):
            problems.append(f"tour: {shown(text)} is not allowed; expected an integer from 1 to {len(STEPS)}; ignored")
            return None
        return step

    def navigate(self, query: dict[str, str]) -> None:
        """Open a URL query (a lab with parameters, or a page) as if it had been typed."""
        if i18n.current() != "en":
            query = {**query, "lang": i18n.current()}
        search = "?" + urlencode(query)
        under_lock(lambda: self.open_query(search))

    def _write_url(self) -> None:
        """Show the state's URL: a new history entry for a new lab or page, else in place."""
        if pn.state.location is None or (self.lab is None and self.page is None):
            return
        if self.page:
            query = {"page": self.page, **self.pages[self.page].query()}
        else:
            query = to_query(self.lab)
            if self.tour_step is not None:
                query["tour"] = str(self.tour_step)
        if i18n.current() != "en":
            query["lang"] = i18n.current()
        if not self.page and self.view is not None and self.view.animated:
            query["step"] = str(self.view.player.value)
        self._search = "?" + urlencode(query)
        entry = self.page or f"{self.lab.lab_name} {self.tour_step}"
        self.history.show(self._search, push=self._entry is not None and entry != self._entry)
        self._entry = entry

    # -- pages ---------------------------------------------------------------
    def show_page(self, name: str, messages: list[str], query: dict[str, str] | None = None) -> None:
        """Show a page; with a URL query, in the state it holds (else as the page was left)."""
        self.page = name
        if name not in self.pages:
            self.pages[name] = pages()[name](self.navigate)
            self.pages[name].remember = self._write_url
        if query is not None:
            messages = messages + self.pages[name].restore(query)
        self._set_nav(name)
        self.page_area.objects = [self.pages[name].layout()]
        self.lab_area.visible, self.page_area.visible = False, True
        self._say(messages)
        self._write_url()
        self.pages[name].shown()

    def _set_nav(self, value: str) -> None:
        entries = [(cls.label, name) for name, cls in pages().items()]
        options = {tr(label): name for label, name in [entries[0], ("Labs", LABS_NAV), *entries[1:]]}
        if self.nav.options != options:
            self.nav.options = options
        self.nav.value = value

    def _on_nav(self, event: Any) -> None:
        if event.new == LABS_NAV and self.page is not None:
            self.navigate(to_query(self.lab) if self.lab is not None else {"lab": DEFAULT_LAB})
        elif event.new != LABS_NAV and event.new != self.page:
            self.navigate({"page": event.new})

    # -- lab and parameters -----------------------------------------------
    def show(self, lab: Lab, messages: list[str], step: int | None = 0) -> None:
        """Open `lab`; step None: the frame its result opens on (`opening_step`, else 0).

        The last few labs shown are kept (`KEEP_LABS`): coming back to one puts its widgets and
        view back instead of making new ones, and with the same parameters its last result is
        shown without a rerun. They are not kept in the page, hidden: Bokeh lays out hidden
        components too, and every widget change would pay for them (docs/site.md).
        """
        self.lab = lab
        self.page = None
        if self.lab_select.value != lab.lab_name:
            self.lab_select.param.update(value=lab.lab_name)
        self._set_nav(LABS_NAV)
        self.lab_area.visible, self.page_area.visible = True, False
        self._show_tour_bar()
        self.summary.object = tr(lab.summary)
        view_class = VIEWS[lab.lab_name]
        if view_class not in self.views:
            self.views[view_class] = view_class()
            self.views[view_class].player.param.watch(lambda event: self._write_url(), "value")
        self.view = self.views[view_class]
        pane = self._pane(lab, self.view)
        self.widgets = pane.widgets
        self._quiet = True  # the widgets follow the lab: that is no learner's change
        try:
            for name, widget in pane.widgets.items():
                widget.value = getattr(lab, name)
        finally:
            self._quiet = False
        with self._frozen():  # Bokeh walks the document's models once, not once per layout
            self.controls.objects = [pane.controls]
            self.main.objects = [self.fit_pane, pane.view]
        if pane.result is not None and pane.values == lab.values():
            self._show_result(pane.result, None, messages, step)
        else:
            self.run(messages, step)

    def _pane(self, lab: Lab, view: LabView) -> LabPane:
        """The lab's kept widgets (made on its first showing), now the most recently shown."""
        pane = self.panes.pop(lab.lab_name, None)
        if pane is None:
            widgets = widgets_for(lab)
            for widget in widgets.values():
                widget.param.watch(self._on_widget, "value")
            groups: dict[float, list[pn.widgets.Widget]] = {}
            for n, w in widgets.items():
                groups.setdefault(lab.param[n].precedence or 0, []).append(w)
            # One Column in each folded card: a collapsed Card hides each of its children in the
            # page, and each hidden child costs a layout of the whole page (seconds per switch
            # beside a big view, with a dozen widgets folded).
            folded = [pn.Card(pn.Column(*groups[level], margin=0), title=tr(title), collapsed=True, width=290,
                              css_classes=[f"kv-fold-{title}"]) for level, title in FOLDS if level in groups]
            pane = LabPane(widgets, pn.Column(*groups.get(0, []), *folded, margin=0), view.panel)
        self.panes[lab.lab_name] = pane
        while len(self.panes) > KEEP_LABS:
            self.panes.pop(next(iter(self.panes)))
        return pane

    @contextmanager
    def _frozen(self) -> Iterator[None]:
        doc = pn.state.curdoc
        if doc is None:
            yield
            return
        with doc.models.freeze():
            yield

    def _show_tour_bar(self) -> None:
        """From a lab the tour opened: back to the tour, and on to its next step."""
        step = self.tour_step
        self.tour_bar.visible = step is not None
        if step is None:
            self.tour_bar.objects = []
            return
        buttons = [link_button(f"← {tr('Guided tour')}", "kv-tour-back", lambda: self.navigate({"page": "tour"}))]
        if step < len(STEPS):
            following = STEPS[step]
            buttons.append(link_button(f"{tr('Next step')}: {step + 1}. {tr(following.title)} →", "kv-tour-next",
                                       lambda: self.navigate({**following.links[0][1], "tour": str(step + 1)})))
        self.tour_bar.objects = [pn.pane.Markdown(f"**{tr('Guided tour')} {step}/{len(STEPS)}:** "
                                                  f"{tr(STEPS[step - 1].title)}"), *buttons]

    def _set_lang(self, lang: str) -> None:
        """Labels are made in the session's language: a switch rebuilds them and the views."""
        if lang != i18n.current():
            self.views.clear()
            self.pages.clear()
            self.panes.clear()
            self.drawn.clear()
        i18n.use(lang)
        self.lang_select.value = lang
        self.header.object = "### " + tr("kvweb: the KV cache of LLM serving, computed for real")
        self.lab_select.name = tr("lab")
        titles = {tr(LABS[n].title): n for n in sorted(LABS, key=lambda n: LABS[n].title)}
        if self.lab_select.options != titles:
            self.lab_select.options = titles

    def _on_lang(self, event: Any) -> None:
        if event.new == i18n.current():
            return
        self._set_lang(event.new)
        if self.page is not None:
            self.show_page(self.page, [])
        elif self.lab is not None:
            self.show(self.lab, [], self.view.player.value if self.view else 0)

    def _on_lab_select(self, event: Any) -> None:
        # Only a person's choice counts: setting the options (first load, language switch)
        # also moves the value, and must not open a lab behind a page.
        if self.page is None and self.lab is not None and event.new != self.lab.lab_name:
            self.tour_step = None
            self.show(LABS[event.new](), [])

    def _on_widget(self, event: Any) -> None:
        if self._quiet:
            return
        under_lock(self._apply_widgets)

    def _apply_widgets(self) -> None:
        assert self.lab is not None
        texts = {name: as_text(w.value) for name, w in self.widgets.items()}
        try:
            lab = make(type(self.lab), texts)
        except ParamError as err:
            self._say([str(err)])
            pn.state.execute(self._revert_widgets)
            return
        if lab.values() == self.lab.values():
            return  # a widget went back to the lab's value
        self.lab = lab
        self.run([], self.view.player.value if self.view is not None else 0)  # kept where the trace is long enough

    async def _revert_widgets(self) -> None:
        """Refused input: every box shows the lab's value again. Run as a task, after the
        change event: a value set while Panel handles that widget's change is not sent back."""
        for name, widget in self.widgets.items():
            widget.value = getattr(self.lab, name)

    # -- running ------------------------------------------------------------
    def run(self, messages: list[str], step: int | None = 0) -> None:
        assert self.lab is not None
        self.status.text = f"{tr('running')} {self.lab.lab_name}"
        self.runner.start(self.lab, lambda result, error: self._show_result(result, error, messages, step))

    def _show_result(self, result: dict[str, Any] | None, error: str | None, messages: list[str],
                     step: int | None) -> None:
        if error == CANCELLED:
            self._say([*messages, tr("run cancelled")])
            self.status.text = tr("ready")
            return
        self.result = result or {}
        self._say([*messages, error] if error else messages)
        assert self.lab is not None
        pane = self.panes[self.lab.lab_name]  # a run for a lab no longer shown never ends here
        if result is not None:
            pane.values, pane.result = self.lab.values(), result
        note, fits = self.result.get("fit_note"), self.result.get("fits", True)
        self.fit_note.text = tr_message(note) if note else ""
        self.fit_pane.visible = bool(note)
        pane.view.visible = fits
        with one_message():  # the redraw reaches the page at once (static site)
            if self.view is not None and self.result and fits:
                with self.view.steps_held():
                    if self.drawn.get(self.view) is not result:  # else the view shows it already
                        self.view.update(self.lab, self.result)
                        self.drawn[self.view] = result
                    step = min(self.result.get("opening_step", 0) if step is None else step, self.view.player.end)
                    self.view.player.value = step
                self.view.show_step(step)
            self._write_url()
            self.status.text = tr("ready")

    def _say(self, messages: list[str]) -> None:
        self.message.text = "\n".join(tr_message(m) for m in messages)

    # -- downloads ------------------------------------------------------------
    def _record(self) -> dict[str, Any]:
        assert self.lab is not None
        return {"lab": self.lab.lab_name, "params": jsonable(self.lab.values()), "result": self.result}

    def _json_file(self) -> io.BytesIO:
        return io.BytesIO(json.dumps(self._record(), indent=1).encode())

    def _csv_file(self) -> io.BytesIO:
        """Every scalar of the record as one `key,value` row (nested keys joined by dots)."""
        text = io.StringIO()
        csv.writer(text).writerows([("key", "value"), *flatten(self._record())])
        return io.BytesIO(text.getvalue().encode())
