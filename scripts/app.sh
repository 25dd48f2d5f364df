#!/usr/bin/env bash
# Installs kvweb and its app, then serves the app on http://127.0.0.1:${PORT:-5006}/main
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh app
port="${PORT:-5006}"
echo "kvweb: open http://127.0.0.1:${port}/main"
# a trace file picked travels as base64 in one websocket message: 4/3 of its at most 20 MB (MAX_BYTES
# in kvweb/serving/load/traces.py), over Bokeh's default limit of 20 MB
exec .venv/bin/panel serve app/main.py --warm --address 127.0.0.1 --port "$port" \
  --allow-websocket-origin "127.0.0.1:${port}" --allow-websocket-origin "localhost:${port}" \
  --websocket-max-message-size 33554432
