"""The browser's address, read as raw text for kvweb's own parser (`app.route.Route.parse`).

Panel's Location parses the query itself whenever `search` changes (`panel.util.parse_query`
calls int() on anything `str.isdigit()` accepts, so '①' or 5000 digits raise) and, under
`panel serve`, splits the request URI on '?' into exactly two parts (a second '?' raises):
a hostile URL broke the page before kvweb saw its text. `RawLocation` keeps the query as
text, and `install` puts one in place before Panel makes its own. Under `panel serve`, Tornado
refused a query of more than 1000 fields with HTTP 400 before either saw it: `read_long_queries`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import panel as pn
from panel.io.location import Location

from app.site import upstream

# Run by the static site's worker before the app (`convert`): the page's location, sent when
# the page started the worker, is the document's from the first render on.
BEFORE_APP = "\nfrom app.site.location import install_json as _kv_install\n_kv_install(_kvweb_location)\n"
# The most fields a query can have within Tornado's limit on a request's line and headers (64 KB)
SERVED_QUERY_FIELDS = 2**16 // 2


class RawLocation(Location):
    """Panel's Location with the query left as text (its only change)."""

    @property
    def query_params(self) -> dict[str, str]:
        return dict(parse_qsl(self.search[1:], keep_blank_values=True))


def read_long_queries() -> None:
    """Under `panel serve`: Tornado hands the app every query a request can carry.

    Tornado (6.5.8 on) answers a query of more than 1000 fields with HTTP 400 and an empty page,
    where the static site opens the same URL with kvweb's message. At `SERVED_QUERY_FIELDS`, the
    refusing is kvweb's (`app.route.Route.parse`, its limit named), on both faces."""
    from tornado import httputil

    if hasattr(httputil, "ParseUrlEncodedConfig"):  # an older Tornado reads every field
        httputil.set_parse_body_config(
            httputil.ParseBodyConfig(urlencoded=httputil.ParseUrlEncodedConfig(max_arguments=SERVED_QUERY_FIELDS))
        )


def install(fields: Mapping[str, Any] | None = None) -> None:
    """Make a RawLocation the current document's location, if it has none of ours yet.

    `fields` are window.location's (the static site passes them); by default they come from
    the request that opened the page under `panel serve`. `pn.state.location` returns the
    document's, so the app and Panel itself read this one.
    """
    doc = pn.state.curdoc
    if doc is None or isinstance(upstream.location_of(doc), RawLocation):
        return
    if fields is None:
        request = doc.session_context.request if doc.session_context else None
        query = getattr(request, "query", "") if request is not None else ""
        host = urlsplit(f"//{getattr(request, 'host', '') or ''}")  # for share URLs before the browser reports
        fields = {
            "pathname": getattr(request, "path", ""),
            "search": f"?{query}" if query else "",
            "protocol": f"{getattr(request, 'protocol', 'http')}:",
            "hostname": host.hostname or "",
            "port": str(host.port or ""),
        }
    location = RawLocation()
    follow(location, fields)
    upstream.give_location(doc, location)


def install_json(fields: str) -> None:
    """`install` with window.location as JSON (the static site's worker gets it so)."""
    install(json.loads(fields))


def follow(location: Location, fields: Mapping[str, Any]) -> None:
    """Take window.location's fields (the page reports them once it has rendered)."""
    upstream.set_readonly(location, {k: v for k, v in fields.items() if k in location.param and k != "name"})


def follow_json(fields: str) -> None:
    """`follow` for the document's location, with window.location as JSON (the static site's
    page sends it once it has rendered)."""
    if pn.state.location is not None:
        follow(pn.state.location, json.loads(fields))
