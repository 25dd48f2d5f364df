"""The page frame around pages and labs: header, navigation, language, the message line, and the
page area and the lab area, shown in turn.

Both areas stay in the document and are shown in turn: detaching the sidebar's models and
attaching them again confuses the front end.
"""

from __future__ import annotations

from collections.abc import Callable

import panel as pn

from app import i18n
from app.i18n import tr, tr_message
from app.pages import pages
from app.pages.tour import STEPS
from app.site.upstream import LinkedSelect
from app.text import LiveText
from app.widgets import link_button
from kvweb.lab import LABS

LABS_NAV = "lab"  # the navigation entry that shows the labs
Navigate = Callable[[dict[str, str]], None]


class Frame:
    """`sidebar` and `main` are the lab area's parts (under the lab select); `hidden` goes at
    the end of the layout (the history boxes); `picked`: the page's script when a person picks
    a lab (its argument `loading`, the word in the session's language)."""

    def __init__(
        self, sidebar: list[pn.viewable.Viewable], main: pn.viewable.Viewable, hidden: pn.viewable.Viewable, picked: str
    ) -> None:
        self.tour_bar = pn.Row(css_classes=["kv-tour-bar"], visible=False)
        self.nav = pn.widgets.RadioButtonGroup(css_classes=["kv-nav"], button_type="light")
        self.lab_select = LinkedSelect(picked, {"loading": tr("loading")}, width=280, css_classes=["kv-lab-select"])
        self.lang_select = pn.widgets.RadioButtonGroup(
            options={label: code for code, label in i18n.LANGS.items()},
            value="en",
            css_classes=["kv-lang"],
        )
        self.header = pn.pane.Markdown()
        # (a LiveText, never hidden: empty, it takes no room; a Div's new text or a hidden box shown
        # again would make BokehJS lay out the whole lab: ~0.3 s on the schedulers lab)
        self.message = LiveText(css_class="kv-message", color="#a40000", mono=True, margin=(2, 10))
        self.lab_area = pn.Column(
            self.tour_bar,
            pn.Row(
                pn.Column(self.lab_select, *sidebar, width=300, css_classes=["kv-controls"]),
                main,
                sizing_mode="stretch_width",
            ),
            sizing_mode="stretch_width",
            visible=False,
        )
        self.page_area = pn.Column(sizing_mode="stretch_width", visible=False)
        self.layout = pn.Column(
            pn.Row(self.header, self.nav, self.lang_select),
            self.message,
            self.page_area,
            self.lab_area,
            hidden,
            sizing_mode="stretch_width",
        )

    def set_lang(self, lang: str) -> None:
        """Show the frame's words in `lang` (the session's language, already in use)."""
        self.lang_select.value = lang
        self.header.object = "### " + tr("kvweb: the KV cache of LLM serving, computed for real")
        self.lab_select.name = tr("lab")
        self.lab_select.set_args({"loading": tr("loading")})
        titles = {tr(LABS[n].title): n for n in sorted(LABS, key=lambda n: LABS[n].title)}
        if self.lab_select.options != titles:
            self.lab_select.options = titles

    def show_page(self, name: str, layout: pn.viewable.Viewable) -> None:
        self._set_nav(name)
        self.page_area.objects = [layout]
        self.lab_area.visible, self.page_area.visible = False, True

    def show_lab(self, lab_name: str, tour: int | None, navigate: Navigate) -> None:
        """The lab area, with the way back to the tour and on to its next step if the tour opened the lab."""
        if self.lab_select.value != lab_name:
            self.lab_select.param.update(value=lab_name)
        self._set_nav(LABS_NAV)
        self.lab_area.visible, self.page_area.visible = True, False
        self.tour_bar.visible = tour is not None
        if tour is None:
            self.tour_bar.objects = []
            return
        buttons = [link_button(f"← {tr('Guided tour')}", "kv-tour-back", lambda: navigate({"page": "tour"}))]
        if tour < len(STEPS):
            following = STEPS[tour]
            buttons.append(
                link_button(
                    f"{tr('Next step')}: {tour + 1}. {tr(following.title)} →",
                    "kv-tour-next",
                    lambda: navigate({**following.links[0][1], "tour": str(tour + 1)}),
                )
            )
        self.tour_bar.objects = [
            pn.pane.Markdown(f"**{tr('Guided tour')} {tour}/{len(STEPS)}:** {tr(STEPS[tour - 1].title)}"),
            *buttons,
        ]

    def say(self, messages: list[str]) -> None:
        self.message.text = "\n".join(tr_message(m) for m in messages)

    def _set_nav(self, value: str) -> None:
        entries = [(cls.label, name) for name, cls in pages().items()]
        options = {tr(label): name for label, name in [entries[0], ("Labs", LABS_NAV), *entries[1:]]}
        if self.nav.options != options:
            self.nav.options = options
        self.nav.value = value
