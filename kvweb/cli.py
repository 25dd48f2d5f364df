"""The `kvweb` command line: list labs and run one, as a table or as one JSON object.

Bad input exits with status 2 and one line on stderr; nothing goes to stdout then.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import kvweb.labs  # noqa: F401  (registers every lab)
from kvweb.budget import BUDGET_S, MEMORY_MB
from kvweb.jsonable import flatten, jsonable, number
from kvweb.lab import LABS, Lab, ParamError, get_lab, param_names, shown
from kvweb.parsing import allowed, make, to_number
from kvweb.serving.load import traces

COMMANDS = {  # command -> its usage lines (synopsis, what it does)
    "labs": [("kvweb labs", "list lab names, one per line")],
    "run": [
        ("kvweb run LAB [--PARAM VALUE ...] [--json]", "run a lab; a table, or one JSON object"),
        ("", f"[--budget SECONDS]: refuse runs estimated over it (default {BUDGET_S:g})"),
        ("", f"[--memory-budget MB]: ... or over this peak memory (default {MEMORY_MB:g})"),
        ("", "serving labs: --workload trace --trace_file PATH reads a trace file"),
        ("kvweb run LAB --help", "the lab's parameters, defaults and limits"),
    ],
    "plan": [
        ("kvweb plan [--PARAM VALUE ...] [--json]", "the capacity planner: the cheapest fleet within the SLO"),
        ("", "and the Pareto table of cost vs latency (the lab plan's"),
        ("", "parameters: kvweb run plan --help), on a backend:"),
        ("", "[--backend processes|serial|ray] (default processes)"),
        ("", "[--workers N] local processes or local Ray CPUs (default:"),
        ("", "this machine's CPUs) [--address ADDR] a Ray cluster"),
        ("", "(pip install kvweb[ray]) [--budget SECONDS]"),
        ("", "[--memory-budget MB]"),
        ("", "figures are the same on every backend"),
        ("kvweb plan --help", "these lines and the lab's parameters"),
    ],
    "reproduce": [
        ("kvweb reproduce [--out DIR] [--quick]", "run every experiment of the lecture; write"),
        ("", "DIR/report.md and DIR/report.html (default DIR: report)"),
    ],
    "train-mini": [
        ("kvweb train-mini [--out FILE] [--steps N]", "train the mini model on its shipped corpus"),
        ("", "(numpy, seed 0; the defaults rebuild the shipped weights, in"),
        ("", "12-26 minutes on 2 cores) and write FILE (default mini.npz)"),
    ],
}


def usage(*commands: str) -> str:
    """The usage lines of these commands (all of them when none is named)."""
    rows = [row for c in (commands or COMMANDS) for row in COMMANDS[c]]
    return "usage:\n" + "".join(f"  {synopsis:<42}  {what}\n" for synopsis, what in rows)


USAGE = usage()


class UsageError(ParamError):
    pass


def parse_run_args(args: Sequence[str]) -> tuple[str, dict[str, str], bool, bool, float, float]:
    """Split `LAB --name value --name=value --json --help --budget S --memory-budget MB` into its parts.

    A boolean flag given without a value means true.
    """
    if not args or args[0].startswith("-"):
        raise UsageError("kvweb run: name a lab first; allowed: " + ", ".join(sorted(LABS)))
    lab, rest = args[0], list(args[1:])
    cls = get_lab(lab)
    texts: dict[str, str] = {}
    as_json = want_help = False
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            as_json = True
            continue
        if arg in ("--help", "-h"):
            want_help = True
            continue
        if not arg.startswith("--") or arg == "--":
            raise UsageError(f"unexpected argument '{arg}'; parameters look like --name value")
        key, eq, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            is_flag = key in param_names(cls) and allowed(cls.param[key]) == "true or false"
            if rest and not (is_flag and rest[0].startswith("--")):
                value = rest.pop(0)
            elif is_flag:
                value = "true"
            else:
                raise UsageError(f"--{key}: missing value")
        if key in texts:
            raise UsageError(f"--{key}: given twice")
        texts[key] = value
    if "trace_file" in param_names(cls) and os.path.isfile(texts.get("trace_file", "")):
        texts["trace_file"] = trace_file_key(texts["trace_file"])  # else the lab says what it lacks
    budget_s = budget_seconds(texts.pop("budget", str(BUDGET_S)))
    return lab, texts, as_json, want_help, budget_s, budget_megabytes(texts.pop("memory_budget", str(MEMORY_MB)))


def trace_file_key(path: str) -> str:
    """--trace_file PATH: the file read and kept (kvweb/serving/load/traces.py); the lab names it by its key, as
    the app names a file picked."""
    try:
        with open(path, "rb") as file:
            data = file.read(traces.MAX_BYTES + 1)  # one byte more: read_trace says it is too long
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or type(err).__name__
        raise UsageError(
            f"--trace_file: {shown(path)} cannot be read ({reason}); expected the path of a trace "
            f"file: {traces.ALLOWED}"
        ) from None
    return traces.remember(data, path).key


def budget_seconds(text: str) -> float:
    """--budget: the seconds of estimated work a run may take (kvweb/budget.py)."""
    seconds = to_number(text)
    if seconds is None or seconds <= 0:
        raise UsageError(f"--budget: {shown(text)} is not allowed; expected seconds, a number above 0")
    return seconds


def budget_megabytes(text: str) -> float:
    """--memory-budget: the MB of estimated peak memory a run may take above the library's (kvweb/budget.py)."""
    megabytes = to_number(text)
    if megabytes is None or megabytes <= 0:
        raise UsageError(
            f"--memory-budget: {shown(text)} is not allowed; expected megabytes (2**20 bytes), a number above 0"
        )
    return megabytes


