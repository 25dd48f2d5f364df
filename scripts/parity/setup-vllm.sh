#!/usr/bin/env bash
# Creates .parity/vllm: a venv (python3.11) holding vLLM's real V1 scheduler on CPU, for
# record_vllm.py. Idempotent: does nothing when the venv already matches the pins here.
#   torch (CPU build) first, then vllm with --no-deps, then only the packages the scheduler's
#   import chain needs (requirements-vllm.txt, --no-deps).
# Environment:
#   PYTHON       interpreter for the venv (default python3.11)
#   TORCH_INDEX  extra pip index for the CPU torch build (default: none; e.g.
#                https://download.pytorch.org/whl/cpu where PyPI's torch is the CUDA one)
#   VLLM_WHEEL   a local vllm-0.33.0 wheel to install instead of downloading it (336 MB)
set -euo pipefail
cd "$(dirname "$0")/../.."
TORCH_VERSION=2.13.0
VLLM_VERSION=0.33.0
venv=.parity/vllm
py="${PYTHON:-python3.11}"
stamp="$venv/.parity-ready"
want="torch==$TORCH_VERSION vllm==$VLLM_VERSION $(sha256sum scripts/parity/requirements-vllm.txt | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
if [ -n "${TORCH_INDEX:-}" ]; then
  "${pip[@]}" --extra-index-url "$TORCH_INDEX" "torch==$TORCH_VERSION"
else
  "${pip[@]}" "torch==$TORCH_VERSION"
fi
if [ -n "${VLLM_WHEEL:-}" ]; then
  "${pip[@]}" --no-deps "$VLLM_WHEEL"
else
  "${pip[@]}" --no-deps "vllm==$VLLM_VERSION"
fi
"${pip[@]}" --no-deps -r scripts/parity/requirements-vllm.txt
"$venv/bin/python" - <<PY
import torch, vllm
assert vllm.__version__ == "$VLLM_VERSION", vllm.__version__
assert torch.__version__.split("+")[0] == "$TORCH_VERSION", torch.__version__
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: F401
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: F401
print("parity venv ready: vllm", vllm.__version__, "torch", torch.__version__)
PY
echo "$want" > "$stamp"
