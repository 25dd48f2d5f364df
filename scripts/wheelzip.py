"""Rewrite wheels member by member, keeping their RECORD true.

Plain standard library, so the same code runs in CPython (build_site.py) and inside
Pyodide (pyodide_compile.py).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

# A transform maps one member to what replaces it: [] drops it, [(name, data)] keeps or renames it.
Transform = Callable[[str, bytes], list[tuple[str, bytes]]]
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # reproducible archives


def record_row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(dest: Path, members: Iterable[tuple[str, bytes]]) -> Path:
    """Write a zip; a `*.dist-info/RECORD` member is regenerated from the other members."""
    members = list(members)
    records = [name for name, _ in members if name.endswith(".dist-info/RECORD")]
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in members:
            if name in records:
                rows = [record_row(n, d) for n, d in members if n != name]
                data = ("\n".join(rows) + f"\n{name},,\n").encode()
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.external_attr = 0o644 << 16
            out.writestr(info, data, zipfile.ZIP_DEFLATED)
    return dest


def rewrite(source: Path, dest: Path, transform: Transform) -> Path:
    with zipfile.ZipFile(source) as src:
        members = [(info.filename, src.read(info)) for info in src.infolist() if not info.is_dir()]
    return write_wheel(dest, [out for name, data in members for out in transform(name, data)])
