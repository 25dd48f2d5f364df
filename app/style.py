"""The app's CSS: phones and narrow windows, long text that wraps, fonts that cover Chinese.

Panel draws every component in its own shadow root, so page-wide CSS does not reach inside;
`pn.config.raw_css` is added to each component's root instead. Importing this module (the
shell does, before it builds anything) installs the rules and, once the document is in a
browser, the viewport declaration `panel serve`'s page template lacks (the static site's
page has it from the start: static/early.html).
"""

from __future__ import annotations

import sys

import panel as pn
from bokeh.models import CustomJS

# Below this width the controls stack above the figures (and every row wraps).
NARROW_PX = 800
CONTROLS_VH = 40  # there, the parameters' box: at most this share of the screen's height, scrolling inside
# Latin fonts first, then the CJK fonts of common systems (Noto/Source Han on Linux and
# Android, PingFang on Apple, Microsoft YaHei on Windows), so Chinese never shows as boxes.
SANS = (
    'system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, "Noto Sans CJK SC", "Noto Sans SC", '
    '"Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", "WenQuanYi Micro Hei", sans-serif'
)
MONO = (
    'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, "Noto Sans Mono CJK SC", "Noto Sans CJK SC", '
    '"PingFang SC", "Microsoft YaHei", monospace'
)

CSS = f"""
:host {{
  --bokeh-base-font: {SANS};
  --bokeh-mono-font: {MONO};
  --bs-font-sans-serif: {SANS};
  --bs-font-monospace: {MONO};
  max-width: 100%;
  overflow-wrap: break-word;
}}
pre, code {{ white-space: pre-wrap; overflow-wrap: break-word; }}
img, svg, table {{ max-width: 100%; }}
@media (max-width: {NARROW_PX}px) {{
  /* Panel gives a stretching row or column the sum of its children's widths as min-width */
  :host(.bk-Row), :host(.bk-panel-models-layout-Column), :host(.bk-panel-models-layout-Card) {{
    min-width: 0 !important;
  }}
  :host(.bk-Row) {{ flex-wrap: wrap; }}
  :host(.bk-Row) > * {{ max-width: 100%; }}
  :host(.bk-Row) > .bk-panel-models-layout-Column {{ flex: 1 1 100%; }}  /* controls above figures */
  /* a figure still drawn wider than the phone scrolls inside its column, not the page */
  :host(.bk-panel-models-layout-Column) {{ overflow-x: auto; }}
  /* the lab's parameters: a box of their own that scrolls, so the results start within the first
     screen and a changed value redraws them just below it */
  :host(.kv-controls) {{
    max-height: {CONTROLS_VH}vh; overflow-y: auto !important; border-bottom: 2px solid #d0d0d0;
    padding-bottom: 4px;
  }}
  /* the report's tables (HTML: kvweb/reproduce.py): each scrolls sideways in its own box, figures
     on one line, headers and the first column (row labels, fixed) wrapping; the paper's words
     below the figures, not squeezed beside them */
  :host(.kv-report) .beside {{ flex-wrap: wrap; }}
  :host(.kv-report) table {{
    display: block; overflow-x: auto; max-width: 100%; border-collapse: separate; border-spacing: 0;
  }}
  :host(.kv-report) td {{ white-space: nowrap; }}
  :host(.kv-report) th {{ min-width: 4em; }}
  :host(.kv-report) td:first-child, :host(.kv-report) th:first-child {{
    position: sticky; left: 0; z-index: 1; background: #fff; white-space: normal; min-width: 7em; max-width: 11em;
  }}
}}
"""

VIEWPORT = CustomJS(
    code="""
if (!document.querySelector('meta[name="viewport"]')) {
  const meta = document.createElement("meta");
  meta.name = "viewport";
  meta.content = "width=device-width, initial-scale=1";
  document.head.appendChild(meta);
}
"""
)


def install() -> None:
    """The CSS for every component made from now on, and the viewport for this document."""
    if CSS not in pn.config.raw_css:
        pn.config.raw_css = [*pn.config.raw_css, CSS]
    # Only under `panel serve`: in the static site the page has it already, and a document_ready
    # callback there changes when Python hears of the page (the app then reopens the URL).
    if pn.state.curdoc is not None and sys.platform != "emscripten":
        pn.state.curdoc.js_on_event("document_ready", VIEWPORT)
