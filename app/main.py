"""Entry point: `panel serve app/main.py` (after `pip install -e .[app]`); also converted into the static site."""
from app.shell import Shell

Shell().layout.servable(title="kvweb")
