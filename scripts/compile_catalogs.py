"""Compile the translation catalogs: app/locale/LANG/LC_MESSAGES/kvweb.po -> kvweb.mo.

The app reads the .mo files with the standard library's gettext. The set-up
(scripts/setup-python.sh) runs this; run it again after editing a .po file:
    .venv/bin/python scripts/compile_catalogs.py
Babel's reader and writer are used directly, without `pybabel compile`'s format checks: those
take the "% of" in our English labels for a printf placeholder.
"""
from __future__ import annotations

from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

LOCALES = Path(__file__).resolve().parent.parent / "app" / "locale"


def main() -> None:
    for po in sorted(LOCALES.glob("*/LC_MESSAGES/kvweb.po")):
        with po.open("rb") as f:
            catalog = read_po(f)
        with po.with_suffix(".mo").open("wb") as f:
            write_mo(f, catalog)
        done = sum(1 for m in catalog if m.id and m.string)
        print(f"{po.relative_to(LOCALES.parent.parent)}: {done} of {len(catalog)} messages translated")


if __name__ == "__main__":
    main()
