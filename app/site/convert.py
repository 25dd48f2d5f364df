"""Panel's conversion of the app into a static page (`panel.io.convert.script_to_html`, the
pyodide-worker runtime), with kvweb's worker and page scripts (static/) in place of Panel's."""

from __future__ import annotations

from pathlib import Path

from app.site import upstream
from app.site.location import BEFORE_APP


def convert(script: Path, worker: str, handler: str) -> tuple[str, str | None]:
    """The page's HTML and the worker's script (None if Panel made none) for `script` (inlined,
    not prerendered: the page shows its loading screen until Python has drawn the app the URL
    asks for)."""
    import panel.io.convert as pc

    upstream.use_conversion_scripts(worker, handler, BEFORE_APP)
    return pc.script_to_html(str(script), runtime="pyodide-worker", prerender=False, inline=True)
