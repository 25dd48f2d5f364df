
# kvweb: the page's location (sent by the page when it started the worker) becomes the
# document's location before the app runs, so the first render already shows the scenario
# the URL asks for. It is app.url's RawLocation: Panel's own Location would parse the
# query itself and fail on values such as '①', and Python would never start.
import json as _kv_json
from app.url import install as _kv_install
_kv_install(_kv_json.loads(_kvweb_location))
