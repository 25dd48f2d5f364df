"""Stopping a run: the browser's guard around a run (app/site/interrupt.py: the page may
interrupt only inside it), and the app back at the URL's state after a cancelled run."""

import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

from bokeh.document import Document  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

from app import runner  # noqa: E402
from app.runner import CANCELLED, Runner  # noqa: E402
from app.shell import Shell  # noqa: E402
from app.site.interrupt import install  # noqa: E402
from app.site.location import install as install_location  # noqa: E402
from kvweb.budget import Estimate, constant  # noqa: E402
from kvweb.lab import Lab  # noqa: E402


class Interrupted(Lab):
    """A run the page stops: Pyodide raises KeyboardInterrupt where the run is."""

    def run(self, progress=None):
        progress(0.1, "going")
        raise KeyboardInterrupt

    def estimate(self) -> Estimate:
        return constant(1.0)


class Quick(Lab):
    def run(self, progress=None):
        return {"done": True}

    def estimate(self) -> Estimate:
        return constant(0.1)


@pytest.fixture
def marks(monkeypatch):
    """What the worker's `stoppable(on)` was told, in order."""
    monkeypatch.setattr(runner, "_stoppable", runner._stoppable)  # put back after the test
    said: list[bool] = []
    install(said.append)
    return said


def browser_runner() -> Runner:
    """A runner that calls the lab, as in the browser."""
    called = Runner()
    called.pool = None
    return called


def test_a_browser_run_is_stoppable_only_while_it_computes(marks):
    outcomes = []
    browser_runner().start(Quick(), lambda result, error: outcomes.append((result, error, list(marks))))
    assert outcomes == [({"done": True}, None, [True, False])]  # not stoppable any more when the result is drawn


def test_the_pages_interrupt_ends_the_run_as_cancelled(marks):
    outcomes = []
    browser_runner().start(Interrupted(), lambda result, error: outcomes.append((result, error)))
    assert outcomes == [(None, CANCELLED)] and marks == [True, False]


def test_a_cancelled_run_leaves_the_app_at_the_urls_state(monkeypatch):
    with set_curdoc(Document()):
        install_location({"pathname": "/main", "search": "", "href": "http://127.0.0.1/main", "origin": "x"})
        shell = Shell()
        shell.labs.runner.pool = None
        shell.router.open("?lab=roofline&tokens=1024")
        shown = shell.router.history.entry.value
        assert "&tokens=1024&" in shown and shell.labs.lab.tokens == 1024
        monkeypatch.setattr(shell.labs.runner, "_call", lambda *call: (None, CANCELLED))
        shell.labs.widgets["tokens"].value = 2048  # a long run, stopped
        shell.labs._apply_widgets()
        assert shell.labs.lab.tokens == 1024 and shell.labs.widgets["tokens"].value == 1024
        assert shell.router.history.entry.value.split(" ")[1] == shown.split(" ")[1]
        assert "run cancelled" in shell.frame.message.text and shell.labs.status.text == "ready"


def test_a_urls_messages_show_while_its_run_is_still_running(monkeypatch):
    with set_curdoc(Document()):
        install_location({"pathname": "/main", "search": "", "href": "http://127.0.0.1/main", "origin": "x"})
        shell = Shell()
        started = []
        monkeypatch.setattr(shell.labs.runner, "start", lambda lab, done: started.append(lab))  # never ends
        shell.router.open("?lab=roofline&tokens=abc")
        assert started and shell.labs.status.text == "running roofline"
        assert shell.frame.message.text.startswith("tokens: ") and "using the default" in shell.frame.message.text
