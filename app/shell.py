"""The app shell: pages and lab navigation, schema-made widgets, URL state, messages, downloads.

The URL always holds the current lab and every parameter (plus `step` for animated
views), or the page shown (`page=tour|exercises|report`); opening it restores them. With
neither, the guided tour opens. Text from the URL is only ever shown through
`app.text.plain` (textContent): nothing from a URL is rendered as HTML.
"""
from __future__ import annotations

import csv
import io
import json
import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode

import panel as pn

import app.views  # noqa: F401  (registers every view)
import kvweb.labs  # noqa: F401  (registers every lab)
from app import i18n
from app.i18n import tr, tr_message
from app.pages import Page, pages
from app.runner import CANCELLED, Runner, under_lock
from app.text import plain
from app.url import install
from app.view import VIEWS, LabView
from app.widgets import as_text, widgets_for
from kvweb.lab import (ADVANCED, DEFAULT_LAB, LABS, PAPER_GPU, Lab, ParamError, flatten, from_query, jsonable, make,
                       shown, to_number, to_query)

# Characters; a longer query is refused as a whole. A share URL must fit: a 4000-character
# trace percent-encoded is up to 12,000, and the other parameters take far less than 4000.
MAX_QUERY = 16_000
MAX_STEP = 999_999
log = logging.getLogger(__name__)
LABS_NAV = "lab"  # the navigation entry that shows the labs
FOLDS = ((ADVANCED, "details"), (PAPER_GPU, "assumptions"))  # parameter precedence -> folded card


