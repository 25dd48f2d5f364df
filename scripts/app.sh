#!/usr/bin/env bash
# Installs kvweb and its app, then serves the app on http://127.0.0.1:${PORT:-5006}/main
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh app
port="${PORT:-5006}"
echo "kvweb: open http://127.0.0.1:${port}/main"
exec .venv/bin/panel serve app/main.py --warm --address 127.0.0.1 --port "$port" \
  --allow-websocket-origin "127.0.0.1:${port}" --allow-websocket-origin "localhost:${port}"
