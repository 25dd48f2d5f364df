"""What every lab promises: `kvweb run LAB --json` prints the library's run of the same parameters."""

from __future__ import annotations

import io
import json
from typing import Any

from kvweb.cli import main
from kvweb.jsonable import jsonable
from kvweb.parsing import make


def cli_result(lab: str, params: dict[str, Any]) -> Any:
    """`kvweb run LAB --NAME=VALUE ... --json`'s result, asserted equal (through JSON) to the
    library's run of the same parameters given as text."""
    texts = {k: str(v) for k, v in params.items()}
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", lab, *(f"--{k}={v}" for k, v in texts.items()), "--json"], out, err) == 0, err.getvalue()
    result = json.loads(out.getvalue())["result"]
    assert result == json.loads(json.dumps(jsonable(make(lab, texts).run())))
    return result
