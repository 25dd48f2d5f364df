"""What the page loads besides the app's document: only the extensions the app uses, and a
guard for Bokeh's DataTable.

Under `panel serve` a session's page lists its scripts when the session's document is built
(`install`, called by the shell first):

- `pn.extension()` with no extension named: Panel then loads only its own bundle, where it
  would otherwise load every extension it knows (Tabulator and luxon: 525 KB of script and
  30 KB of CSS the app never uses, parsed before the page can draw);
- `DATATABLE_GUARD`, as a script right after Bokeh's (a `data:` URL: the server needs no
  file of its own). The static site's page runs the same guard before it renders
  (scripts/build_site.py puts it in front of static/handler.js).
"""

from __future__ import annotations

import base64
import sys

import panel as pn

# Bokeh 3.9's DataTable sizes its grid in after_layout, which a sibling's first render can
# call before the table's own after_render has made the grid (seen whenever a page's first
# document already holds a lab's table): wait for the grid instead of failing.
# It also redraws its rows only when its CDSView's indices change, so new data with as many rows
# as before kept the old cells on screen (bokeh#15328: the schedulers, engine, fsm and radix-demo
# tables showed the first run's numbers): new data or a patch redraws the grid too.
DATATABLE_GUARD = """
function guardDataTables() {
  const view = window.Bokeh?.Tables?.DataTable?.prototype?.default_view;
  if (view == null || view.prototype.kvwebGuarded) return;
  for (const name of ["_after_layout", "_after_resize"]) {
    const original = view.prototype[name];
    view.prototype[name] = function () { if (this.grid !== undefined) original.call(this); };
  }
  const connect = view.prototype.connect_signals;
  view.prototype.connect_signals = function () {
    connect.call(this);
    const source = this.model.source;
    const redraw = () => { if (this.grid !== undefined) this.updateGrid(); };
    this.connect(source.properties.data.change, redraw);
    this.connect(source.patching, redraw);
  };
  view.prototype.kvwebGuarded = true;
}
"""
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
