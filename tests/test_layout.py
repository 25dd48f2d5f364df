"""The library's layout is its architecture: a part imports only from parts below it.

Order (the lecture's): gpu < kv < serving < prefix < constrained < fleet < the top (labs/, cli,
reproduce, exercises, challenges). Below them all is the base every part may use: the lab contract
(kvweb.lab) and its work budget (kvweb.budget), outside text (kvweb.parsing), remembered
results (kvweb.memo) and results as JSON (kvweb.jsonable); the URL query (kvweb.query) is top level.
"""

import ast
from pathlib import Path

import pytest

KVWEB = Path(__file__).resolve().parent.parent / "kvweb"
PARTS = ["gpu", "kv", "serving", "prefix", "constrained", "fleet"]
TOP = len(PARTS)
BASE = {"kvweb.lab", "kvweb.budget", "kvweb.parsing", "kvweb.memo", "kvweb.jsonable"}


def rank(module: str) -> int:
    """The part a dotted kvweb module belongs to (TOP for the top level)."""
    parts = module.split(".")
    return PARTS.index(parts[1]) if len(parts) > 1 and parts[1] in PARTS else TOP


def kvweb_imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvweb"):
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.startswith("kvweb")]
    return names


@pytest.mark.parametrize("part", PARTS)
def test_a_part_imports_only_from_parts_below_it_or_the_base(part: str) -> None:
    own = PARTS.index(part)
    files = sorted((KVWEB / part).glob("*.py"))
    assert (KVWEB / part / "__init__.py") in files, f"kvweb/{part} has no __init__.py"
    for path in files:
        for module in kvweb_imports(path):
            assert module in BASE or rank(module) <= own, f"{path.name} imports {module}"


def test_the_base_imports_no_part() -> None:
    for module in BASE:
        path = KVWEB / (module.split(".")[1] + ".py")
        assert all(m in BASE for m in kvweb_imports(path)), f"{path.name} imports a part"


def test_the_top_level_holds_only_the_base_the_faces_and_the_parts() -> None:
    top = sorted(p.name for p in KVWEB.iterdir() if not p.name.startswith("__pycache__"))
    assert top == sorted(
        [
            "__init__.py",
            "budget.py",
            "challenges.py",
            "cli.py",
            "exercises.py",
            "jsonable.py",
            "lab.py",
            "labs",
            "memo.py",
            "parsing.py",
            "query.py",
            "reproduce.py",
            "svg.py",
            *PARTS,
        ]
    )
