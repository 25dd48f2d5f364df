"""What the page loads besides the app's document: only the extensions the app uses, and a
guard for Bokeh's DataTable.

Under `panel serve` a session's page lists its scripts when the session's document is built
(`install`, called by the shell first):

- `pn.extension()` with no extension named: Panel then loads only its own bundle, where it
  would otherwise load every extension it knows (Tabulator and luxon: 525 KB of script and
  30 KB of CSS the app never uses, parsed before the page can draw);
- `DATATABLE_GUARD` (app/site/upstream.py: it patches BokehJS's private DataTable view), as a
  script right after Bokeh's (a `data:` URL: the server needs no file of its own). The static site's page runs the same guard before it renders
  (scripts/build_site.py puts it in front of static/handler.js).
"""

from __future__ import annotations

import base64
import sys

import panel as pn

from app.site.upstream import DATATABLE_GUARD

GUARD_SCRIPT = (
    "data:text/javascript;base64," + base64.b64encode((DATATABLE_GUARD + "guardDataTables();\n").encode()).decode()
)


def install() -> None:
    """The served page's scripts: Panel's own extensions only, and the DataTable guard (the
    static site's page has its own: scripts/build_site.py)."""
    if pn.state.curdoc is None or sys.platform == "emscripten":
        return
    pn.extension()
    pn.config.js_files = {**pn.config.js_files, "kvweb-datatable-guard": GUARD_SCRIPT}
