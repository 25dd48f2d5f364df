"""AIConfigurator's own estimate of the measured deployments, the column bench/silicon.py shows beside
kvweb's: bench/data/aic_silicon.json, derived by scripts/derive_aic_estimates.py from
aiconfigurator-core 0.12.0 (its agg estimate of each row; bench/data/README-aic.md). Standard library
only: neither aiconfigurator nor pandas is needed to read it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).parent / "data" / "aic_silicon.json"


@cache
def _data() -> dict:
    raw = json.loads(DATA.read_text())
    if raw["columns"] != ["id", "ttft_ms", "tpot_ms", "database_version"]:
        raise ValueError(f"{DATA.name}: columns {raw['columns']}; expected id, ttft_ms, tpot_ms, database_version")
    return raw


def aic_estimates() -> dict[str, tuple[float, float]]:
    """Row id (silicon_rows' `id`) -> AIConfigurator's (TTFT s, TPOT s) for that deployment."""
    return {row[0]: (row[1] / 1e3, row[2] / 1e3) for row in _data()["rows"]}


def aic_failed() -> dict[str, str]:
    """Row id -> why AIConfigurator gave no estimate (its own error, first line)."""
    return dict(_data()["failed"])


def aic_database_versions() -> dict[str, str]:
    """Row id -> the AIConfigurator database version (engine release) its estimate was read from."""
    return {row[0]: row[3] for row in _data()["rows"]}
