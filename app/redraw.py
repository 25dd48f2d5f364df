"""One redraw, one message: the document changes made inside `one_message()` reach the page
together. The static site's worker link (app/site/link.py) batches them; elsewhere nothing
changes (Bokeh's server has its own way). The app never imports the site's plumbing: the link
plugs itself in here (`batch_with`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

Batch = Callable[[], AbstractContextManager[None]]
_batch: Batch = nullcontext


def one_message() -> AbstractContextManager[None]:
    return _batch()


def batch_with(batch: Batch) -> None:
    """Make `one_message()` enter `batch()` (the worker link's, once it is linked)."""
    global _batch
    _batch = batch
