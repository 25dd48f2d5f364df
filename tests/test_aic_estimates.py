"""AIConfigurator's own estimate of the measured deployments (bench/data/aic_silicon.json, read by
bench/aic.py): every row bench.silicon keeps has an estimate or AIConfigurator's reason, the figures
are positive and finite, and its MAPE per group, recomputed here from the file and the rows, is the one
bench/data/README-aic.md records. Needs neither aiconfigurator nor .venv-measured: only the JSON."""

import json
import math
import re
import statistics
from collections import defaultdict

import pytest

pytest.importorskip("bench.silicon", reason="bench/ is not in the wheel Pyodide's tests run against")
from bench.aic import DATA, aic_database_versions, aic_estimates, aic_failed  # noqa: E402
from bench.silicon import build  # noqa: E402
from kvweb.gpu.measured import silicon_rows  # noqa: E402

README = DATA.parent / "README-aic.md"
ROWS = silicon_rows()
KEPT, _ = build(ROWS)


def test_every_kept_row_has_an_estimate_or_a_reason_never_both():
    estimates, failed = aic_estimates(), aic_failed()
    assert not estimates.keys() & failed.keys()
    missing = [r.raw["id"] for r in KEPT if r.raw["id"] not in estimates and r.raw["id"] not in failed]
    assert missing == []
    assert all(reason.strip() for reason in failed.values())


def test_rows_are_the_silicon_rows_own_and_no_duplicates():
    by_id = {r["id"]: r for r in ROWS}
    ids = list(aic_estimates()) + list(aic_failed())
    assert len(ids) == len(set(ids))
    assert all(i in by_id and by_id[i]["duplicate_of"] is None for i in ids)


def test_estimates_are_positive_finite_and_four_significant_digits():
    raw = json.loads(DATA.read_text())
    assert [row[0] for row in raw["rows"]] == sorted(row[0] for row in raw["rows"])
    assert list(raw["failed"]) == sorted(raw["failed"])
    for _, ttft, tpot, version in raw["rows"]:
        for x in (ttft, tpot):
            assert math.isfinite(x) and x > 0
            assert float(f"{x:.4g}") == x
        assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert DATA.stat().st_size < 200_000
    # the loader: seconds from the file's milliseconds
    first = raw["rows"][0]
    assert aic_estimates()[first[0]] == pytest.approx((first[1] / 1e3, first[2] / 1e3), rel=1e-12)
    assert aic_database_versions()[first[0]] == first[3]


def _group(row) -> str:
    """bench/silicon.py's grouping: half, engine and GPU."""
    return f"{row.half}: {row.raw['backend']} {row.raw['system'].split('_')[0].upper()}"


def _recorded() -> dict[str, tuple[int, float, float]]:
    """README-aic.md's table: group -> (rows, TPOT MAPE %, TTFT MAPE %)."""
    text = README.read_text()
    table = text[text.index("<!-- aic mape: begin -->") : text.index("<!-- aic mape: end -->")]
    cells = re.findall(r"^\| ([^|]+?) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", table, re.M)
    return {name: (int(n), float(tpot), float(ttft)) for name, n, tpot, ttft in cells}


def test_mape_per_group_is_the_one_recorded_in_the_readme():
    estimates = aic_estimates()
    groups: dict[str, list] = defaultdict(list)
    for row in KEPT:
        if row.raw["id"] in estimates:
            groups[_group(row)].append(row)
            if row.half != "suspect":
                groups["all kept, not suspect"].append(row)
    recorded = _recorded()
    assert set(recorded) == set(groups)
    for name, rows in groups.items():
        errs = {
            m: [abs(estimates[r.raw["id"]][i] * 1e3 / r.raw[key] - 1) for r in rows]
            for i, (m, key) in enumerate((("ttft", "silicon_ttft_ms"), ("tpot", "silicon_tpot_ms")))
        }
        n, tpot, ttft = recorded[name]
        assert len(rows) == n, name
        assert 100 * statistics.fmean(errs["tpot"]) == pytest.approx(tpot, abs=0.5), name
        assert 100 * statistics.fmean(errs["ttft"]) == pytest.approx(ttft, abs=0.5), name
