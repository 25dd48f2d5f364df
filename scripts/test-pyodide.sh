#!/usr/bin/env bash
# The library's tests (tests/) inside real Pyodide under Node, against the kvweb wheel.
# Builds build/pyodide-test/ (Pyodide core, numpy, param, pytest, hypothesis, kvweb wheel;
# downloads cached in .cache/), then runs pytest there. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python scripts/build_site.py test
exec node scripts/pyodide_run.mjs build/pyodide-test scripts/pyodide_pytest.py -q "$@"
