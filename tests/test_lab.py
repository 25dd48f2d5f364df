"""The lab contract: one schema for CLI flags, widgets and URL queries."""

import json

import param
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.jsonable import flatten, jsonable
from kvweb.lab import LABS, ParamError, param_names
from kvweb.parsing import make, parse
from kvweb.query import from_query, to_query


def test_every_lab_has_a_bounded_schema_and_registers():
    assert "roofline" in LABS
    for name, cls in LABS.items():
        assert cls.lab_name == name and cls.title and cls.summary
        for pname in param_names(cls):
            p = cls.param[pname]
            assert p.doc, f"{name}.{pname} has no doc"
            if isinstance(p, param.Number):  # work caps: every number is bounded
                assert p.bounds is not None and None not in p.bounds, f"{name}.{pname} is unbounded"


def test_defaults_round_trip_through_the_url():
    for cls in LABS.values():
        lab, messages = from_query(to_query(cls()))
        assert messages == [] and lab.values() == cls().values()


def test_parse_names_parameter_and_allowed_values():
    R = LABS["roofline"]
    assert parse(R, "tokens", "17") == 17
    assert parse(R, "gpu", "H200") == "H200"
    with pytest.raises(ParamError, match=r"^tokens: '0' is not allowed; expected an integer from 1 to 1000000$"):
        parse(R, "tokens", "0")
    with pytest.raises(ParamError, match="gpu: 'TPU' is not allowed; expected one of A100-40GB"):
        parse(R, "gpu", "TPU")
    with pytest.raises(
        ParamError,
        match="unknown parameter 'nope' for lab roofline; allowed: tp, weight_precision, kv_precision, gpu, model",
    ):
        parse(R, "nope", "1")
    for bad in ("nan", "inf", "1e400", "", "0x10"):
        with pytest.raises(ParamError):
            parse(R, "mem_util", bad)


def test_cross_parameter_check():
    with pytest.raises(ParamError, match="custom_kv_heads: 5 must divide custom_heads"):
        make("roofline", {"model": "custom", "custom_heads": "32", "custom_kv_heads": "5"})


def test_hostile_query_falls_back_to_defaults_with_messages():
    lab, messages = from_query({"lab": "roofline", "gpu": "<script>alert(1)</script>", "tokens": "99", "x": "1"})
    assert lab.gpu == "A100-40GB" and lab.tokens == 99
    assert len(messages) == 2 and "gpu:" in messages[0] and "ignored" in messages[1]
    lab, messages = from_query({"lab": "<img src=x>"})
    assert lab.lab_name == "roofline" and messages[0].startswith("unknown lab '<img src=x>'")


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["gpu", "tokens", "batch", "mem_util", "block_size", "junk"]), st.text(max_size=12), max_size=5
    )
)
def test_any_query_gives_a_valid_lab(query):
    lab, messages = from_query({"lab": "roofline", **query})
    R = LABS["roofline"]
    for name, value in lab.values().items():  # every value is one parse would accept
        assert parse(R, name, str(value)) == value
    assert len(messages) <= len(query)


def test_jsonable_and_flatten():
    import numpy as np

    data = jsonable({"a": np.int64(3), "b": np.array([1.5, np.inf]), "c": (np.float32(2.0),)})
    assert json.dumps(data, allow_nan=False) == '{"a": 3, "b": [1.5, null], "c": [2.0]}'
    assert flatten({"x": {"y": 1, "z": [2, 3]}}) == [("x.y", 1), ("x.z.0", 2), ("x.z.1", 3)]
    assert flatten({"x": {"z": [2, 3]}}, expand_lists=False) == [("x.z", [2, 3])]


def test_a_memo_key_moves_with_every_parameter_but_the_left_out_ones():
    lab = LABS["sweep"]()
    key = lab.key(("rate",), memory="paged")
    assert LABS["sweep"](rate=lab.rate * 2).key(("rate",), memory="paged") == key  # left out
    assert LABS["sweep"](seed=lab.seed + 1).key(("rate",), memory="paged") != key
    assert lab.key(("rate",), memory="max") != key
    # `extra` stands in for a parameter: a sweep point's own value
    assert lab.key(block_size=32) == LABS["sweep"](block_size=32).key()
    assert lab.key(block_size=32) != lab.key()
