"""Workloads: seeded arrivals and lengths, and user traces with row-and-field errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvweb.lab import ParamError
from kvweb.serving.load.workload import MAX_TRACE_ROWS, lengths, parse_trace, poisson_workload


def test_same_seed_same_requests_and_rate_only_rescales_arrivals():
    slow = poisson_workload("sharegpt", 200, 1.0, 2048, seed=7)
    fast = poisson_workload("sharegpt", 200, 4.0, 2048, seed=7)
    assert slow == poisson_workload("sharegpt", 200, 1.0, 2048, seed=7)
    assert [(r.prompt, r.output) for r in slow] == [(r.prompt, r.output) for r in fast]
    assert [r.arrival / 4 for r in slow] == pytest.approx([r.arrival for r in fast])
    assert poisson_workload("sharegpt", 200, 1.0, 2048, seed=8) != slow


def test_poisson_arrivals_have_the_asked_rate():
    reqs = poisson_workload("alpaca", 20_000, 5.0, 2048, seed=1)
    gaps = np.diff([0.0] + [r.arrival for r in reqs])
    assert gaps.mean() == pytest.approx(0.2, rel=0.03)
    assert gaps.std() == pytest.approx(0.2, rel=0.05)  # exponential: std = mean
    assert [r.id for r in reqs] == list(range(20_000))


def test_named_shapes_have_their_means_and_sharegpt_is_longer_than_alpaca():
    p, o = lengths("sharegpt", 40_000, 2048, seed=0)
    assert p.mean() == pytest.approx(160, rel=0.06) and o.mean() == pytest.approx(340, rel=0.06)
    ap, ao = lengths("alpaca", 40_000, 2048, seed=0)
    assert ap.mean() == pytest.approx(20, rel=0.06) and ao.mean() == pytest.approx(60, rel=0.06)
    assert p.std() / p.mean() > ap.std() / ap.mean()  # ShareGPT-like varies more


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["sharegpt", "alpaca", "long-context", "fixed", "uniform"]),
    st.integers(2, 9000),
    st.integers(0, 99),
)
def test_lengths_always_fit_the_model(shape, max_len, seed):
    p, o = lengths(shape, 300, max_len, seed, prompt_len=100, output_len=50)
    assert (p >= 1).all() and (o >= 1).all() and (p + o <= max_len).all()


def test_fixed_and_uniform():
    p, o = lengths("fixed", 5, 2048, 0, prompt_len=33, output_len=7)
    assert p.tolist() == [33] * 5 and o.tolist() == [7] * 5
    p, o = lengths("uniform", 5000, 2048, 0, prompt_len=10, output_len=4)
    assert sorted(set(p.tolist())) == list(range(1, 11)) and sorted(set(o.tolist())) == [1, 2, 3, 4]


def test_csv_trace_with_and_without_header_sorted_by_arrival():
    text = "arrival,prompt_len,output_len\n0.5,10,20\n0.0,3,4\n\n1.25, 7 ,8\n"
    reqs = parse_trace(text)
    assert [(r.id, r.arrival, r.prompt, r.output) for r in reqs] == [(0, 0.0, 3, 4), (1, 0.5, 10, 20), (2, 1.25, 7, 8)]
    assert parse_trace("0.5,10,20\n0,3,4") == reqs[:2]
    assert parse_trace("0.5,10,20; 0,3,4;") == reqs[:2]  # one line, rows split by ';'

    assert parse_trace("output_len,arrival,prompt_len\n4,0,3")[0].prompt == 3  # columns by header name


def test_json_trace_as_objects_or_triples():
    objects = json.dumps(
        [{"arrival": 1, "prompt_len": 5, "output_len": 6}, {"arrival": 0.5, "prompt_len": 2, "output_len": 3}]
    )
    assert [(r.arrival, r.prompt) for r in parse_trace(objects)] == [(0.5, 2), (1.0, 5)]
    assert parse_trace("[[0, 5, 6], [2, 1, 1.0]]")[1].output == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("0,10,20\n1,abc,5", "trace row 2, field prompt_len: 'abc' is not allowed"),
        ("0,10,20\n-1,3,5", "trace row 2, field arrival: '-1' is not allowed; expected a number of seconds >= 0"),
        ("0,10,0", "trace row 1, field output_len: '0' is not allowed; expected an integer from 1 to"),
        ("0,10,2.5", "trace row 1, field output_len"),
        ("0,10,nan", "trace row 1, field output_len"),
        ("inf,10,3", "trace row 1, field arrival"),
        ("0,10", "trace row 1: 2 fields; expected 3"),
        ('[{"arrival": 0, "prompt_len": 3}]', "trace row 1: field output_len is missing"),
        ('[{"arrival": 0, "prompt_len": 3, "output_len": 1, "x": 2}]', "trace row 1: unknown field 'x'"),
        ('[{"arrival": 0, "prompt_len": true, "output_len": 1}]', "trace row 1, field prompt_len"),
        ('[[0, 1, 2], "no"]', "trace row 2: expected an object"),
        ('{"arrival": 0}', "trace: JSON must be a list of rows"),
        ("[1, 2", "trace: not valid JSON"),
        ("   ", "trace: empty"),
    ],
)
def test_bad_traces_name_the_row_and_field(text, message):
    with pytest.raises(ParamError) as err:
        parse_trace(text)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_trace_row_cap():
    with pytest.raises(ParamError, match=f"at most {MAX_TRACE_ROWS}"):
        parse_trace("\n".join(["0,1,1"] * (MAX_TRACE_ROWS + 1)))
