"""Seeded serving workloads: Poisson arrivals, closed loops at a fixed concurrency, and prompt/output
length distributions (SPEC 3).

Arrivals and lengths come from separate seeded streams, so the same seed at another rate
gives the same requests arriving faster or slower (common random numbers: a max-rate search
compares like with like). User traces arrive as CSV or JSON text and are validated row by row.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvweb.lab import ParamError, shown
from kvweb.parsing import json_depth, to_number


@dataclass(frozen=True)
class Image:
    """An image in a request's prompt: its placeholder tokens (from `offset`, `length` of them, one
    embedding each) and which image it is (vLLM's mm hash; serving/memory/encoder_cache.py)."""

    offset: int
    length: int
    mm_hash: int


@dataclass(frozen=True)
class Request:
    """One submitted request. Ids follow arrival order (ties keep submission order), except a
    later chat turn's: it arrives `delay` seconds after the turn `after` finished (its `arrival`
    is set then; see serving/load/arrivals.py). `tokens` (prompt then output ids) are given only
    where content matters, for prefix caching; without them a request shares no prefix."""

    id: int
    arrival: float  # seconds
    prompt: int  # prompt tokens
    output: int  # tokens to generate
    tokens: np.ndarray | None = field(default=None, compare=False, repr=False)
    after: int | None = None
    delay: float = 0.0  # seconds
    adapter: int = 0  # its LoRA adapter (0: the base model; serving/memory/lora.py)
    images: tuple[Image, ...] = ()  # images in its prompt, in order (serving/memory/encoder_cache.py)

    def arriving(self, t: float) -> Request:
        """The same request arriving at t (built directly: `dataclasses.replace` costs several
        times more, and runs build one per chat turn and searches thousands)."""
        return Request(
            self.id, t, self.prompt, self.output, self.tokens, self.after, self.delay, self.adapter, self.images
        )


@dataclass(frozen=True)
class LengthDistribution:
    """Lognormal prompt and output lengths with the given means; sigma sets the spread."""

    prompt_mean: float
    prompt_sigma: float
    output_mean: float
    output_sigma: float


# ShareGPT-like: the vLLM paper's ShareGPT means (161 in, 338 out; section 6.1, Fig. 11), long-tailed.
# Alpaca-like: short instructions (19 in, 58 out). Long-context: long prompts for scenario B.
DISTRIBUTIONS: dict[str, LengthDistribution] = {
    "sharegpt": LengthDistribution(160, 1.0, 340, 0.9),
    "alpaca": LengthDistribution(20, 0.6, 60, 0.8),
    "long-context": LengthDistribution(3000, 0.5, 300, 0.8),
}
SHAPES = (*DISTRIBUTIONS, "fixed", "uniform")

MAX_TRACE_ROWS = 5000
MAX_TRACE_LENGTH = 1_000_000  # tokens in one field
# Bounds checked before any parser runs: json.loads recurses once per bracket (a few
# thousand brackets are a RecursionError) and csv refuses fields past 128 KiB.
MAX_TRACE_CHARS = 200_000
MAX_JSON_DEPTH = 8  # a trace needs 2: a list of rows
TRACE_FIELDS = ("arrival", "prompt_len", "output_len")


def lognormal(rng: np.random.Generator, mean: float, sigma: float, n: int) -> np.ndarray:
    """n lengths (rounded, not clipped) from a lognormal with the given mean and spread."""
    mu = math.log(mean) - sigma * sigma / 2  # so that the mean is `mean`
    return np.rint(rng.lognormal(mu, sigma, n))


def lengths(
    shape: str, n: int, max_len: int, seed: int, prompt_len: int = 128, output_len: int = 128
) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths, clipped so that prompt + output <= max_len.

    `fixed` uses prompt_len and output_len as given; `uniform` draws them on 1..prompt_len
    and 1..output_len.
    """
    rng = np.random.default_rng([seed, 1])
    if shape in DISTRIBUTIONS:
        d = DISTRIBUTIONS[shape]
        prompts = lognormal(rng, d.prompt_mean, d.prompt_sigma, n)
        outputs = lognormal(rng, d.output_mean, d.output_sigma, n)
    elif shape == "fixed":
        prompts, outputs = np.full(n, prompt_len), np.full(n, output_len)
    elif shape == "uniform":
        prompts = rng.integers(1, prompt_len + 1, n)
        outputs = rng.integers(1, output_len + 1, n)
    else:
        raise ParamError(f"lengths: '{shape}' is not allowed; expected one of {', '.join(SHAPES)}")
    prompts = np.clip(prompts, 1, max_len - 1).astype(int)
    outputs = np.clip(outputs, 1, max_len - prompts).astype(int)
    return prompts, outputs


def unit_arrivals(n: int, seed: int) -> np.ndarray:
    """Arrival times of a Poisson process at 1 request/s; divide by a rate to rescale."""
    rng = np.random.default_rng([seed, 0])
    return np.cumsum(rng.exponential(1.0, n))


def poisson_workload(
    shape: str, n: int, rate: float, max_len: int, seed: int, prompt_len: int = 128, output_len: int = 128
) -> list[Request]:
    prompts, outputs = lengths(shape, n, max_len, seed, prompt_len, output_len)
    arrivals = unit_arrivals(n, seed) / rate
    return [Request(i, float(a), int(p), int(o)) for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs))]


def with_adapters(requests: list[Request], loras: int, seed: int) -> list[Request]:
    """The requests, each for one of `loras` LoRA adapters (1..loras; 0: every request the base
    model's), adapter i drawn with weight 1 / i (Zipf's law, exponent 1, as S-LoRA's traces: a few
    adapters get most requests), from a seeded stream of its own; a later chat turn keeps its
    session's adapter."""
    if not loras:
        return requests
    weights = 1.0 / np.arange(1, loras + 1)
    drawn = np.random.default_rng([seed, 38]).choice(loras, len(requests), p=weights / weights.sum()) + 1
    adapter: dict[int, int] = {}
    out = []
    for r, a in zip(requests, drawn):
        adapter[r.id] = a = adapter[r.after] if r.after is not None else int(a)
        out.append(Request(r.id, r.arrival, r.prompt, r.output, r.tokens, r.after, r.delay, a, r.images))
    return out


IMAGE_TOKEN = 32000  # the placeholder token: the first id past the workloads' vocabulary (cache_workload.VOCAB)


def with_images(
    requests: list[Request], images: int, image_tokens: int, image_pool: int, seed: int, at: int = 0
) -> list[Request]:
    """The requests, each with `images` images of `image_tokens` placeholder tokens inserted at
    token `at` of its prompt (at most its length), each drawn uniformly from `image_pool` distinct
    images with a seeded stream of its own (so some repeat); a later chat turn keeps its session's
    images where they were (its prompt holds the earlier turn's). 0 images: the requests as given."""
    if not images:
        return requests
    drawn = np.random.default_rng([seed, 39]).integers(1, image_pool + 1, (len(requests), images))
    size = images * image_tokens
    session: dict[int, tuple[Image, ...]] = {}
    out = []
    for r, hashes in zip(requests, drawn):
        if r.after is not None and r.after in session:
            placed = session[r.after]
        else:
            start = min(at, r.prompt)
            placed = tuple(Image(start + k * image_tokens, image_tokens, int(h)) for k, h in enumerate(hashes))
        session[r.id] = placed
        start = placed[0].offset
        tokens = r.tokens
        if tokens is not None:
            tokens = np.concatenate([tokens[:start], np.full(size, IMAGE_TOKEN, dtype=tokens.dtype), tokens[start:]])
        out.append(Request(r.id, r.arrival, r.prompt + size, r.output, tokens, r.after, r.delay, r.adapter, placed))
    return out


def closed_loop_workload(
    shape: str, n: int, concurrency: int, max_len: int, seed: int, prompt_len: int = 128, output_len: int = 128
) -> list[Request]:
    """n requests from `concurrency` clients that each keep one request in flight, as `vllm bench
    serve --max-concurrency`, inference-perf's concurrent load and AIConfigurator's measured rows do:
    every client sends its first request at time 0 and its next the moment its previous one has
    finished (no think time), until n have been sent. Client k sends requests k, k + C, k + 2C, ...
    (C = concurrency): request i >= C is sent after request i - C, through the chat turns' mechanism
    (serving/load/arrivals.py; its `arrival` is set during the run). So exactly min(C, n) requests are in
    the system until the first client has sent its last, and never more. A rejected request (longer
    than the model allows, or never fitting the memory) ends its client, as a rejected chat turn ends
    its conversation (with `fixed` lengths either every request is rejected or none)."""
    prompts, outputs = lengths(shape, n, max_len, seed, prompt_len, output_len)
    return [
        Request(i, 0.0, int(p), int(o), after=i - concurrency if i >= concurrency else None)
        for i, (p, o) in enumerate(zip(prompts, outputs))
    ]


def parse_trace(text: str, max_rows: int = MAX_TRACE_ROWS, max_chars: int = MAX_TRACE_CHARS) -> list[Request]:
    """Requests from CSV (header `arrival,prompt_len,output_len` optional; rows split by
    newlines or ';', so one line of text works too) or JSON (a list of objects with those
    keys, or of [arrival, prompt_len, output_len] triples).

    Any bad row raises one ParamError naming the row (1 = first request) and the field. A file in
    this format (serving/load/traces.py) may hold more rows and characters: `max_rows`, `max_chars`.
    """
    if len(text) > max_chars:
        raise ParamError(f"trace: {len(text):,} characters; at most {max_chars:,} are read")
    stripped = text.strip()
    rows = _json_rows(stripped) if stripped[:1] in ("[", "{") else _csv_rows(stripped)
    if not rows:
        raise ParamError(
            "trace: empty; expected CSV or JSON rows of arrival, prompt_len, output_len (or choose a "
            "trace_file or a trace_preset)"
        )
    if len(rows) > max_rows:
        raise ParamError(f"trace: {len(rows)} rows; at most {max_rows} are allowed")
    parsed = [_check_row(i + 1, row) for i, row in enumerate(rows)]
    order = sorted(range(len(parsed)), key=lambda i: parsed[i][0])
    return [Request(new_id, *parsed[i]) for new_id, i in enumerate(order)]


def _json_rows(text: str) -> list[dict[str, Any]]:
    # Brackets inside strings count too: no valid trace has any.
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ParamError(f"trace: JSON nested {depth} deep; at most {MAX_JSON_DEPTH} levels are read")
    try:
        data = json.loads(text, parse_int=str)  # integers stay text: to_number bounds their digits
    except json.JSONDecodeError as err:
        raise ParamError(f"trace: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    if not isinstance(data, list):
        raise ParamError("trace: JSON must be a list of rows")
    rows = []
    for i, item in enumerate(data, 1):
        if isinstance(item, list) and len(item) == 3:
            rows.append(dict(zip(TRACE_FIELDS, item)))
        elif isinstance(item, dict):
            rows.append(item)
        else:
            raise ParamError(f"trace row {i}: expected an object with {', '.join(TRACE_FIELDS)} or a list of 3 numbers")
    return rows


def _csv_rows(text: str) -> list[dict[str, Any]]:
    try:
        lines = [
            line
            for line in csv.reader(io.StringIO(text.replace(";", "\n"), newline=""))
            if any(cell.strip() for cell in line)
        ]
    except csv.Error as err:
        raise ParamError(f"trace: not valid CSV ({err})") from None
    if not lines:
        return []
    header = [cell.strip().lower() for cell in lines[0]]
    if set(header) == set(TRACE_FIELDS):
        lines = lines[1:]
    else:
        header = list(TRACE_FIELDS)
    rows = []
    for i, line in enumerate(lines, 1):
        if len(line) != 3:
            raise ParamError(f"trace row {i}: {len(line)} fields; expected 3 ({', '.join(header)})")
        rows.append(dict(zip(header, (cell.strip() for cell in line))))
    return rows


def _check_row(i: int, row: dict[str, Any]) -> tuple[float, int, int]:
    for key in row:
        if key not in TRACE_FIELDS:
            raise ParamError(f"trace row {i}: unknown field {shown(str(key), 20)}; allowed: {', '.join(TRACE_FIELDS)}")
    values = []
    for name in TRACE_FIELDS:
        if name not in row:
            raise ParamError(f"trace row {i}: field {name} is missing")
        raw = row[name]
        values.append(_number(i, name, raw) if name == "arrival" else _length(i, name, raw))
    return values[0], values[1], values[2]


def _value(raw: Any, integer: bool) -> int | float | None:
    """A field as a number: CSV text and JSON values alike go through `to_number` (bounded, ASCII)."""
    if isinstance(raw, float) and integer and raw.is_integer():
        raw = int(raw)  # JSON's 1.0
    return to_number(str(raw), integer) if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else None


def _number(i: int, field: str, raw: Any) -> float:
    value = _value(raw, integer=False)
    if value is None or value < 0:
        raise ParamError(
            f"trace row {i}, field {field}: {shown(str(raw), 20)} is not allowed; expected a number of seconds >= 0"
        )
    return value


def _length(i: int, field: str, raw: Any) -> int:
    value = _value(raw, integer=True)
    if value is None or not 1 <= value <= MAX_TRACE_LENGTH:
        raise ParamError(
            f"trace row {i}, field {field}: {shown(str(raw), 20)} is not allowed; expected an integer from 1 to {MAX_TRACE_LENGTH}"
        )
    return int(value)