class Shell:
    def __init__(self) -> None:
        self.lab: Lab | None = None
        self.result: dict[str, Any] = {}
        self.widgets: dict[str, pn.widgets.Widget] = {}
        self.views: dict[type[LabView], LabView] = {}
        self.view: LabView | None = None
        self.page: str | None = None  # the page shown; None while a lab is shown
        self.pages: dict[str, Page] = {}
        self._search = None
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
        self.message = plain(css_class="kv-message", color="#a40000", mono=True)
        self.message.visible = False
        self.status = plain(css_class="kv-status", mono=True)
        # Whether the lab's model fits its GPU: one sentence when it does not (the view is then
        # hidden: nothing is drawn as if it ran) or when the result is a what-if.
        self.fit_note = plain(css_class="kv-fit-note", color="#8a4b00")
        self.fit_pane = pn.pane.Bokeh(self.fit_note, visible=False, sizing_mode="stretch_width")
        self.view_layout: pn.viewable.Viewable | None = None
        self.main = pn.Column(sizing_mode="stretch_width")
        self.runner = Runner()
        downloads = pn.Row(
            pn.widgets.FileDownload(callback=self._json_file, filename="result.json", label="result.json", width=130),
            pn.widgets.FileDownload(callback=self._csv_file, filename="result.csv", label="result.csv", width=130),
        )
        sidebar = pn.Column(
            self.lab_select, self.summary, self.controls, downloads, pn.pane.Bokeh(self.status),
            self.runner.bar, self.runner.cancel, width=300,
        )
        self.header = pn.pane.Markdown()
        # The lab area and the page area both stay in the document and are shown in turn:
        # detaching the sidebar's models and attaching them again confuses the front end.
        self.lab_area = pn.Row(sidebar, self.main, sizing_mode="stretch_width", visible=False)
        self.page_area = pn.Column(sizing_mode="stretch_width", visible=False)
        self.layout = pn.Column(pn.Row(self.header, self.nav, self.lang_select), pn.pane.Bokeh(self.message),
                                self.page_area, self.lab_area, sizing_mode="stretch_width")
        if pn.state.curdoc is not None:
            install()  # before Panel makes a Location that parses the query itself
            pn.state.onload(self._on_load)
        else:
            self.open_query("")

    def _on_load(self) -> None:
        """The browser's URL is known only once the page has loaded (in a worker, too)."""
        location = pn.state.location
        location.param.watch(lambda event: self.open_query(event.new), "search")
        self.open_query(location.search)

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
            self.show_page(page or "tour", messages)
            return
        lab, problems = from_query(query)
        step = to_number(query.get("step", "0"), integer=True)
        if step is None or not 0 <= step <= MAX_STEP:
            problems.append(f"step: {shown(query['step'])} is not allowed; expected a whole number; using 0")
            step = 0
        self.show(lab, messages + problems, step)

    def navigate(self, query: dict[str, str]) -> None:
        """Open a URL query (a lab with parameters, or a page) as if it had been typed."""
        if i18n.current() != "en":
            query = {**query, "lang": i18n.current()}
        search = "?" + urlencode(query)
        under_lock(lambda: self.open_query(search))

    def _write_url(self) -> None:
        if pn.state.location is None or (self.lab is None and self.page is None):
            return
        query = {"page": self.page} if self.page else to_query(self.lab)
        if i18n.current() != "en":
            query["lang"] = i18n.current()
        if not self.page and self.view is not None and self.view.animated:
            query["step"] = str(self.view.player.value)
        self._search = "?" + urlencode(query)
        pn.state.location.search = self._search

    # -- pages ---------------------------------------------------------------
    def show_page(self, name: str, messages: list[str]) -> None:
        self.page = name
        if name not in self.pages:
            self.pages[name] = pages()[name](self.navigate)
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
    def show(self, lab: Lab, messages: list[str], step: int = 0) -> None:
        self.lab = lab
        self.page = None
        if self.lab_select.value != lab.lab_name:
            self.lab_select.param.update(value=lab.lab_name)
        self._set_nav(LABS_NAV)
        self.lab_area.visible, self.page_area.visible = True, False
        self.summary.object = tr(lab.summary)
        self.widgets = widgets_for(lab)
        for widget in self.widgets.values():
            widget.param.watch(self._on_widget, "value")
        groups: dict[float, list[pn.widgets.Widget]] = {}
        for n, w in self.widgets.items():
            groups.setdefault(lab.param[n].precedence or 0, []).append(w)
        folded = [pn.Card(*groups[level], title=tr(title), collapsed=True, width=290, css_classes=[f"kv-fold-{title}"])
                  for level, title in FOLDS if level in groups]
        self.controls.objects = groups.get(0, []) + folded
        view_class = VIEWS.get(lab.lab_name)
        if view_class is None:
            self.view = self.view_layout = None
            self.main.objects = [plain(tr("no view for this lab yet; use the CLI"))]
        else:
            if view_class not in self.views:
                self.views[view_class] = view_class()
                self.views[view_class].player.param.watch(lambda event: self._write_url(), "value")
            self.view = self.views[view_class]
            self.view_layout = self.view.layout()
            self.main.objects = [self.fit_pane, self.view_layout]
        self.run(messages, step)

    def _set_lang(self, lang: str) -> None:
        """Labels are made in the session's language: a switch rebuilds them and the views."""
        if lang != i18n.current():
            self.views.clear()
            self.pages.clear()
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
            self.show(LABS[event.new](), [])

    def _on_widget(self, event: Any) -> None:
        under_lock(self._apply_widgets)

    def _apply_widgets(self) -> None:
        assert self.lab is not None
        texts = {name: as_text(w.value) for name, w in self.widgets.items()}
        try:
            lab = make(type(self.lab), texts)
        except ParamError as err:
            self._say([str(err)])
            return
        self.lab = lab
        self.run([])

    # -- running ------------------------------------------------------------
    def run(self, messages: list[str], step: int = 0) -> None:
        assert self.lab is not None
        self.status.text = f"{tr('running')} {self.lab.lab_name}"
        self.runner.start(self.lab, lambda result, error: self._show_result(result, error, messages, step))

    def _show_result(self, result: dict[str, Any] | None, error: str | None, messages: list[str], step: int) -> None:
        if error == CANCELLED:
            self._say([*messages, tr("run cancelled")])
            self.status.text = tr("ready")
            return
        self.result = result or {}
        self._say([*messages, error] if error else messages)
        note, fits = self.result.get("fit_note"), self.result.get("fits", True)
        self.fit_note.text = tr_message(note) if note else ""
        self.fit_pane.visible = bool(note)
        if self.view_layout is not None:
            self.view_layout.visible = fits
        if self.view is not None and self.result and fits:
            self.view.update(self.lab, self.result)
            step = min(step, self.view.player.end)
            if self.view.player.value == step:
                self.view.show_step(step)  # same position, new result: draw it
            else:
                self.view.player.value = step  # the player's watcher draws it
        self._write_url()
        self.status.text = tr("ready")

    def _say(self, messages: list[str]) -> None:
        self.message.text = "\n".join(tr_message(m) for m in messages)
        self.message.visible = bool(messages)

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
