"""When requests reach the server: open-loop arrivals, and chat turns that wait for the answer.

A request with `after` set is a later turn of a conversation: the user sends it `delay`
seconds after the turn it follows has finished (a closed loop, as in vLLM's and SGLang's
multi-turn benchmarks), so its arrival time is only known during the run. When a turn is
rejected its conversation ends there: every later turn is rejected with it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from kvweb.serving.load.workload import Request


class Arrivals:
    """The requests not yet submitted, earliest first (ties keep the order they were given)."""

    def __init__(self, requests: list[Request]) -> None:
        self._heap: list[tuple[float, int, Request]] = []
        self._order = itertools.count()
        self._later: dict[int, list[Request]] = {}  # a turn's id -> the turns sent after it
        for r in requests:
            if r.after is None:
                self._heap.append((r.arrival, next(self._order), r))
            else:
                self._later.setdefault(r.after, []).append(r)
        heapq.heapify(self._heap)
        self.next_t = self._heap[0][0] if self._heap else float("inf")

    def pop(self) -> Request:
        """The earliest pending request (call only while next_t is finite)."""
        _, _, request = heapq.heappop(self._heap)
        self.next_t = self._heap[0][0] if self._heap else float("inf")
        return request

    def add(self, request: Request, at: float | None = None) -> None:
        """A request sent now from outside (a fleet's router), to arrive at `at` (None: its `arrival`)
        whatever its `after`: the conversation it belongs to is the sender's to follow. A request
        that reaches this server later than the fleet (its images' embeddings came first from an
        encode replica) keeps its `arrival`, which its TTFT counts from."""
        heapq.heappush(self._heap, (request.arrival if at is None else at, next(self._order), request))
        self.next_t = self._heap[0][0]

    def queued(self) -> list[Request]:
        """The requests given or sent and not yet submitted (a fleet counts them as waiting)."""
        return [r for _, _, r in self._heap]

    def finished(self, request_id: int, t: float) -> None:
        """A turn ended at time t: the turns that follow it arrive after their delay."""
        later = self._later.pop(request_id, None)
        if later:
            for r in later:
                heapq.heappush(self._heap, (t + r.delay, next(self._order), r.arriving(t + r.delay)))
            self.next_t = self._heap[0][0]

    def refused(self, request: Request, why: str) -> list[tuple[Request, str]]:
        """A request is rejected: it, and every later turn of its conversation (which now never
        comes), each with its reason."""
        gone, todo = [(request, why)], [request.id]
        while todo:
            for r in self._later.pop(todo.pop(), ()):
                gone.append((r, f"its conversation's earlier turn (request {request.id}) was rejected"))
                todo.append(r.id)
        return gone


def why_refused(request: Request, max_len: int, never_fits: Callable[[int], str | None]) -> str | None:
    """Why a request can never run, or None: longer than the model allows, or its final KV
    (prompt + output - 1 tokens) can never fit the memory (`never_fits` says why)."""
    if request.prompt + request.output > max_len:
        return (
            f"prompt + output = {request.prompt + request.output} tokens exceeds the model's maximum length {max_len}"
        )
    return never_fits(request.prompt + request.output - 1)
