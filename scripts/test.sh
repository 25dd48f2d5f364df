#!/usr/bin/env bash
# Installs everything the tests need (Python packages, Debian's Chromium, the static
# site's downloads), checks the code's shape (ruff format and ruff check), and runs every test:
# the library in CPython, the library inside Pyodide (Node), and the browser end-to-end tests on
# the served app and the static site.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

bash scripts/setup-python.sh "app,test"
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  sudo_ apt-get update -q && sudo_ apt-get install -y -q "${missing[@]}"
fi

echo "== format and lint (ruff; pyproject.toml)"
.venv/bin/ruff format --check --quiet .
.venv/bin/ruff check --quiet .

echo "== library tests (CPython, one worker per core: pytest-xdist)"
.venv/bin/python -m pytest -q -n auto tests

echo "== static site build"
bash scripts/build-site.sh

echo "== library tests inside Pyodide (Node, one process per core)"
bash scripts/test-pyodide.sh

echo "== browser end-to-end tests"
.venv/bin/python -m pytest -q e2e