def describe(cls: type[Lab]) -> str:
    lines = [f"{cls.lab_name}: {cls.title}", cls.summary, "", "parameters:"]
    for name in param_names(cls):
        p = cls.param[name]
        lines.append(f"  --{name} (default {p.default}; {allowed(p)})")
        if p.doc:
            lines.append(f"      {p.doc}")
    lines += [
        f"  --budget SECONDS (default {BUDGET_S:g})",
        "      refuse a run whose work is estimated over this many seconds; raise it to allow a larger run",
        f"  --memory-budget MB (default {MEMORY_MB:g})",
        "      refuse a run whose peak memory (above the library's) is estimated over this many MB (2**20 bytes);",
        "      raise it to allow a larger run",
    ]
    return "\n".join(lines) + "\n"


MAX_ROWS = 24  # a longer list (a trace, a curve, a step log) prints as a count: --json holds it
MAX_CELL = 60  # so does a list with a longer text (a sampled output, a prompt)


def _fmt(value: Any) -> str:
    if isinstance(value, list):
        return f"[{len(value)} items; see --json]"
    return number(value)


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    """Text columns, figures aligned right (each line indented two spaces)."""
    widths = [max(len(c) for c in column) for column in zip(header, *rows)]
    right = [
        all(c[:1].isdigit() or c[:1] == "-" and c[1:2].isdigit() or c == "-" for c in column) for column in zip(*rows)
    ]
    return [
        "  " + "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(line, widths, right)).rstrip()
        for line in [header, *rows]
    ]


def _short(texts: list[str]) -> bool:
    return all(len(t) <= MAX_CELL and "\n" not in t for t in texts)


def records_table(key: str, items: list[dict[str, Any]]) -> list[str]:
    """A list of results (modes, sweep points) as a table of their scalar figures: side by side,
    one column per item, when they have more figures than there are items, else one row each
    (no table when a cell is long text)."""
    cells = [dict((k, v) for k, v in flatten(item, expand_lists=False) if not isinstance(v, list)) for item in items]
    names = list(dict.fromkeys(k for c in cells for k in c))
    text = [[_fmt(c.get(n)) for n in names] for c in cells]
    if not _short([t for row in text for t in row]):
        return []
    if len(names) <= len(items):
        return [f"{key}:", *_grid(names, text)]
    label = next(
        (
            n
            for n in names
            if all(isinstance(c.get(n), str) for c in cells) and len({c[n] for c in cells}) == len(cells)
        ),
        None,
    )
    header = [label or "", *(c[label] if label else f"{key}[{i}]" for i, c in enumerate(cells))]
    return [
        f"{key}, one column each:",
        *_grid(header, [[n, *(row[j] for row in text)] for j, n in enumerate(names) if n != label]),
    ]


