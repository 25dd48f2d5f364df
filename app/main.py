"""Entry point: `panel serve app/main.py` (after `pip install -e .[app]`); also converted into the static site."""
from app.shell import Shell
from app.site import upstream

upstream.write_every_queued_patch()  # under `panel serve`: no patch left unsent (app/site/upstream.py)

Shell().layout.servable(title="kvweb")
