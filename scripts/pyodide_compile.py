"""Byte-compile wheels and the stdlib zip with Pyodide's own Python (run by pyodide_run.mjs).

    node scripts/pyodide_run.mjs CORE_DIR scripts/pyodide_compile.py OUT_DIR ZIP... [--keep-source ZIP...]

Importing Panel and Bokeh from source costs the browser seconds of compiling on every
load; shipping .pyc made by the very Python that runs them (3.14 in Pyodide, not the
build machine's) skips that. Each ZIP is written to OUT_DIR under the same name with every
.py replaced by a sourceless .pyc; the ZIPs after --keep-source (our own code, for readable
tracebacks) keep their .py beside an unchecked-hash .pyc in __pycache__.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib._bootstrap_external import _code_to_hash_pyc, _code_to_timestamp_pyc
from pathlib import Path

from wheelzip import rewrite

SITE = "/lib/python3.14/site-packages/"
STDLIB = f"/lib/python{sys.version_info.major}{sys.version_info.minor}.zip/"


def compiler(origin: str, keep_source: bool):
    def transform(name: str, source: bytes) -> list[tuple[str, bytes]]:
        if not name.endswith(".py") or ".dist-info/" in name:
            return [(name, source)]
        try:
            code = compile(source, origin + name, "exec", dont_inherit=True)
        except SyntaxError:  # templates and py2 leftovers stay as they are
            return [(name, source)]
        if keep_source:
            pyc = _code_to_hash_pyc(code, importlib.util.source_hash(source), checked=False)
            return [(name, source), (importlib.util.cache_from_source(name), bytes(pyc))]
        return [(name + "c", bytes(_code_to_timestamp_pyc(code, 0, len(source))))]

    return transform


def main() -> None:
    out, *files = sys.argv[1:]
    keep_source = False
    for arg in files:
        if arg == "--keep-source":
            keep_source = True
            continue
        path = Path(arg)
        origin = STDLIB if path.name == "python_stdlib.zip" else SITE
        rewrite(path, Path(out) / path.name, compiler(origin, keep_source))
        print(f"compiled {path.name}")


if __name__ == "__main__":
    main()
