"""The browser side of the app: its address, its history, and (static site) the web worker's
link to the page and Panel's conversion into a static page.

- `location`: the browser's URL as raw text (Panel's own Location parses it and breaks on
  hostile values), put in place before the app runs.
- `history`: Back and Forward, which Panel's Location leaves alone.
- `screen`: whether the page is a phone's, for the results tables' layout.
- `link`: the worker's link to the page (one message per redraw, app/redraw.py).
- `convert`: Panel's conversion with kvweb's worker and page scripts (static/).
- `resources`: what the served page loads besides the document (no unused Panel extension;
  the DataTable guard both pages run).
- `upstream`: every private Panel and Bokeh API the above use, in one place (tests/test_site_upstream.py).

The browser's own part is in static/ (handler.js, worker.mjs, early.html, loading.html).
"""
