"""The translation catalogs, app/locale/LANG/LC_MESSAGES/kvweb.po, compiled for `gettext`.

A checkout or an installed app compiles each .po when it starts (Babel, in memory), so nothing
needs compiling beforehand and an edited catalog shows at the next start. The static site's app
wheel holds the compiled .mo instead (scripts/build_site.py): Pyodide has no Babel.
Babel's reader and writer are used directly, without `pybabel compile`'s format checks: those
take the "% of" in our English labels for a printf placeholder.
"""

from __future__ import annotations

import gettext
import io
from pathlib import Path

LOCALES = Path(__file__).resolve().parent / "locale"


def source(lang: str) -> Path:
    """`lang`'s catalog as translators edit it (.po); its compiled form has the suffix .mo."""
    return LOCALES / lang / "LC_MESSAGES" / "kvweb.po"


def compiled(lang: str) -> bytes:
    """`lang`'s .po catalog compiled to .mo bytes."""
    from babel.messages.mofile import write_mo  # here, not above: the static site has no Babel
    from babel.messages.pofile import read_po

    with source(lang).open("rb") as f:
        catalog = read_po(f)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def translations(lang: str) -> gettext.GNUTranslations:
    """`lang`'s catalog: compiled from its .po where there is one, else the .mo the site ships."""
    po = source(lang)
    data = compiled(lang) if po.exists() else po.with_suffix(".mo").read_bytes()
    return gettext.GNUTranslations(io.BytesIO(data))
