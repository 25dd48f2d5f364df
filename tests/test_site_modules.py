"""The static site cannot carry compiled packages Pyodide lacks: the app must run without nh3.

Panel cleans every string a ReactiveHTML component sends to the browser with nh3 (a Rust
extension with no Pyodide build); a component that sends one stops the site at start-up.
And what the site's start imports: the start page (the tour) needs no view.
"""

import subprocess
import sys
from pathlib import Path

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)
ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys
sys.modules["nh3"] = None  # as in the static site: importing it fails
import app.views  # noqa: F401  (registers every view)
from app.view import VIEWS
for name, cls in sorted(VIEWS.items()):
    view = cls()
    view.layout().get_root()
    view.player.end = 3
    view.player.value = 2
print(len(VIEWS))
"""


def run(program: str) -> str:
    """What `program` prints, run by a fresh Python (nothing imported yet)."""
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_every_view_renders_without_nh3() -> None:
    assert int(run(PROGRAM).split()[-1]) >= 16


def test_the_views_are_imported_with_the_first_lab_not_at_start() -> None:
    """The cold load opens the tour: importing the views then was start-up work for nothing."""
    shown = "import sys\nfrom app.shell import Shell\nshell = Shell()\nprint('app.views' in sys.modules)\n"
    assert run(shown).split() == ["False"]
    first_lab = "shell.router.open('?lab=fsm')\nprint('app.views' in sys.modules)\n"
    assert run(shown + first_lab).split() == ["False", "True"]
