"""Widgets made from a lab's parameter schema: the app's face of the one schema.

Widget values go back through `kvweb.parsing.make` as text, so the app validates exactly
like the CLI and the URL do. Number boxes carry no bounds of their own: a value typed out of
range reaches the lab's validation, whose message the shell shows (the browser would
otherwise clamp it, or keep showing it while ignoring it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import panel as pn
import param

from app.i18n import tr, tr_message
from app.trace_picker import BrowserTraces, TracePicker
from kvweb.lab import Lab, Text, param_names
from kvweb.parsing import allowed

SLIDER_SPAN = 64  # integer ranges up to this wide get a slider, wider ones a number box
HELP_PX = 30  # the width a WithHelp's "?" takes beside its control


def widget_for(lab: Lab, name: str, kept: BrowserTraces | None = None) -> pn.widgets.Widget:
    """The parameter's control, with its help (what it means and what it takes, in the session's
    language) behind a "?" beside it: the widget's own `description` where its class has one,
    else a `WithHelp` (checkboxes and sliders have none). `trace_file` is a file picker, whose files
    the browser keeps (`kept`)."""
    p = lab.param[name]
    help_text = param_help(p)
    if name == "trace_file":  # a file picked or dropped, not text typed
        return TracePicker(getattr(lab, name), param_label(name), help_text, 280, kept)
    kind, options = _kind(p)
    if "description" in kind.param:
        options["description"] = help_text
    widget = kind(
        name=param_label(name),
        value=getattr(lab, name),
        css_classes=[f"kv-param-{name}"],
        width=280 if "description" in kind.param else 280 - HELP_PX,
        **options,
    )
    return widget if "description" in kind.param else WithHelp(widget, help_text, name)


def param_help(p: param.Parameter) -> str:
    """A parameter's help: its doc and the values it takes, in the session's language."""
    return f"{tr(p.doc)} ({tr_message(allowed(p))})"


def help_text(widget: pn.widgets.Widget) -> str:
    """The help a control shows (its description, or a WithHelp's "?"); "" if none."""
    if isinstance(widget, WithHelp):
        return widget.tip.value
    return getattr(widget, "description", None) or ""


class WithHelp(pn.widgets.CompositeWidget):
    """A control whose class has no `description` (a checkbox, a slider) with a "?" beside it
    that shows its help, as Bokeh draws a description's. It stands for the control: `value`
    and `disabled` are the control's, both ways, so the lab area and the exercises use it as
    any widget. The class `kv-param-NAME` stays on the control alone."""

    value = param.Parameter()

    def __init__(self, control: pn.widgets.Widget, help_text: str, name: str) -> None:
        super().__init__(value=control.value, width=280, disabled=control.disabled)
        self.control = control
        self.tip = pn.widgets.TooltipIcon(value=help_text, css_classes=["kv-help", f"kv-help-{name}"], margin=(5, 0))
        self._composite[:] = [control, self.tip]
        control.param.watch(lambda event: setattr(self, "value", event.new), "value")
        self.param.watch(lambda event: setattr(control, "value", event.new), "value")
        self.param.watch(lambda event: setattr(control, "disabled", event.new), "disabled")


def param_label(name: str) -> str:
    """The parameter's name (its CLI flag and URL key), with a Chinese label beside it in zh."""
    label = tr(name, "param")
    return f"{name} · {label}" if label != name else name


def _kind(p: param.Parameter) -> tuple[type[pn.widgets.Widget], dict[str, Any]]:
    """The widget class for a parameter and the options its schema implies."""
    if isinstance(p, param.Selector):
        return pn.widgets.Select, {"options": list(p.objects)}
    if isinstance(p, param.Boolean):
        return pn.widgets.Checkbox, {}
    if isinstance(p, param.Integer):
        lo, hi = p.bounds
        return (pn.widgets.IntSlider, {"start": lo, "end": hi}) if hi - lo <= SLIDER_SPAN else (pn.widgets.IntInput, {})
    if isinstance(p, param.Number):
        lo, hi = p.bounds
        return pn.widgets.FloatInput, {"step": (hi - lo) / 100}
    if isinstance(p, Text):
        return pn.widgets.TextInput, {"max_length": p.max_length}
    raise TypeError(f"no widget for parameter {p.name} of type {type(p).__name__}")


def widgets_for(lab: Lab, kept: BrowserTraces | None = None) -> dict[str, pn.widgets.Widget]:
    return {name: widget_for(lab, name, kept) for name in param_names(type(lab))}


def as_text(value: Any) -> str:
    """The text form `kvweb.parsing.parse` reads back (booleans lower-case, like the URL)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def link_button(label: str, css_class: str, on_press: Callable[[], None]) -> pn.widgets.Widget:
    """A button that opens another URL query (a tour step, an exercise's lab).

    Made as a Toggle that springs back: pressing it is a value change, which Panel hands to
    the server like a Select's, so navigation runs in order with the updates it causes. A
    Button's click event arrives without the document lock, and a fast lab's result could
    then reach the browser before the models it updates ("reference isn't known", an empty
    roofline).
    """
    toggle = pn.widgets.Toggle(name=label, value=False, button_type="primary", css_classes=[css_class])

    def pressed(event: Any) -> None:
        if event.new:
            toggle.value = False
            on_press()

    toggle.param.watch(pressed, "value")
    return toggle
