"""Production traces as files: Mooncake's JSONL, Azure's LLM inference CSVs, BurstGPT's CSV and kvweb's own
CSV/JSON, read into the serving labs' requests (docs/traces.md).

A file's format is told by its first line (a JSON object, a JSON list, or a CSV header); every row is
checked, and a bad one is named by its line and field. Arrival times become seconds after the first
row. Mooncake's rows carry `hash_ids`: each hash is one 512-token block, and a hash stands for its
whole prefix (the blocks before it), so requests that share leading hashes share a prompt prefix.
Each distinct hash becomes 512 token ids of its own, so kvweb's prefix caches and routers see the
same shared prefixes as Mooncake's: the k-th distinct hash of the trace is the ids
`k * 512 ... k * 512 + 511`. The other formats carry no content: their requests share nothing.

Bounds before anything is converted: `MAX_BYTES` of text, `MAX_ROWS` rows, `MAX_PARSE_S` of
reading, `MAX_LENGTH` tokens a field and `MAX_TOKENS` tokens of content in all. `replay` scales a
trace's rate and cuts a window of it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from kvweb.lab import ParamError, shown
from kvweb.memo import Memo
from kvweb.parsing import to_number
from kvweb.serving.load.workload import MAX_TRACE_LENGTH, Request, parse_trace

MAX_BYTES = 20_000_000  # Mooncake's conversation trace is about 3 MB; Azure's week-long files need a cut
MAX_ROWS = 100_000
MAX_PARSE_S = 20.0
MAX_LENGTH = MAX_TRACE_LENGTH  # tokens in one field
MAX_TOKENS = 500_000_000  # prompt + output tokens of a trace with content: its token ids stay below 2**31
MAX_NAME = 60  # characters of a file's name kept
HASH_BLOCK = 512  # tokens per Mooncake hash (the Mooncake paper, section 4; guidellm's hash_id_block_size)
OUTPUT_BASE = 1 << 39  # token ids of the answers: apart from the prompts' and below sequence.TOKEN_BASE
CHECK_EVERY = 1024  # rows between two looks at the clock
PRESETS_DIR = Path(__file__).parent / "trace_presets"

FORMATS = {
    "mooncake": "Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids)",
    "azure": "Azure LLM inference CSV (TIMESTAMP, ContextTokens, GeneratedTokens)",
    "burstgpt": "BurstGPT CSV (Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type)",
    "kvweb": "kvweb CSV or JSON (arrival, prompt_len, output_len)",
}
ALLOWED = "; ".join(FORMATS.values())
MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
AZURE_FIELDS = ("timestamp", "contexttokens", "generatedtokens")
BURSTGPT_FIELDS = ("timestamp", "request tokens", "response tokens")
_AZURE_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d)?")


@dataclass(frozen=True)
class Trace:
    """A trace read from a file: its rows in arrival order, arrivals in seconds after the first row.
    `blocks` holds each row's prompt blocks (dense ids of Mooncake's hashes, first seen first), or
    None for a format without content; `skipped` counts rows with no prompt or no output tokens
    (BurstGPT's failed requests), which are not served."""

    name: str
    format: str
    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    blocks: tuple[np.ndarray, ...] | None
    skipped: int
    digest: str  # sha256 of the file's bytes, hex

    @property
    def rows(self) -> int:
        return len(self.arrival)

    @property
    def key(self) -> str:
        """How a parameter names it: `name:rows:digest` (16 hex digits of the digest)."""
        return f"{self.name}:{self.rows}:{self.digest[:16]}"

    def summary(self) -> dict[str, Any]:
        """What a result says of the trace read."""
        shared = 0
        if self.blocks is not None:
            seen: set[int] = set()
            for row in self.blocks:
                shared += sum(int(b) in seen for b in row)
                seen.update(row.tolist())
        return {
            "name": self.name,
            "format": self.format,
            "rows": self.rows,
            "skipped": self.skipped,
            "span_s": float(self.arrival[-1]),
            "digest": self.digest[:16],
            "prompt_tokens": int(self.prompt.sum()),
            "output_tokens": int(self.output.sum()),
            "shared_blocks": shared if self.blocks is not None else None,
        }


def read_trace(data: bytes | str, name: str = "trace") -> Trace:
    """A trace from a file's bytes (or text), its format told by its first line; one ParamError
    naming the line and field of the first bad row, or what is wrong with the file and what is allowed."""
    if len(data) > MAX_BYTES:
        raise ParamError(f"trace file: {len(data):,} bytes; at most {MAX_BYTES:,} are read (cut a window of it first)")
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ParamError(f"trace file: not UTF-8 text (byte {err.start:,}); expected {ALLOWED}") from None
    name = clean_name(name)
    digest = hashlib.sha256(raw).hexdigest()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise ParamError(f"trace file: empty; expected {ALLOWED}")
    deadline = time.monotonic() + MAX_PARSE_S
    if first.startswith("{"):
        fmt, rows = _json_lines(text, deadline)
    elif first.startswith("["):
        fmt, rows = "kvweb", _kvweb(text)
    else:
        fmt, rows = _csv(text, deadline)
    return _trace(name, fmt, rows, digest)


def of_text(text: str) -> Trace:
    """The pasted rows of the `trace` parameter (kvweb's format, `workload.parse_trace`) as a trace."""
    rows = [(r.arrival, r.prompt, r.output, None) for r in parse_trace(text)]
    return _trace("trace", "kvweb", rows, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())


def clean_name(name: str) -> str:
    """A file's name as a parameter keeps it: letters, digits, '.', '-' and '_' (others '_'), at most MAX_NAME."""
    base = re.split(r"[\\/]", name)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", base)[:MAX_NAME] or "trace"


Row = tuple[float, int, int, "list[int] | None"]  # arrival s, prompt, output, Mooncake's hashes


def _trace(name: str, fmt: str, rows: list[Row], digest: str) -> Trace:
    kept = [r for r in rows if r[1] > 0 and r[2] > 0]
    if not kept:
        raise ParamError(
            f"trace file: no row with prompt and output tokens ({len(rows):,} rows read); expected {ALLOWED}"
        )
    order = sorted(range(len(kept)), key=lambda i: kept[i][0])  # stable: ties keep the file's order
    arrival = np.array([kept[i][0] for i in order], dtype=float)
    prompt = np.array([kept[i][1] for i in order], dtype=np.int64)
    output = np.array([kept[i][2] for i in order], dtype=np.int64)
    blocks = None
    if fmt == "mooncake":
        if int(prompt.sum() + output.sum()) > MAX_TOKENS:
            raise ParamError(
                f"trace file: {int(prompt.sum() + output.sum()):,} tokens; at most {MAX_TOKENS:,} "
                "tokens of content are read (cut a window of it first)"
            )
        dense: dict[int, int] = {}
        blocks = tuple(
            np.array([dense.setdefault(h, len(dense)) for h in kept[i][3] or ()], dtype=np.int64) for i in order
        )
    return Trace(name, fmt, arrival - arrival[0], prompt, output, blocks, len(rows) - len(kept), digest)


def _rows_of(lines: Iterator[tuple[int, Any]], deadline: float) -> Iterator[tuple[int, Any]]:
    """The rows, bounded in number and in reading time."""
    for count, (line, row) in enumerate(lines, 1):
        if count > MAX_ROWS:
            raise ParamError(
                f"trace file: more than {MAX_ROWS:,} rows; at most {MAX_ROWS:,} are read (cut a window of it first)"
            )
        if count % CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise ParamError(
                f"trace file: still reading at line {line:,} after {MAX_PARSE_S:g} s; at most "
                f"{MAX_PARSE_S:g} s of reading is allowed (cut a window of it first)"
            )
        yield line, row


def _json_lines(text: str, deadline: float) -> tuple[str, list[Row]]:
    """JSON lines: Mooncake's rows, or kvweb's (arrival, prompt_len, output_len)."""

    def parsed() -> Iterator[tuple[int, Any]]:
        for line, chunk in enumerate(text.splitlines(), 1):
            if chunk.strip():
                if (
                    chunk.count("[") + chunk.count("{") > 2
                ):  # an object and its hash list: json.loads recurses per bracket
                    raise ParamError(f"trace line {line}: JSON nested too deep; expected one object per line")
                try:
                    yield line, json.loads(chunk)
                except (json.JSONDecodeError, ValueError) as err:
                    raise ParamError(
                        f"trace line {line}: not valid JSON ({getattr(err, 'msg', err)}); "
                        f"expected one object per line: {ALLOWED}"
                    ) from None

    rows: list[Row] = []
    fmt = ""
    for line, obj in _rows_of(parsed(), deadline):
        if not isinstance(obj, dict):
            raise ParamError(f"trace line {line}: expected a JSON object; allowed: {ALLOWED}")
        fmt = fmt or ("kvweb" if "arrival" in obj else "mooncake")
        fields = MOONCAKE_FIELDS if fmt == "mooncake" else ("arrival", "prompt_len", "output_len")
        for key in obj:
            if key not in fields:
                raise ParamError(
                    f"trace line {line}: unknown field {shown(str(key), 20)}; allowed for "
                    f"{FORMATS[fmt]}: {', '.join(fields)}"
                )
        for key in fields:
            if key not in obj:
                raise ParamError(f"trace line {line}: field {key} is missing; {FORMATS[fmt]} has {', '.join(fields)}")
        if fmt == "kvweb":
            rows.append(
                (
                    _seconds(line, "arrival", obj["arrival"]),
                    _tokens(line, "prompt_len", obj["prompt_len"]),
                    _tokens(line, "output_len", obj["output_len"]),
                    None,
                )
            )
            continue
        prompt = _tokens(line, "input_length", obj["input_length"])
        hashes = _hashes(line, obj.get("hash_ids"), prompt)
        rows.append(
            (
                _seconds(line, "timestamp", obj["timestamp"]) / 1000,
                prompt,
                _tokens(line, "output_length", obj["output_length"], zero=True),
                hashes,
            )
        )
    return fmt, rows


def _kvweb(text: str) -> list[Row]:
    """kvweb's own CSV or JSON list (workload.parse_trace), up to MAX_ROWS rows."""
    requests = parse_trace(text, max_rows=MAX_ROWS, max_chars=MAX_BYTES)
    return [(r.arrival, r.prompt, r.output, None) for r in requests]


def _csv(text: str, deadline: float) -> tuple[str, list[Row]]:
    """A CSV file: Azure's or BurstGPT's by their header, else kvweb's own."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [cell.strip().lower() for cell in next(reader)]
    except csv.Error as err:
        raise ParamError(f"trace line 1: not valid CSV ({err}); expected {ALLOWED}") from None
    if all(f in header for f in AZURE_FIELDS):
        fmt, fields = "azure", AZURE_FIELDS
    elif all(f in header for f in BURSTGPT_FIELDS):
        fmt, fields = "burstgpt", BURSTGPT_FIELDS
    elif to_number(header[0] if header else "") is not None or set(header) == {"arrival", "prompt_len", "output_len"}:
        return "kvweb", _kvweb(text)
    else:
        raise ParamError(
            f"trace file: the first line, {shown(','.join(header), 60)}, is no header kvweb reads; allowed: {ALLOWED}"
        )
    at = [header.index(f) for f in fields]
    names = dict(
        zip(
            fields,
            ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
            if fmt == "azure"
            else ("Timestamp", "Request tokens", "Response tokens"),
        )
    )

    def lines() -> Iterator[tuple[int, list[str]]]:
        try:
            for cells in reader:
                if any(c.strip() for c in cells):
                    yield reader.line_num, cells
        except csv.Error as err:
            raise ParamError(f"trace line {reader.line_num}: not valid CSV ({err}); expected {ALLOWED}") from None

    rows: list[Row] = []
    first = None  # Azure: the first row's whole seconds since 1970
    for line, cells in _rows_of(lines(), deadline):
        if len(cells) != len(header):
            raise ParamError(f"trace line {line}: {len(cells)} fields; expected {len(header)} ({', '.join(header)})")
        stamp, prompt, output = (cells[i].strip() for i in at)
        if fmt == "azure":
            whole, fraction = _azure_time(line, stamp)
            first = whole if first is None else first
            when = (whole - first) + fraction
        else:
            when = _seconds(line, names["timestamp"], stamp)
        rows.append(
            (
                when,
                _tokens(line, names[fields[1]], prompt, zero=True),
                _tokens(line, names[fields[2]], output, zero=True),
                None,
            )
        )
    return fmt, rows


def _seconds(line: int, field: str, raw: Any) -> float:
    value = _number(raw, integer=False)
    if value is None or value < 0:
        raise ParamError(
            f"trace line {line}, field {field}: {shown(str(raw), 30)} is not allowed; expected a number >= 0"
        )
    return float(value)


def _tokens(line: int, field: str, raw: Any, zero: bool = False) -> int:
    """A token count; with `zero`, 0 too (a row that is then skipped: BurstGPT's failed requests)."""
    value = _number(raw, integer=True)
    if value is None or not (0 if zero else 1) <= value <= MAX_LENGTH:
        raise ParamError(
            f"trace line {line}, field {field}: {shown(str(raw), 30)} is not allowed; expected an "
            f"integer from {0 if zero else 1} to {MAX_LENGTH:,}"
        )
    return int(value)


def _number(raw: Any, integer: bool) -> int | float | None:
    """A field as a number: CSV text and JSON numbers alike, bounded (`to_number`)."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        return None
    if isinstance(raw, float):
        if not math.isfinite(raw) or (integer and not raw.is_integer()):
            return None
        return int(raw) if integer else raw
    if isinstance(raw, int):
        return raw if abs(raw) < 10**30 else None
    return to_number(raw, integer)


def _hashes(line: int, raw: Any, prompt: int) -> list[int]:
    """Mooncake's hash_ids: one non-negative integer per 512-token block of the prompt."""
    if not isinstance(raw, list) or not all(type(h) is int and 0 <= h < 2**63 for h in raw):
        raise ParamError(
            f"trace line {line}, field hash_ids: {shown(str(raw), 30)} is not allowed; expected a list "
            "of integers from 0 to 2**63 - 1"
        )
    if len(raw) != -(-prompt // HASH_BLOCK):
        raise ParamError(
            f"trace line {line}, field hash_ids: {len(raw)} hashes for input_length {prompt}; expected "
            f"{-(-prompt // HASH_BLOCK)} (one per {HASH_BLOCK}-token block)"
        )
    return raw


def _azure_time(line: int, raw: str) -> tuple[int, float]:
    """Azure's TIMESTAMP (`2023-11-16 18:15:46.6805900`, 7 digits of fraction; a zone allowed): whole
    seconds since 1970 and the fraction apart (as one float, 7 digits of fraction would be lost)."""
    m = _AZURE_TIME.fullmatch(raw)
    try:
        if m is None:
            raise ValueError
        year, month, day, hour, minute, sec, frac, zone = m.groups()
        when = datetime(int(year), int(month), int(day), int(hour), int(minute), int(sec), tzinfo=timezone.utc)
        if zone and zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            digits = zone[1:].replace(":", "")
            when -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    except ValueError:
        raise ParamError(
            f"trace line {line}, field TIMESTAMP: {shown(raw, 30)} is not allowed; expected a date and "
            "time like 2023-11-16 18:15:46.6805900"
        ) from None
    return int(when.timestamp()), int(frac) / 10 ** len(frac) if frac else 0.0


def replay(trace: Trace, scale: float = 1.0, start: float = 0.0, duration: float = 0.0) -> list[Request]:
    """`requests`, remembered (a lab's estimate and its run read the same; requests are only read)."""
    return _REPLAYED.get((trace.digest, scale, start, duration), lambda: requests(trace, scale, start, duration))


def requests(trace: Trace, scale: float = 1.0, start: float = 0.0, duration: float = 0.0) -> list[Request]:
    """The trace's requests from `start` s for `duration` s (0: to its end), arriving `scale` times
    as fast (x2: twice the rate; the window is in the trace's own seconds), the first at
    (its arrival - start) / scale. Mooncake's carry their tokens: prompt blocks, then answer ids of their own."""
    end = start + duration if duration else math.inf
    lo, hi = np.searchsorted(trace.arrival, [start, end], side="left")
    if lo == hi:
        raise ParamError(
            f"trace_start, trace_duration: the window {start:g} s to "
            f"{'the end' if not duration else f'{end:g} s'} holds no request; the trace "
            f"{trace.name} spans 0 to {trace.arrival[-1]:g} s"
        )
    requests = []
    answered = 0  # answer ids given so far
    ramp = np.arange(HASH_BLOCK, dtype=np.int64)
    for new_id, i in enumerate(range(lo, hi)):
        prompt, output = int(trace.prompt[i]), int(trace.output[i])
        tokens = None
        if trace.blocks is not None:
            content = (trace.blocks[i][:, None] * HASH_BLOCK + ramp).ravel()[:prompt]
            answer = np.arange(OUTPUT_BASE + answered, OUTPUT_BASE + answered + output, dtype=np.int64)
            tokens = np.concatenate([content, answer])
            answered += output
        requests.append(Request(new_id, float((trace.arrival[i] - start) / scale), prompt, output, tokens))
    return requests


_REPLAYED: Memo[list[Request]] = Memo(2)
# Traces loaded in this process (a file picked in the app, a --trace_file on the CLI), by key; the
# bytes also go to a folder, where the served app's child processes (app/child.py) find them.
_LOADED: Memo[Trace] = Memo(4)
STORE = Path(tempfile.gettempdir()) / "kvweb-traces"
_KEY = re.compile(r"([A-Za-z0-9._-]{1,60}):([0-9]{1,7}):([0-9a-f]{16})")


def remember(data: bytes | str, name: str) -> Trace:
    """Read a file and keep it, so that its key names it in this process and its children."""
    trace = read_trace(data, name)
    _LOADED.get(trace.key, lambda: trace)
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    try:
        STORE.mkdir(exist_ok=True)
        (STORE / f"{trace.digest[:16]}.trace").write_bytes(raw)
    except OSError:
        pass  # no writable folder: this process still holds it
    return trace


def recall(key: str) -> Trace:
    """The trace a `trace_file` key names: loaded here, or kept in the store by another process."""
    m = _KEY.fullmatch(key)
    if m is None:
        raise ParamError(
            f"trace_file: {shown(key)} is no trace file kvweb can read here; expected the path of a "
            "trace file (command line) or a file picked in the app"
        )

    def load() -> Trace:
        name, rows, digest = m.groups()
        path = STORE / f"{digest}.trace"
        if path.is_file():
            trace = read_trace(path.read_bytes(), name)
            if trace.key == key:
                return trace
        raise ParamError(
            f"trace_file: {name} ({int(rows):,} rows, digest {digest}) is not loaded here; pick the "
            "file again, or choose a trace_preset (presets load anywhere)"
        )

    return _LOADED.get(key, load)


def chosen(file_key: str, preset_name: str, pasted: str | None = None) -> Trace:
    """The trace a lab replays: its `trace_file`, else its pasted `trace` rows (labs that take them), else its
    `trace_preset`."""
    if file_key:
        return recall(file_key)
    if pasted is not None and (pasted.strip() or preset_name == "none"):
        return of_text(pasted)
    if preset_name == "none":
        raise ParamError("trace_preset: none is not allowed with workload trace; choose a trace_preset or a trace_file")
    return preset(preset_name)


def mean_rate(requests: list[Request]) -> float:
    """Requests per second over a replay's span (a lone request: 1 per second)."""
    span = max(r.arrival for r in requests)
    return len(requests) / span if span > 0 else float(len(requests))


def presets() -> dict[str, Path]:
    """The traces shipped with kvweb (kvweb/serving/load/trace_presets/), by name."""
    return {p.stem: p for p in sorted(PRESETS_DIR.glob("*.*")) if p.suffix in (".jsonl", ".csv", ".json")}


def preset(name: str) -> Trace:
    """A shipped trace, read once per process."""
    path = presets()[name]
    return _LOADED.get(("preset", name), lambda: read_trace(path.read_bytes(), path.name))
