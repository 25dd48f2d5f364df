"""Entry point: `panel serve app/main.py` (after `pip install -e .[app]`); also converted into the static site."""

import sys

from app.shell import Shell
from app.site import location, upstream

if sys.platform != "emscripten":  # under `panel serve` (the static site has no server)
    upstream.write_every_queued_patch()  # no patch left unsent
    location.read_long_queries()  # a long query reaches kvweb's own parser

Shell().layout.servable(title="kvweb")
