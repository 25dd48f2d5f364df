"""Every module here is a view, but drawing.py (what views share); importing the package registers
them in app.view.VIEWS."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
