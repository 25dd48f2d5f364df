"""app/site/upstream.py: each private Panel and Bokeh API kvweb uses still does what kvweb needs.

A Panel release that changes one fails here. The Pyodide-only ones (`panel.io.pyodide` imports
`js`) are checked by name and signature here; what they do is checked by every static-site test
(e2e/test_site.py: a page that renders and redraws went through them).
"""

import ast
import asyncio
import inspect
import sys
from pathlib import Path

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import panel as pn  # noqa: E402
import panel.io.convert as pc  # noqa: E402
from bokeh.document import Document  # noqa: E402
from bokeh.events import DocumentReady  # noqa: E402
from panel.io.location import Location  # noqa: E402
from panel.io import document as served  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402
from tornado.locks import Lock  # noqa: E402

from app.site import upstream  # noqa: E402


def test_a_location_given_to_a_document_is_the_one_panel_returns():
    doc, location = Document(), Location()
    with set_curdoc(doc):
        upstream.give_location(doc, location)
        assert pn.state.location is location and upstream.location_of(doc) is location
    assert upstream.location_of(Document()) is None


def test_read_only_location_fields_can_be_set():
    location = Location()
    with pytest.raises(TypeError):
        location.href = "http://x/"  # read-only for everyone else
    upstream.set_readonly(location, {"href": "http://x/?a=1", "search": "?a=1"})
    assert (location.href, location.search) == ("http://x/?a=1", "?a=1")


class Served(Document):
    """A document as a server holds it (Panel holds its onload callbacks until the page is ready)."""

    session_context = "served"


def test_the_onload_runner_runs_the_documents_onload_callbacks():
    doc, ran = Served(), []
    with set_curdoc(doc):
        pn.state.onload(lambda: ran.append("loaded"))
        assert ran == []  # held until the page is ready
        upstream.onload_runner(doc)(DocumentReady())
    assert ran == ["loaded"]


def test_a_linked_text_box_carries_its_callback_with_the_other_models():
    other = pn.widgets.TextInput()
    box = upstream.LinkedTextInput("console.log(other)", {"other": other}, css_classes=["linked"])
    doc = Document()
    with set_curdoc(doc):
        root = pn.Row(other, box).get_root(doc)
    made, linked = root.children
    (callback,) = linked.js_property_callbacks["change:value"]
    assert callback.args == {"other": made} and callback.code == "console.log(other)"


def test_the_conversion_uses_the_scripts_given(tmp_path, monkeypatch):
    for name in ("WEB_WORKER_TEMPLATE", "WORKER_HANDLER_TEMPLATE", "PRE"):
        monkeypatch.setattr(pc, name, getattr(pc, name))  # put back after the test
    script = tmp_path / "app.py"
    script.write_text("import panel as pn\npn.Row('kvweb').servable()\n")
    upstream.use_conversion_scripts("// kvweb worker\n{{ code }}", "// kvweb handler", "\nkvweb_pre = 1\n")
    html, worker = pc.script_to_html(str(script), runtime="pyodide-worker", prerender=False)
    assert worker.startswith("// kvweb worker") and "kvweb_pre = 1" in worker
    assert "// kvweb handler" in html


def test_a_patch_queued_while_the_socket_was_busy_is_written(monkeypatch):
    # Panel's write task finds the socket busy and waits to retry; meanwhile another task ends and
    # marks the queue done: without the guard the retry returns at once and "ready" is never sent.
    monkeypatch.setattr(served, "_dispatch_msgs", served._dispatch_msgs)  # put back after the test
    upstream.write_every_queued_patch()
    sent: list[str] = []

    class Socket:
        write_lock = Lock()

    class Connection:
        _socket = Socket()

    monkeypatch.setitem(served.extra_socket_handlers, Socket, lambda conn, msg: sent.append(msg) or [])
    doc, connection = Document(), Connection()

    async def race() -> None:
        await Socket.write_lock.acquire()  # a message is being written
        served._WRITE_BLOCK[doc] = True
        served._WRITE_MSGS[doc] = {connection: ["ready"]}
        served._dispatch_write_task(doc, served._dispatch_msgs, doc)
        await asyncio.sleep(0.005)  # the task found the socket busy; its retry comes at 0.01 s
        del served._WRITE_BLOCK[doc]  # another task ended
        Socket.write_lock.release()
        for _ in range(100):
            if sent:
                return
            await asyncio.sleep(0.01)

    asyncio.run(race())
    assert sent == ["ready"] and doc not in served._WRITE_MSGS


def pyodide_module() -> ast.Module:
    return ast.parse((Path(inspect.getfile(pc)).parent / "pyodide.py").read_text())


@pytest.mark.parametrize(
    "name, args", [("_process_document_events", ["doc", "events"]), ("_convert_json_patch", ["json_patch"])]
)
def test_the_pyodide_functions_are_there_with_their_arguments(name, args):
    (found,) = [f for f in pyodide_module().body if isinstance(f, ast.FunctionDef) and f.name == name]
    assert [a.arg for a in found.args.args] == args


def test_the_pyodide_dict_converter_is_there():
    names = {
        t.id for n in pyodide_module().body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    assert "_dict_converter" in names


def test_the_datatable_guards_bokehjs_names_are_in_the_installed_bundle():
    """DATATABLE_GUARD patches BokehJS's private DataTableView: its layout hooks, the grid it
    waits for, the redraw it calls and the signal it listens to must still be there."""
    import bokeh

    js = Path(bokeh.__file__).parent / "server" / "static" / "js"
    tables, core = (js / "bokeh-tables.js").read_text(), (js / "bokeh.js").read_text()
    view = tables[tables.index("class DataTableView") :]
    view = view[: view.index("\n    }\n", view.index("updateGrid() {"))]  # up to the end of updateGrid
    for hook in ("_after_layout() {", "_after_resize() {", "connect_signals() {", "updateGrid() {"):
        assert hook in view, hook
    assert "this.grid = new" in tables and 'this.patching = new signaling_1.Signal(this, "patching")' in core
    for name in ("_after_layout", "_after_resize", "this.grid", "updateGrid", "source.patching"):
        assert name in upstream.DATATABLE_GUARD
