"""Entry point: `PYTHONPATH=. panel serve app/main.py`; also converted into the static site."""
from app.shell import Shell

Shell().layout.servable(title="kvweb")
