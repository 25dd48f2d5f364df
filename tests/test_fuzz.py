"""Hostile input never crashes: every parameter of every lab, through the CLI and the URL.

Each test draws, for each lab, values for its parameters from three pools: values the
parameter allows, random text, and the hostile shapes of issue 15 (huge integers, 1e309,
NaN, -0, unicode digits, 100 kB values, undecodable text, deep JSON, CSV with thousands of
columns). Labs are not run at random values (bench/caps.py times them at their caps);
`run` is stubbed except in the labs that are cheap at any value. Runs in Pyodide too.
"""

import io
import re
import warnings
from contextlib import nullcontext
from unittest import mock

import numpy as np
import param
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvweb.labs  # noqa: F401
from kvweb.cli import main
from kvweb.lab import LABS, ParamError, param_names, shown
from kvweb.parsing import MAX_VALUE, make, parse, to_number
from kvweb.query import MAX_MESSAGES, from_query
from kvweb.kv.model import sample
from kvweb.serving.load.workload import MAX_JSON_DEPTH, parse_trace

DEEP_JSON = "[" * 3000 + "]" * 3000
WIDE_CSV = ",".join(["1"] * 3000)
HOSTILE = [
    "9" * 400,
    "-" + "9" * 5000,
    "1e309",
    "-1e309",
    "1e-320",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-0",
    "-0.0",
    "+0",
    "①",
    "²",
    "١٢",
    "１２",
    "\U0001d7d7",
    "1_000",
    "0x10",
    "1e5",
    " 7 ",
    "",
    " ",
    "\x00",
    "\ud800",
    "x" * 100_000,
    "true",
    "FALSE",
    "<img src=x onerror=alert(1)>",
    "\u202e",
    "\ufffd\ufffd",
    "a?b",
    DEEP_JSON,
    WIDE_CSV,
    "0,10,20; 0.5,3,4",
    "[[0, 5, 6]]",
    "(a|b)*a(a|b){25}",
    "a{" + "9" * 290 + "}",
]
CHEAP = {"roofline", "recovery"}  # run for real: a handful of formulas at any value
LAB_NAMES = sorted(LABS)


def for_every_lab(test):
    """Run `test(name, data)` for every lab, a few drawn examples each."""
    drawn = settings(max_examples=10, deadline=None)(given(data=st.data())(test))
    return pytest.mark.parametrize("name", LAB_NAMES)(drawn)


def allowed_texts(p: param.Parameter) -> st.SearchStrategy[str]:
    """Text the parameter accepts (for most draws; some labs' checks still refuse the mix)."""
    if isinstance(p, param.Selector):
        return st.sampled_from([str(o) for o in p.objects])
    if isinstance(p, param.Boolean):
        return st.sampled_from(["true", "false", "1", "off"])
    if isinstance(p, param.Integer):
        return st.integers(*p.bounds).map(str)
    if isinstance(p, param.Number):
        return st.floats(*p.bounds).map(repr)
    return st.text(max_size=min(p.max_length, 40))


def texts(p: param.Parameter) -> st.SearchStrategy[str]:
    return st.one_of(allowed_texts(p), st.sampled_from(HOSTILE), st.text(max_size=20))


@st.composite
def given_values(draw: st.DrawFn, cls: type) -> dict[str, str]:
    """Some of the lab's parameters, each with a drawn text, in a drawn order."""
    names = draw(st.lists(st.sampled_from(param_names(cls)), unique=True, max_size=5))
    return {name: draw(texts(cls.param[name])) for name in names}


def parses(cls: type, name: str, text: str) -> bool:
    try:
        parse(cls, name, text)
    except ParamError:
        return False
    return True


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@for_every_lab
def test_parse_gives_an_allowed_value_or_one_line_naming_the_parameter(name, data):
    cls = LABS[name]
    for pname in param_names(cls):
        p = cls.param[pname]
        text = data.draw(texts(p))
        try:
            value = parse(cls, pname, text)
        except ParamError as err:
            assert str(err).startswith(f"{pname}: ") and "\n" not in str(err) and len(str(err)) < 400
            continue
        cls(**{pname: value})  # param itself accepts it
        if isinstance(p, param.Number):
            lo, hi = p.bounds
            assert type(value) is (int if isinstance(p, param.Integer) else float) and lo <= value <= hi
            assert len(text) <= MAX_VALUE and text.strip().isascii()
            assert parse(cls, pname, str(value)) == value  # the URL writes it back as str(value)


