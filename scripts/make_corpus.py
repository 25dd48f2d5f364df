"""Freeze the mini model's training text: README.md + docs/*.md as plain English prose.

Run once when the corpus should follow the docs (`python scripts/make_corpus.py`); training reads
only the frozen kvweb/kv/corpus.txt, so the shipped weights stay reproducible as the docs change.
Code blocks, tables and link targets are dropped, markup is unwrapped, characters outside the
model's 95-character vocabulary are spelled in ASCII or dropped, and whitespace becomes one space.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from kvweb.kv.model import VOCAB  # noqa: E402

ASCII = {
    "\u2014": " - ",
    "\u2013": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u00d7": "x",
    "\u2192": "->",
    "\u2190": "<-",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2248": "~",
    "\u2026": "...",
    "\u00b7": ".",
    "\u2212": "-",
    "\u2260": "!=",
    "\u00b5": "u",
    "\u03bc": "u",
}


def prose(markdown: str) -> str:
    """One markdown file as paragraphs of plain text."""
    markdown = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    lines = [ln for ln in markdown.splitlines() if not ln.lstrip().startswith(("|", "    ", "<", "!["))]
    text = "\n".join(ln.lstrip("#>-* ") for ln in lines)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their words, not their targets
    text = re.sub(r"[`*_]", "", text)
    text = "".join(ASCII.get(c, c) for c in text)
    text = "".join(c if c in VOCAB else (" " if c.isspace() else "") for c in text)
    return re.sub(r" +", " ", text).strip()


def main() -> None:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    (ROOT / "kvweb/kv/corpus.txt").write_text(
        " ".join(prose(f.read_text(encoding="utf-8")) for f in files) + " ", encoding="ascii"
    )


if __name__ == "__main__":
    main()
