"""The library's tests inside Pyodide (run by scripts/test-pyodide.sh through pyodide_run.mjs).

kvweb is imported from the installed wheel, never from the checkout, so this proves the
wheel itself works in Pyodide. Tests that need CPython (a subprocess, say) mark themselves
`@pytest.mark.skipif(sys.platform == "emscripten", reason=...)`.

`--shard=I/N` runs every N-th test from the I-th (0-based) of the collected order: Pyodide has
one thread, so test-pyodide.sh runs N of these processes side by side, one per core.
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


class Shard:
    """Keeps every `count`-th collected test from the `index`-th, deselecting the others."""

    def __init__(self, index: int, count: int) -> None:
        self.index, self.count = index, count

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        config.hook.pytest_deselected(items=[x for i, x in enumerate(items) if i % self.count != self.index])
        items[:] = items[self.index :: self.count]


def shard(args: list[str]) -> tuple[list[str], list[Shard]]:
    """`--shard=I/N` taken out of the arguments, as a plugin."""
    given = [a for a in args if a.startswith("--shard=")]
    if not given:
        return args, []
    index, count = (int(n) for n in given[-1].removeprefix("--shard=").split("/"))
    if not 0 <= index < count:
        sys.exit(f"--shard={index}/{count}: I must be from 0 to N - 1")
    return [a for a in args if not a.startswith("--shard=")], [Shard(index, count)]


args, plugins = shard(sys.argv[1:])
sys.exit(pytest.main(["-p", "no:cacheprovider", "--rootdir", str(ROOT), str(ROOT / "tests"), *args], plugins=plugins))
