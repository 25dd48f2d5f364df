"""kvweb: PagedAttention and RadixAttention computed for real, one lab at a time."""

__version__ = "0.1.0"
