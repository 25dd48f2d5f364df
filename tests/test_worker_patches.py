"""app/worker.py: the static site's worker sends the document's changes in batches (that the
page draws the same from them is e2e: every static-site test goes through this link)."""
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `app` is not an installed package

from app.worker import Batcher  # noqa: E402


class Event:
    def __init__(self, name: str, setter: str | None = None) -> None:
        self.name, self.setter = name, setter


def test_events_leave_in_order_once_per_batch_and_the_pages_own_stay():
    sent: list[list[str]] = []
    scheduled: list[Any] = []
    now = [0.0]
    batcher = Batcher(lambda events: sent.append([e.name for e in events]), setter="js", wait_s=0.1,
                      clock=lambda: now[0], later=scheduled.append)
    for name in ("a", "b"):
        batcher.on_change(Event(name))
    batcher.on_change(Event("from the page", setter="js"))
    assert sent == [] and len(scheduled) == 1  # one call on the next turn per batch
    batcher.flush()
    batcher.flush()  # nothing waits: nothing is sent
    assert sent == [["a", "b"]]
    batcher.on_change(Event("c"))
    now[0] = 0.05
    batcher.on_change(Event("d"))
    assert sent == [["a", "b"]]  # the oldest has waited 0.05 s: it still waits
    now[0] = 0.1
    batcher.on_change(Event("e"))  # ... 0.1 s: the batch leaves with this event
    assert sent == [["a", "b"], ["c", "d", "e"]] and len(scheduled) == 2
    scheduled[-1]()  # the scheduled flush finds nothing left
    assert len(sent) == 2
