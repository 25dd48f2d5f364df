"""The lab's record (its parameters and last result) to take away, as result.json and result.csv."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

import panel as pn

from kvweb.jsonable import flatten


class Downloads:
    """Two download buttons; `record()` is what they write, asked for at each click."""

    def __init__(self, record: Callable[[], dict[str, Any]]) -> None:
        self.record = record
        self.layout = pn.Row(
            pn.widgets.FileDownload(callback=self._json_file, filename="result.json", label="result.json", width=130),
            pn.widgets.FileDownload(callback=self._csv_file, filename="result.csv", label="result.csv", width=130),
        )

    def _json_file(self) -> io.BytesIO:
        return io.BytesIO(json.dumps(self.record(), indent=1).encode())

    def _csv_file(self) -> io.BytesIO:
        """Every scalar of the record as one `key,value` row (nested keys joined by dots)."""
        text = io.StringIO()
        csv.writer(text).writerows([("key", "value"), *flatten(self.record())])
        return io.BytesIO(text.getvalue().encode())
