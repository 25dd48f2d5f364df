"""The library's layout is its architecture: a part imports only from parts below it.

Order (the lecture's): gpu < kv < serving < prefix < constrained < the top (lab contract and
its work budget, labs/, cli, reproduce, exercises). Every part may use the lab contract (kvweb.lab).
"""
import ast
from pathlib import Path

import pytest

KVWEB = Path(__file__).resolve().parent.parent / "kvweb"
PARTS = ["gpu", "kv", "serving", "prefix", "constrained"]
TOP = len(PARTS)


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
def test_a_part_imports_only_from_parts_below_it_or_the_lab_contract(part: str) -> None:
    own = PARTS.index(part)
    files = sorted((KVWEB / part).glob("*.py"))
    assert (KVWEB / part / "__init__.py") in files, f"kvweb/{part} has no __init__.py"
    for path in files:
        for module in kvweb_imports(path):
            assert module == "kvweb.lab" or rank(module) <= own, f"{path.name} imports {module}"


def test_the_top_level_holds_only_the_contract_the_faces_and_the_parts() -> None:
    top = sorted(p.name for p in KVWEB.iterdir() if not p.name.startswith("__pycache__"))
    assert top == sorted(["__init__.py", "budget.py", "cli.py", "exercises.py", "lab.py", "labs", "reproduce.py",
                          "svg.py", *PARTS])
