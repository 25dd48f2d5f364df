"""docs/architecture.md names what exists: its file paths, classes, `Class.method`s, functions and
constants, commands and CLI flags, and the method counts of its table of the app's classes (issue 37).
And no class in kvweb/ or app/ has more than `MOST_METHODS` methods unless its docstring says why.

Parsed conservatively, so that a true sentence never fails: a path resolves from the repository,
the library or the app (a bare file name anywhere in the sources); a lowercase word in backticks
need only occur in the sources; placeholders (`LANG`, `LAB`), URL queries and build outputs are
skipped. A name that is gone, a path that moved or a command that no longer exists fails.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
SOURCES = ("kvweb", "app", "scripts", "bench", "static", "tests", "docs", "e2e")
PATH = re.compile(r"^[\w.*-]*(/[\w.*-]*)+$|^[\w-]+\.(py|md|html|js|mjs|toml|po)$")
PROSE_PATH = re.compile(r"(?<![\w/`.])((?:docs|tests|scripts|static|bench|kvweb|app|e2e)/[\w/.-]*\w)")
DOTTED = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(\(.*\))?$")
NAME = re.compile(r"^([A-Za-z_]\w*)(\(.*\))?$")
TABLE_ROW = re.compile(r"^\| `(\w+)` \| ([\w/.]+\.py) \| (\d+) \|", re.M)
MOST_METHODS = 20  # a class with more says why in its docstring: "methods: " and the reason
REASON = re.compile(r"\bmethods: \S")


class Index:
    """What the Python sources under kvweb/, app/, scripts/ and bench/ define."""

    def __init__(self) -> None:
        self.classes: dict[str, tuple[set[str], list[str]]] = {}  # class -> (members, base names)
        self.modules: dict[str, set[str]] = {}  # module stem or dotted path -> the names it defines
        self.defined: set[str] = set()  # every def, class, assigned name and attribute
        self.text = ""  # all source text, for words and flags
        for part in ("kvweb", "app", "scripts", "bench"):
            for path in sorted((ROOT / part).rglob("*.py")):
                self._read(path)
        self.text += "".join(
            p.read_text() for p in sorted((ROOT / "static").rglob("*")) if p.suffix in (".js", ".mjs", ".html")
        )

    def _read(self, path: Path) -> None:
        source = path.read_text()
        self.text += source
        tree = ast.parse(source)
        top = set()  # and the members of its classes (`route.search`: a Route's)
        for node in tree.body:
            top |= names_of(node)
            if isinstance(node, ast.ClassDef):
                top |= set().union(*(names_of(n) for n in node.body))
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for key in (path.stem, dotted):
            self.modules.setdefault(key, set()).update(top)
        for node in ast.walk(tree):
            self.defined |= names_of(node)
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                self.defined.add(node.attr)
            if isinstance(node, ast.ClassDef):
                members = set().union(*(names_of(n) for n in node.body))
                members |= {
                    n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                }
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                self.classes[node.name] = (members, bases)

    def has_member(self, cls: str, member: str) -> bool:
        """Whether the class or a class it derives from (by name) defines `member`."""
        seen, todo = set(), [cls]
        while todo:
            name = todo.pop()
            if name in seen or name not in self.classes:
                continue
            seen.add(name)
            members, bases = self.classes[name]
            if member in members:
                return True
            todo += bases
        return False

    def methods(self, cls: str) -> int:
        """The functions defined in a class's body (its own, `__init__` included)."""
        for path in (ROOT / "app").rglob("*.py"):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and node.name == cls:
                    return sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body)
        return -1


