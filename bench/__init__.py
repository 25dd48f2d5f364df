"""Benchmarks, run from the repository root as modules (this checkout's kvweb, and bench's own
helpers, import from there): `.venv/bin/python -m bench.serving`; in Pyodide under Node,
`node scripts/pyodide_run.mjs build/pyodide-test -m bench.serving`."""
