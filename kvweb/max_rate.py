"""The highest arrival rate that keeps SLO attainment at or above a target (SPEC 3).

Attainment falls as the rate rises (more queueing, bigger batches, slower steps), so the
search doubles or halves a starting rate until it brackets the target, then bisects the
bracket until it is narrower than a relative tolerance.
"""
from __future__ import annotations

from collections.abc import Callable


def max_rate(meets: Callable[[float], bool], start: float = 1.0, rel_tol: float = 0.02,
             lowest: float = 1e-3, highest: float = 1e4) -> tuple[float, list[tuple[float, bool]]]:
    """Highest rate r with meets(r) (0.0 if even `lowest` fails; `highest` if that passes).

    Returns the rate and every (rate, met) tried, in order.
    """
    tried: list[tuple[float, bool]] = []

    def probe(rate: float) -> bool:
        ok = meets(rate)
        tried.append((rate, ok))
        return ok

    rate = min(max(start, lowest), highest)
    if probe(rate):
        good, bad = rate, None
        while bad is None:
            if good >= highest:
                return highest, tried
            nxt = min(good * 2, highest)
            if probe(nxt):
                good = nxt
            else:
                bad = nxt
    else:
        good, bad = None, rate
        while good is None:
            if bad <= lowest:
                return 0.0, tried
            nxt = max(bad / 2, lowest)
            if probe(nxt):
                good = nxt
            else:
                bad = nxt
    while bad / good - 1 > rel_tol:
        mid = (good * bad) ** 0.5
        if probe(mid):
            good = mid
        else:
            bad = mid
    return good, tried
