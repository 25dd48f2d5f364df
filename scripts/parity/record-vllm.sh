#!/usr/bin/env bash
# Records vLLM's real V1 scheduler on scripts/parity/workloads.py into
# tests/data/parity/vllm-<version>.json.gz (see scripts/parity/README.md). One command:
#   bash scripts/parity/record-vllm.sh [record_vllm.py options, e.g. --only tight-1 long-1]
# Sets up .parity/vllm first (idempotent; setup-vllm.sh's environment variables apply).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/parity/setup-vllm.sh
exec .parity/vllm/bin/python scripts/parity/record_vllm.py "$@"
