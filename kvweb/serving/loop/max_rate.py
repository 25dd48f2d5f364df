"""The highest arrival rate that keeps SLO attainment at or above a target (SPEC 3).

Attainment falls as the rate rises (more queueing, bigger batches, slower steps), so the
search doubles or halves a starting rate until it brackets the target, then bisects the
bracket until it is narrower than a relative tolerance.
"""

from __future__ import annotations

from collections.abc import Callable


def max_rate(
    meets: Callable[[float], bool],
    start: float = 1.0,
    rel_tol: float = 0.02,
    lowest: float = 1e-3,
    highest: float = 1e4,
) -> float:
    """Highest rate r with meets(r), to within rel_tol (0.0 if even `lowest` fails,
    `highest` if that passes). `meets` records its own trials if the caller wants them."""
    rate = min(max(start, lowest), highest)
    good, bad = (rate, None) if meets(rate) else (None, rate)
    while bad is None:  # the start passed: double until a rate fails
        if good >= highest:
            return highest
        nxt = min(good * 2, highest)
        good, bad = (nxt, None) if meets(nxt) else (good, nxt)
    while good is None:  # the start failed: halve until a rate passes
        if bad <= lowest:
            return 0.0
        nxt = max(bad / 2, lowest)
        good, bad = (nxt, bad) if meets(nxt) else (None, nxt)
    while bad / good - 1 > rel_tol:
        mid = (good * bad) ** 0.5
        if meets(mid):
            good = mid
        else:
            bad = mid
    return good


def search(
    serve: Callable[[float, int], dict],
    target: float,
    requests: int,
    rel_tol: float,
    tried: Callable[[float], None] = lambda rate: None,
) -> tuple[float, list[dict]]:
    """`max_rate` for serving runs: `serve(rate, give_up_after)` returns metrics.summarize's
    figures; a rate meets the target when the run kept SLO attainment >= target (a run stops
    early once more than (1 - target) x requests have missed). Returns the rate and every trial."""
    allowed_misses = int((1 - target) * requests)
    trials: list[dict] = []

    def meets(rate: float) -> bool:
        m = serve(rate, allowed_misses)
        ok = not m["stopped_early"] and m["slo_attainment"] >= target
        trials.append(
            {
                "rate": rate,
                "met": ok,
                "slo_attainment": None if m["stopped_early"] else m["slo_attainment"],
                "throughput_tok_s": None if m["stopped_early"] else m["throughput_tok_s"],
            }
        )
        tried(rate)
        return ok

    return max_rate(meets, start=1.0, rel_tol=rel_tol), trials
