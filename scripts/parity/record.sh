#!/usr/bin/env bash
# Records both engines' own decisions for the parity tests (tests/test_parity_*.py), each in its
# own environment under .parity/ (made on first use): vLLM's V1 scheduler
# (scripts/parity/README.md) and SGLang's radix cache and admission
# (scripts/parity/README-sglang.md). One command:
#   bash scripts/parity/record.sh
# Each engine alone: bash scripts/parity/record-vllm.sh [record_vllm.py options] or
# bash scripts/parity/record-sglang.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/parity/record-vllm.sh
bash scripts/parity/record-sglang.sh
