#!/usr/bin/env bash
# Build the self-contained static site into build/site/ (see docs/site.md).
# Needs the project's .venv (pip install -e '.[app,test]') and npm; downloads go to .cache/.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/build_site.py site "$@"
