"""app/site/resources.py: the served page loads no Panel extension the app does not use, and
runs the DataTable guard after Bokeh's scripts."""

import base64
import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import panel.models.tabulator  # noqa: E402, F401  (`panel serve` has every Panel model imported)
from bokeh.document import Document  # noqa: E402
from panel.io.resources import Resources, bundle_resources  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

from app.site import resources  # noqa: E402


def page_scripts() -> list[str]:
    """The scripts a served session's page lists, in order (as Panel's page template gets them)."""
    return [str(f) for f in bundle_resources(None, Resources(mode="server")).js_files]


def test_a_served_page_loads_no_extension_the_app_does_not_use():
    with set_curdoc(Document()):
        assert any("tabulator" in f for f in page_scripts())  # Panel's default: every extension it knows
    with set_curdoc(Document()):
        resources.install()
        scripts = page_scripts()
    assert not any("tabulator" in f or "luxon" in f for f in scripts)
    assert any(f.startswith("static/js/bokeh-tables") for f in scripts)  # the app's tables stay


def test_the_datatable_guard_runs_after_bokehs_tables():
    with set_curdoc(Document()):
        resources.install()
        scripts = page_scripts()
    guard = scripts.index(resources.GUARD_SCRIPT)
    assert guard > next(i for i, f in enumerate(scripts) if f.startswith("static/js/bokeh-tables"))
    code = base64.b64decode(resources.GUARD_SCRIPT.split(",", 1)[1]).decode()
    assert code == resources.DATATABLE_GUARD + "guardDataTables();\n"
