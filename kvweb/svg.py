"""Small self-contained SVG charts for the reproduction report (no plotting library).

A chart is plain data (`Chart`): categories along x, one or more named series of numbers.
`render` draws it as grouped bars or as lines over evenly spaced categories (so block
sizes 1, 2, 4, ... 256 sit at equal steps, like a log axis). Every text is escaped.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
WIDTH, HEIGHT = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 34, 58


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float | None]


@dataclass(frozen=True)
class Chart:
    kind: str  # "bar" or "line"
    title: str
    x_label: str
    y_label: str
    categories: list[str]
    series: list[Series] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "title": self.title,
            "x_label": self.x_label,
            "y_label": self.y_label,
            "categories": self.categories,
            "series": [{"name": s.name, "values": s.values} for s in self.series],
        }

    @staticmethod
    def from_dict(data: dict) -> Chart:
        return Chart(
            data["kind"],
            data["title"],
            data["x_label"],
            data["y_label"],
            list(data["categories"]),
            [Series(s["name"], list(s["values"])) for s in data["series"]],
        )


def nice_top(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k at or above `value` (the y axis top)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value * (1 - 1e-12))


def text_width(text: str) -> float:
    """Rough width in pixels at font size 11: wide (Chinese) characters take twice the room."""
    return sum(11.0 if unicodedata.east_asian_width(c) in "WF" else 6.5 for c in text)


def tick(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1e4 else f"{value:,.0f}"


def render(chart: Chart, translate: Callable[[str], str] = str) -> str:
    """The chart as an <svg> element; titles, labels and series names go through `translate`."""
    t = translate
    values = [v for s in chart.series for v in s.values if v is not None]
    top = nice_top(max(values, default=1.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = max(1, len(chart.categories))
    slot = plot_w / n

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" font-family="sans-serif" font-size="11" role="img">',
        f"<title>{escape(t(chart.title))}</title>",
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13">{escape(t(chart.title))}</text>',
    ]
    for i in range(5):
        v = top * i / 4
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{tick(v)}</text>')
    for i, cat in enumerate(chart.categories):
        out.append(
            f'<text x="{LEFT + slot * (i + 0.5):.1f}" y="{TOP + plot_h + 14}" '
            f'text-anchor="middle">{escape(t(cat))}</text>'
        )
    if chart.kind == "bar":
        width = slot * 0.8 / max(1, len(chart.series))
        for k, s in enumerate(chart.series):
            for i, v in enumerate(s.values):
                if v is not None:
                    x = LEFT + slot * (i + 0.1) + k * width
                    out.append(
                        f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{width:.1f}" height="{y(0) - y(v):.1f}" '
                        f'fill="{COLOURS[k % len(COLOURS)]}"><title>{escape(t(s.name))}: {tick(v)}</title></rect>'
                    )
    else:
        for k, s in enumerate(chart.series):
            points = [(LEFT + slot * (i + 0.5), y(v)) for i, v in enumerate(s.values) if v is not None]
            colour = COLOURS[k % len(COLOURS)]
            out.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                + " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
                + '"/>'
            )
            out += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>' for px, py in points]
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{y(0):.1f}" stroke="#444"/>')
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#444"/>')
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 24}" text-anchor="middle">{escape(t(chart.x_label))}</text>'
    )
    out.append(
        f'<text transform="translate(14 {TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">'
        f"{escape(t(chart.y_label))}</text>"
    )
    x = LEFT
    for k, s in enumerate(chart.series):
        name = escape(t(s.name))
        out.append(f'<rect x="{x}" y="{HEIGHT - 12}" width="10" height="10" fill="{COLOURS[k % len(COLOURS)]}"/>')
        out.append(f'<text x="{x + 14}" y="{HEIGHT - 3}">{name}</text>')
        x += 24 + text_width(t(s.name))
    out.append("</svg>")
    return "\n".join(out)