def names_of(node: ast.AST) -> set[str]:
    """The names a statement defines: a def, a class, or assignment targets."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


@cache
def index() -> Index:
    return Index()


def path_exists(token: str) -> bool:
    """A path from the repository, the library or the app; a bare file name anywhere in the sources;
    a glob that matches something."""
    token = token.rstrip("/")
    for base in (ROOT, ROOT / "kvweb", ROOT / "app"):
        if "*" in token and any(base.glob(token)):
            return True
        if (base / token).exists():
            return True
    if "/" not in token:
        return any(next((ROOT / part).rglob(token), None) for part in SOURCES)
    return False


def command_problem(command: str) -> str | None:
    """What is wrong with a command the doc gives, or None (commands of other tools: their paths)."""
    words = command.split()
    if words[0] == "kvweb":
        cli = (ROOT / "kvweb" / "cli.py").read_text()
        # the command's entry in COMMANDS, however the formatter wraps it
        found = re.search(rf'"{words[1]}":\s*\[\s*\(\s*"kvweb {words[1]}', cli)
        return None if found else f"no command `kvweb {words[1]}` in kvweb/cli.py"
    if words[:2] == ["panel", "serve"] and len(words) > 2:
        return None if (ROOT / words[2]).exists() else f"no {words[2]} to serve"
    if words[:3] == ["pip", "install", "-e"]:
        extra = re.search(r"\[(\w+)\]", command)
        toml = (ROOT / "pyproject.toml").read_text()
        return None if extra is None or re.search(rf"^{extra.group(1)} = ", toml, re.M) else f"no extra in `{command}`"
    if words[:2] == ["python", "-m"]:
        module = ROOT / words[2].replace(".", "/")
        return None if module.with_suffix(".py").exists() or module.is_dir() else f"no module {words[2]}"
    return None


def name_problem(token: str) -> str | None:
    """What is wrong with a name in backticks (`Class`, `Class.method(...)`, `module.name`, `CONSTANT`,
    `function()`, a word), or None."""
    ix = index()
    dotted = DOTTED.match(token)
    if dotted:
        parts = dotted.group(1).split(".")
        head, last = ".".join(parts[:-1]), parts[-1]
        if head in ix.classes:
            return None if ix.has_member(head, last) else f"{head} has no {last}"
        if head in ix.modules:
            return None if last in ix.modules[head] else f"module {head} defines no {last}"
        if head[:1].isupper():
            return f"no class {head}"
        return None if last in ix.defined else f"nothing defines {last}"  # an instance's method: `lab.run`
    named = NAME.match(token)
    if not named:
        return None
    name = named.group(1)
    if name[:1].isupper() and not name.isupper() or name.isupper() and len(name) > 3:
        return None if name in ix.classes or name in ix.defined else f"nothing defines {name}"
    if "_" in name.strip("_") or named.group(2) is not None:  # a function's or attribute's own name
        return None if name in ix.defined else f"nothing defines {name}"
    return None if re.search(rf"\b{name}\b", ix.text) else f"{name} occurs in no source"


def problems(text: str) -> list[str]:
    """Everything the text names that does not exist."""
    out = []
    for token in re.findall(r"`([^`\n]+)`", text):
        token = token.strip()
        if token.startswith("--"):
            cli = (ROOT / "kvweb" / "cli.py").read_text()
            out += [] if f"[{token} " in cli or f'"{token}"' in cli else [f"no flag {token} in kvweb/cli.py"]
        elif re.match(r"^(kvweb|panel|pip|python) ", token):
            out += [p for p in [command_problem(token)] if p]
        elif any(c in token for c in "?=&, ") or token.startswith("build/") or re.search(r"\b[A-Z]{3,}\b", token):
            continue  # a query, a tuple, a build output or a placeholder
        elif PATH.match(token):
            out += [] if path_exists(token) else [f"no file {token}"]
        else:
            out += [p for p in [name_problem(token)] if p]
    for path in PROSE_PATH.findall(re.sub(r"`[^`\n]+`", "", text)):
        out += [] if path.startswith("build/") or path_exists(path) else [f"no file {path}"]
    for cls, module, count in TABLE_ROW.findall(text):
        if not (ROOT / module).exists():
            out.append(f"no file {module}")
        elif index().methods(cls) != int(count):
            out.append(f"{cls} has {index().methods(cls)} methods, not {count}")
    return out


def test_everything_the_architecture_names_exists():
    assert problems(DOC.read_text()) == []


def test_the_check_finds_what_is_missing():
    made_up = (
        "The loop is in `kvweb/serving/nowhere.py` (docs/gone.md); `Router.fly` and `Shell.draw(x)`, "
        "`NoSuchThing` and `Route`, `no_such_function()` and `get_lab`, `kvweb frobnicate` and `kvweb plan`, "
        "`--no-such-flag` and `--json`, `panel serve app/absent.py`, `python -m bench.absent`.\n\n"
        "| `Router` | app/router.py | 99 | the router |\n"
    )
    assert problems(made_up) == [
        "no file kvweb/serving/nowhere.py",
        "Router has no fly",
        "nothing defines NoSuchThing",
        "nothing defines no_such_function",
        "no command `kvweb frobnicate` in kvweb/cli.py",
        "no flag --no-such-flag in kvweb/cli.py",
        "no app/absent.py to serve",
        "no module bench.absent",
        "no file docs/gone.md",
        f"Router has {index().methods('Router')} methods, not 99",
    ]


def oversized(source: str, where: str = "") -> list[str]:
    """The classes of a module with more than `MOST_METHODS` functions in their body (`__init__` and
    properties included) whose docstring gives no reason ("methods: " and why)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            count = sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body)
            if count > MOST_METHODS and not REASON.search(ast.get_docstring(node) or ""):
                out.append(f"{where}{node.name} has {count} methods and no reason in its docstring")
    return out


def test_no_class_over_the_most_methods_without_a_reason():
    paths = sorted(p for part in ("kvweb", "app") for p in (ROOT / part).rglob("*.py"))
    assert [o for p in paths for o in oversized(p.read_text(), f"{p.relative_to(ROOT)}: ")] == []


def test_the_method_count_finds_a_big_class():
    def big(doc: str) -> str:
        return f"class Big:\n    {doc!r}\n" + "".join(f"    def m{i}(self): ...\n" for i in range(MOST_METHODS + 1))

    assert oversized(big("A class.")) == [f"Big has {MOST_METHODS + 1} methods and no reason in its docstring"]
    assert oversized(big("A class. methods: the engine's own class has these verbs.")) == []
    assert oversized(big("A class. methods:")) != []  # a marker without a reason is none