def columns_table(rows: list[tuple[str, list[Any]]]) -> list[str]:
    """Lists of equal length (a sweep's points) as one table, a column each, named by key."""
    keys = [k for k, _ in rows]
    return [
        ", ".join(dict.fromkeys(k.split(".")[0] for k in keys)) + ":",
        *_grid(keys, [[_fmt(v) for v in values] for values in zip(*(v for _, v in rows))]),
    ]


def _is_scalars(value: Any) -> bool:
    return (
        isinstance(value, list)
        and 0 < len(value) <= MAX_ROWS
        and not any(isinstance(v, (dict, list)) for v in value)
        and _short([_fmt(v) for v in value])
    )


def result_text(results: list[tuple[str, Any]], width: int) -> list[str]:
    """The result's scalar rows, then its short lists as tables: lists of results (one per mode
    or point) each their own, lists of numbers side by side with their neighbours of equal length."""
    lines, tables, group = [], [], []
    for key, value in results:
        if group and not (_is_scalars(value) and len(group[-1][1]) == len(value)):
            tables.append(columns_table(group))
            group = []
        if _is_scalars(value):
            group.append((key, value))
            continue
        records = (
            records_table(key, value)
            if isinstance(value, list) and 0 < len(value) <= MAX_ROWS and all(isinstance(v, dict) for v in value)
            else []
        )
        if records:
            tables.append(records)
        else:
            lines.append(f"  {key:<{width}}  {_fmt(value)}")
    if group:
        tables.append(columns_table(group))
    return lines + [line for t in tables for line in ["", *t]]


def table(lab: Lab, result: dict[str, Any]) -> str:
    """A readable view: parameters, then scalar results (nested dicts flattened), then the
    result's short lists as tables (longer ones as a count)."""
    rows = flatten(lab.values())
    results = flatten(result, expand_lists=False)
    width = max(len(k) for k, _ in rows + results)
    lines = [f"{lab.lab_name}: {lab.title}", ""]
    lines += [f"  {k:<{width}}  {_fmt(v)}" for k, v in rows] + ["", "result:"]
    lines += result_text(results, width)
    return "\n".join(lines) + "\n"


PLAN_OPTIONS = ("backend", "workers", "address")  # kvweb plan's own flags (the browser has no backends)


def plan_command(args: Sequence[str], out: TextIO, err: TextIO) -> int:
    """`kvweb plan ...`: the lab `plan`, its candidates evaluated on the backend chosen; the JSON's
    `result` is the lab's run, whatever the backend."""
    import os

    from kvweb.fleet.backends import backend

    if {"-h", "--help"} & set(args):
        out.write(usage("plan") + "\n" + describe(get_lab("plan")))
        return 0
    name, texts, as_json, _, budget_s, memory_mb = parse_run_args(["plan", *args])
    options = {k: texts.pop(k) for k in PLAN_OPTIONS if k in texts}
    workers = to_number(options.get("workers", str(os.cpu_count() or 1)), integer=True)
    if workers is None or not 1 <= workers <= 1024:
        raise UsageError(f"--workers: {shown(options['workers'])} is not allowed; expected an integer from 1 to 1024")
    where = backend(options.get("backend", "processes"), workers, options.get("address") or None)
    lab = make(name, texts, budget_s, memory_mb)
    result = jsonable(lab.plan(progress_to(err), where))
    if as_json:
        used = {"backend": where.name, "workers": workers, "address": options.get("address")}
        out.write(
            json.dumps(
                {"lab": name, "params": jsonable(lab.values()), "backend": used, "result": result}, allow_nan=False
            )
            + "\n"
        )
    else:
        out.write(table(lab, result))
    return 0


