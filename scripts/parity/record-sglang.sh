#!/usr/bin/env bash
# Re-records tests/data/parity/sglang-0.5.23-*.json.gz from SGLang's own code: makes the venv
# (.parity/sglang) if needed, then drives SGLang's radix cache and schedule policy on the CPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/parity/setup-sglang.sh
.parity/sglang/bin/python -W ignore scripts/parity/record_sglang.py
