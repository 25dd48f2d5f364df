"""The library's tests inside Pyodide (run by scripts/test-pyodide.sh through pyodide_run.mjs).

kvweb is imported from the installed wheel, never from the checkout, so this proves the
wheel itself works in Pyodide. Tests that need CPython (a subprocess, say) mark themselves
`@pytest.mark.skipif(sys.platform == "emscripten", reason=...)`.
"""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

os.chdir("/tmp")  # hypothesis's example database stays in Pyodide's memory, not the checkout
sys.path = [p for p in sys.path if Path(p).resolve() not in (ROOT, ROOT / "scripts")]
import kvweb  # noqa: E402

if not kvweb.__file__.startswith("/lib/python"):
    sys.exit(f"kvweb was imported from {kvweb.__file__}, not from the installed wheel")
print(f"kvweb from {os.path.dirname(kvweb.__file__)} on {sys.platform}, Python {sys.version.split()[0]}")
sys.exit(pytest.main(["-p", "no:cacheprovider", "--rootdir", str(ROOT), str(ROOT / "tests"), *sys.argv[1:]]))