@for_every_lab
def test_cli_exits_0_or_2_with_the_error_of_the_first_bad_value(name, data):
    cls = LABS[name]
    given_texts = data.draw(given_values(cls))
    if data.draw(st.booleans()):
        given_texts["no_such_parameter"] = "1"
    argv = ["run", name, *(f"--{k}={v}" for k, v in given_texts.items())]
    stub = mock.patch.object(cls, "run", lambda self, progress=None: {"stubbed": True})
    with stub if name not in CHEAP else nullcontext():
        code, out, err = cli(*argv)
    bad = [k for k, v in given_texts.items() if not parses(cls, k, v)]
    if bad:
        head = f"kvweb: {bad[0]}: " if bad[0] in param_names(cls) else f"kvweb: unknown parameter {shown(bad[0])}"
        assert (code, out) == (2, "") and err.startswith(head), (argv, err)
    else:
        try:
            cls(**{k: parse(cls, k, v) for k, v in given_texts.items()}).admit()
        except ParamError as error:
            assert (code, out, err) == (2, "", f"kvweb: {error}\n")
        else:
            assert code == 0 and err == "" and out.startswith(f"{name}: ")
    assert err.count("\n") <= 1


@for_every_lab
def test_from_query_resets_only_the_bad_values_and_says_which(name, data):
    cls = LABS[name]
    query = data.draw(given_values(cls))
    lab, messages = from_query({"lab": name, **query})
    assert type(lab) is cls
    lab.admit()  # what the app runs always passes the lab's own rules and the work budget
    assert len(messages) <= MAX_MESSAGES and all("\n" not in m and len(m) < 2000 for m in messages)
    reset = [
        m.rpartition("; using the defaults for ")[2].split(", ") for m in messages if "; using the defaults for " in m
    ]
    reset_names = reset[0] if reset else []
    assert set(reset_names) <= set(query)
    for key in reset_names:  # each reset was needed: giving that value back fails the check again
        with pytest.raises(ParamError):
            cls(**{**lab.values(), key: parse(cls, key, query[key])}).admit()
    default = cls()
    for key, text in query.items():
        if not parses(cls, key, text):
            assert getattr(lab, key) == getattr(default, key)
            assert any(m.startswith(f"{key}: ") for m in messages)
        elif key in reset_names:
            assert getattr(lab, key) == getattr(default, key)
        else:
            assert getattr(lab, key) == parse(cls, key, text)  # a good value is kept


@pytest.mark.parametrize("text", HOSTILE)
def test_to_number_takes_only_bounded_ascii_decimals(text):
    value = to_number(text)
    whole = to_number(text, integer=True)
    if value is not None:
        assert np.isfinite(value) and text.strip().isascii() and len(text) <= MAX_VALUE
    assert whole is None or (isinstance(whole, int) and abs(whole) < 10**30)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("-0", 0.0),
        ("-0.0", 0.0),
        ("+.5", 0.5),
        (" 7 ", 7.0),
        ("1e-320", 1e-320),
        ("1e308", 1e308),
        ("1e309", None),
        ("nan", None),
        ("inf", None),
        ("1_000", None),
        ("0x10", None),
        ("5.", 5.0),
        ("١٢", None),
        ("１２", None),
        ("②", None),
        ("9" * MAX_VALUE, 10.0**MAX_VALUE),
        ("9" * (MAX_VALUE + 1), None),
    ],
)
def test_to_number_figures(text, expected):
    value = to_number(text)
    assert value == expected and (value is None or np.copysign(1, value) == 1)


# -- the four findings of issue 15 ----------------------------------------------------------


def test_huge_integer_is_refused_by_cli_and_url():
    code, out, err = cli("run", "roofline", "--tokens", "9" * 400)
    assert (code, out) == (2, "") and err.startswith("kvweb: tokens: '9999") and "from 1 to 1000000" in err
    lab, messages = from_query({"lab": "roofline", "tokens": "9" * 400, "batch": "7"})
    assert (lab.tokens, lab.batch) == (2048, 7) and messages[0].startswith("tokens: ")


@pytest.mark.parametrize("digits", ["①", "²", "١٢", "１２", "\U0001d7d7"])
def test_unicode_digits_are_refused_with_the_parameter_named(digits):
    assert digits.isdigit() or digits.isnumeric()  # what Panel's parse_query trusted before int()
    with pytest.raises(ParamError, match=r"^tokens: .* is not allowed; expected an integer from 1 to 1000000$"):
        parse(LABS["roofline"], "tokens", digits)


