
# kvweb: set the page's location (sent by the page when it started the worker) before the
# app runs, so the first render already shows the scenario the URL asks for.
import json as _kv_json
from panel.io.state import state as _kv_state
from panel.util import edit_readonly as _kv_edit_readonly
with _kv_edit_readonly(_kv_state.location):
    _kv_state.location.param.update({
        _k: _v for _k, _v in _kv_json.loads(_kvweb_location).items() if _k in _kv_state.location.param
    })