def progress_to(err: TextIO) -> Callable[[float, str], None]:
    """Progress on one line of a terminal (nothing when stderr is not one)."""
    return (lambda f, msg: err.write(f"\r{f:4.0%} {msg}\033[K")) if err.isatty() else (lambda f, msg: None)


def reproduce_command(args: Sequence[str], out: TextIO, err: TextIO) -> int:
    """`kvweb reproduce [--out DIR] [--quick]`: progress on stderr, the files written on stdout."""
    from kvweb.reproduce import reproduce, write_report

    folder, quick, rest = "report", False, list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--quick":
            quick = True
        elif arg == "--out" and rest:
            folder = rest.pop(0)
        elif arg.startswith("--out="):
            folder = arg[len("--out=") :]
        else:
            raise UsageError(f"kvweb reproduce: unexpected argument '{arg}'; allowed: --out DIR, --quick")
    last = [""]

    def progress(fraction: float, message: str) -> None:
        head = message.split(" | ")[0]
        if head != last[0]:  # one line per experiment
            last[0] = head
            err.write(f"[{fraction:4.0%}] {head}\n")

    report = reproduce(quick, progress)
    for path in write_report(report, folder):
        out.write(path + "\n")
    err.write(f"done in {report['seconds']:.1f} s\n")
    return 0


def train_mini_command(args: Sequence[str], out: TextIO, err: TextIO) -> int:
    """`kvweb train-mini [--out FILE] [--steps N]`: progress on stderr; the file and whether it is
    byte for byte the shipped weights on stdout."""
    from pathlib import Path

    from kvweb.kv.train import TrainConfig, shipped_weights, train_mini

    options = {"out": "mini.npz", "steps": str(TrainConfig.steps)}
    rest = list(args)
    while rest:
        key, eq, value = rest.pop(0).partition("=")
        if key not in ("--out", "--steps") or not (eq or rest):
            raise UsageError(f"kvweb train-mini: unexpected argument '{key}'; allowed: --out FILE, --steps N")
        options[key[2:]] = value if eq else rest.pop(0)
    if not options["steps"].isdigit() or int(options["steps"]) < 1:
        raise UsageError(f"--steps: '{options['steps']}' is not allowed; allowed: a whole number >= 1")
    path = Path(options["out"])
    train_mini(path, TrainConfig(steps=int(options["steps"])), log=lambda line: err.write(line + "\n"))
    same = path.read_bytes() == shipped_weights()
    out.write(f"{path}: {'identical to' if same else 'differs from'} the shipped kvweb/kv/mini.npz\n")
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args or args[0] in ("-h", "--help", "help"):
            out.write(USAGE)
            return 0
        command, rest = args[0], args[1:]
        if command in COMMANDS and command != "plan" and {"-h", "--help"} & set(rest[:1] if command == "run" else rest):
            out.write(usage(command) + ("labs: " + ", ".join(sorted(LABS)) + "\n" if command == "run" else ""))
            return 0
        if command == "labs":
            if rest:
                raise UsageError(f"kvweb labs: unexpected argument '{rest[0]}'; it takes none")
            out.write("".join(f"{name}\n" for name in sorted(LABS)))
            return 0
        if command == "reproduce":
            return reproduce_command(rest, out, err)
        if command == "plan":
            return plan_command(rest, out, err)
        if command == "train-mini":
            return train_mini_command(rest, out, err)
        if command != "run":
            raise UsageError(f"unknown command '{command}'; allowed: labs, run, plan, reproduce, train-mini")
        name, texts, as_json, want_help, budget_s, memory_mb = parse_run_args(rest)
        if want_help:
            out.write(describe(get_lab(name)))
            return 0
        lab = make(name, texts, budget_s, memory_mb)
        result = jsonable(lab.run(progress_to(err)))
    except ParamError as error:
        err.write(f"kvweb: {error}\n")
        return 2
    if as_json:
        out.write(json.dumps({"lab": name, "params": jsonable(lab.values()), "result": result}, allow_nan=False) + "\n")
    else:
        out.write(table(lab, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
