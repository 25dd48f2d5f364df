#!/usr/bin/env bash
# Creates .venv (installing Debian's python3-venv if needed) and installs kvweb with the
# extras named in $1 (e.g. "app" or "app,test"). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-app}"
sudo_() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
if [ ! -x .venv/bin/python ]; then
  if ! python3 -m venv .venv 2>/dev/null; then
    rm -rf .venv
    sudo_ apt-get update -q && sudo_ apt-get install -y -q python3-venv
    python3 -m venv .venv
  fi
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[${extras}]"
