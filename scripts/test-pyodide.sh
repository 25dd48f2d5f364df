#!/usr/bin/env bash
# The library's tests (tests/) inside real Pyodide under Node, against the kvweb wheel.
# Builds build/pyodide-test/ (Pyodide core, numpy, param, pytest, hypothesis, kvweb wheel;
# downloads cached in .cache/), then runs pytest there. Extra arguments go to pytest.
# Pyodide runs on one thread: the tests are split over one Node process per core (every N-th
# test each, `--shard`; KVWEB_PYODIDE_SHARDS=1 runs them in one), each shard's output printed
# when it ends; the status is the first failing shard's, 0 when all pass.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python scripts/build_site.py test
shards=${KVWEB_PYODIDE_SHARDS:-$(nproc)}
if [ "$shards" -le 1 ]; then
  exec node scripts/pyodide_run.mjs build/pyodide-test scripts/pyodide_pytest.py -q "$@"
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for ((i = 0; i < shards; i++)); do
  node scripts/pyodide_run.mjs build/pyodide-test scripts/pyodide_pytest.py -q "--shard=$i/$shards" "$@" \
    > "$logs/$i.log" 2>&1 &
  pids+=($!)
done
status=0
for ((i = 0; i < shards; i++)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  echo "== Pyodide shard $((i + 1)) of $shards (exit $rc)"
  cat "$logs/$i.log"
  if [ "$status" -eq 0 ]; then status=$rc; fi
done
exit "$status"