def test_deep_json_trace_is_refused_before_json_loads():
    code, out, err = cli("run", "sweep", "--workload=trace", "--trace=" + "[" * 3999)
    assert (code, out) == (
        2,
        "",
    ) and err == f"kvweb: trace: JSON nested 3999 deep; at most {MAX_JSON_DEPTH} levels are read\n"
    with pytest.raises(ParamError, match="nested 100000 deep"):
        parse_trace("[" * 100_000)
    at_the_bound = "[" * (MAX_JSON_DEPTH - 2) + "[[0, 5, 6]]" + "]" * (MAX_JSON_DEPTH - 2)
    with pytest.raises(ParamError, match="^trace row 1: expected an object"):  # read, then refused by shape
        parse_trace(at_the_bound)


@pytest.mark.parametrize(
    "text, words",
    [
        (WIDE_CSV, "trace row 1: 3000 fields; expected 3"),
        (";", "trace: empty"),
        ("1,2,\r3", "trace row 2: 1 fields"),
        ("[[" + "9" * 5000 + ", 1, 1]]", "trace row 1, field arrival: '99999999999999999999...' is not allowed"),
        ("[[0, 1, 1e300]]", "field output_len: '1e+300' is not allowed"),
        ("x" * 300_000, "trace: 300,000 characters; at most 200,000 are read"),
        ('[{"arrival": "１", "prompt_len": 1, "output_len": 1}]', "field arrival: '１' is not allowed"),
    ],
)
def test_hostile_traces_get_one_message(text, words):
    with pytest.raises(ParamError, match=re.escape(words)):
        parse_trace(text)


def test_a_bad_trace_resets_trace_and_workload_only():
    lab, messages = from_query({"lab": "engine", "requests": "50", "workload": "trace", "trace": "x,1,2", "rate": "3"})
    assert (lab.requests, lab.rate, lab.workload, lab.trace) == (50, 3.0, "scenario", "")
    assert messages == [
        "trace row 1, field arrival: 'x' is not allowed; expected a number of seconds >= 0; "
        "using the defaults for trace, workload"
    ]


def test_a_failing_check_resets_the_value_it_names_and_keeps_the_rest():
    query = {"lab": "block-tables", "num_blocks": "1", "prompt_a": "30", "seed": "9"}
    lab, messages = from_query(query)
    assert (lab.num_blocks, lab.prompt_a, lab.seed) == (12, 30, 9)
    assert len(messages) == 1 and messages[0].endswith("; using the defaults for num_blocks")
    with pytest.raises(ParamError, match="^num_blocks: 1 blocks"):
        make("block-tables", {k: v for k, v in query.items() if k != "lab"})


def test_unknown_keys_become_one_line_and_messages_are_capped():
    lab, messages = from_query({"lab": "roofline", **{f"k{i}": "1" for i in range(1000)}, "batch": "7"})
    assert lab.batch == 7 and len(messages) == 1
    assert messages[0].startswith(
        "1000 unknown parameters for lab roofline ignored: 'k0', 'k1', 'k2', 'k3', 'k4', ...;"
    )
    everything_bad = {name: "①" for name in param_names(LABS["engine"])}
    lab, messages = from_query({"lab": "engine", **everything_bad})
    assert len(messages) == MAX_MESSAGES
    # one line a bad value, but trace, trace_file and calibration (text: any text parses) share the line of the
    # check they fail
    assert messages[-1] == f"... and {len(everything_bad) - 2 - MAX_MESSAGES + 1} more problems"


def test_tiny_temperature_is_greedy_without_nan():
    logits = np.array([0.5, 3.0, -1.0, 3.0 - 1e-9, -np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for temperature in (1e-320, 5e-324, 1e-300, 1e-12):
            assert sample(logits, np.random.default_rng(0), temperature) == 1
    code, out, err = cli("run", "radix-demo", "--temperature=1e-320", "--json")
    greedy = cli("run", "radix-demo", "--temperature=0", "--json")[1]
    assert code == 0 and "nan" not in out.lower()
    assert out.split('"result"')[1] == greedy.split('"result"')[1]  # the same answers as temperature 0


def test_dfa_blow_up_is_refused_with_a_message():
    code, out, err = cli("run", "fsm", "--pattern=(a|b)*a(a|b){25}")
    assert (code, out) == (2, "") and err.startswith("kvweb: pattern: ") and "4,000 states" in err


def test_repeated_and_undecodable_cli_values_exit_2():
    assert cli("run", "roofline", "--tokens=5", "--tokens=6")[0] == 2
    code, out, err = cli("run", "radix-demo", "--system=caf\udce9")  # a byte that was not UTF-8
    assert (code, out) == (2, "") and err.startswith("kvweb: system: ")
