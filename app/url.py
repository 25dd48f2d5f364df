"""The browser's address as raw text, for kvweb's own parser (`kvweb.lab.from_query`).

Panel's Location parses the query itself whenever `search` changes (`panel.util.parse_query`
calls int() on anything `str.isdigit()` accepts, so '①' or 5000 digits raise) and, under
`panel serve`, splits the request URI on '?' into exactly two parts (a second '?' raises):
a hostile URL broke the page before kvweb saw its text. `RawLocation` keeps the query as
text, and `install` puts one in place before Panel makes its own.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

import panel as pn
from panel.io.location import Location
from panel.util import edit_readonly


class RawLocation(Location):
    """Panel's Location with the query left as text (its only change)."""

    @property
    def query_params(self) -> dict[str, str]:
        return dict(parse_qsl(self.search[1:], keep_blank_values=True))


def install(fields: Mapping[str, Any] | None = None) -> None:
    """Make a RawLocation the current document's location, if it has none of ours yet.

    `fields` are window.location's (the static site passes them); by default they come from
    the request that opened the page under `panel serve`. Panel's `state.location` returns
    whatever its per-document registry holds, so the app and Panel itself read this one.
    """
    doc = pn.state.curdoc
    if doc is None or isinstance(pn.state._locations.get(doc), RawLocation):
        return
    if fields is None:
        request = doc.session_context.request if doc.session_context else None
        query = getattr(request, "query", "") if request is not None else ""
        fields = {"pathname": getattr(request, "path", ""), "search": f"?{query}" if query else ""}
    location = RawLocation()
    with edit_readonly(location):
        location.param.update({k: v for k, v in fields.items() if k in location.param and k != "name"})
    pn.state._locations[doc] = location
