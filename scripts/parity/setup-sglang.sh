#!/usr/bin/env bash
# Creates .parity/sglang: a venv with SGLang's own code (registry wheel, never copied into the
# repository) and only what the import chain of its radix cache and schedule policy needs, so that
# record_sglang.py can drive them on a CPU. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.parity/sglang
if [ ! -x "$venv/bin/python" ]; then
  python3.11 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q torch==2.13.0
# --no-deps: the full dependency set of sglang pulls GPU kernels and servers the recorder never imports.
"$venv/bin/python" -m pip install -q --no-deps sglang==0.5.23
"$venv/bin/python" -m pip install -q --no-deps -r scripts/parity/requirements-sglang.txt
