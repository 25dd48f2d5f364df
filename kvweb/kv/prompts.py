"""Readable prompts of any length for the labs: slices of a fixed text, one per variant."""

from __future__ import annotations

from kvweb.kv.model import encode

TEXT = (
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. "
    "How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow. "
)


def make_prompt(length: int, variant: int = 0) -> list[int]:
    """`length` tokens of TEXT (repeated as needed), starting at a place that depends on `variant`."""
    start = (variant * 29) % len(TEXT)
    text = (TEXT * (1 + (start + length) // len(TEXT)))[start : start + length]
    return encode(text)
