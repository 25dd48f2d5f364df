"""The CLI: lab list, table and JSON output, exit status 2 with one stderr line on bad input."""

import io
import json

import pytest

import kvweb.labs  # noqa: F401
from kvweb.cli import main
from kvweb.jsonable import jsonable, number
from kvweb.lab import LABS


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_labs_lists_names_one_per_line():
    code, out, _ = run("labs")
    assert code == 0 and "roofline" in out.splitlines()


def test_run_json_is_one_object_with_lab_params_result():
    code, out, err = run("run", "roofline", "--gpu", "H100-SXM", "--model=llama-3-8b", "--block-size", "32", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert set(data) == {"lab", "params", "result"} and data["lab"] == "roofline"
    assert data["params"]["gpu"] == "H100-SXM" and data["params"]["block_size"] == 32
    r = data["result"]
    for key in (
        "kv_bytes_per_token_total",
        "weight_bytes_total",
        "kv_capacity_tokens",
        "kv_capacity_blocks",
        "prefill_s",
        "decode_step_s",
        "swap_roundtrip_s",
        "recompute_s",
    ):
        assert key in r
    assert r["kv_bytes_per_token_total"] == 131_072
    assert r["kv_capacity_blocks"] == r["kv_capacity_tokens"] // 32


def test_table_output():
    code, out, _ = run("run", "roofline")
    assert code == 0 and "kv_capacity_tokens" in out and "11,969" in out  # the lecture's OPT-13B-like, A100-40GB


@pytest.mark.parametrize(
    "value, text",
    [
        (26194984960, "26,194,984,960"),
        (2.619498496e10, "26,194,984,960"),
        (1554.7, "1,554.7"),
        (1234567.8, "1,234,568"),
        (0.0371331, "0.0371331"),
        (179.0834, "179.083"),
        (None, "-"),
        (True, "True"),
        (2.0, "2"),
        (1e-5, "1e-05"),
    ],
)
def test_one_number_rule(value, text):
    assert number(value) == text


def test_fewer_digits_never_turn_to_an_exponent():
    assert number(1554.7, 3) == "1,555" and number(155.47, 3) == "155" and number(0.015547, 3) == "0.0155"


def block(out, heading):
    """The lines of one table of the CLI's output, split into cells (header first)."""
    lines = out.split("\n\n" + heading + "\n")[1].split("\n\n")[0].splitlines()
    return [line.split() for line in lines]


def test_cache_sweep_table_is_the_json():
    argv = ("run", "cache-sweep", "--points", "4")
    result = json.loads(run(*argv, "--json")[1])["result"]
    rows = block(run(*argv)[1], "capacity, hit_rate:")
    names = ["fcfs", "lspf", "dfs-rank", "aging", "optimal"]
    assert rows[0] == ["capacity", *(f"hit_rate.{n}" for n in names)]
    assert len(rows) == 1 + 4
    for i, row in enumerate(rows[1:]):
        assert row == [f"{result['capacity'][i]:,}", *(number(result["hit_rate"][n][i]) for n in names)]


def test_schedulers_table_shows_the_modes_side_by_side():
    argv = ("run", "schedulers", "--requests", "20")
    modes = json.loads(run(*argv, "--json")[1])["result"]["modes"]
    rows = {row[0]: row[1:] for row in block(run(*argv)[1], "modes, one column each:")}
    assert rows["mode"] == ["paper", "vllm-v1", "sglang"]
    for key in ("throughput_tok_s", "slo_attainment", "preemptions", "prefix_hit_rate"):
        assert rows[key] == [number(m[key]) for m in modes]
    assert rows["ttft_s.p99"] == [number(m["ttft_s"]["p99"]) for m in modes]
    assert "trace.frames" not in rows  # a trace stays in --json


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "nope"], "unknown lab 'nope'; allowed:"),
        (["run", "roofline", "--tokens", "0"], "tokens: '0' is not allowed; expected an integer from 1 to 1000000"),
        (["run", "roofline", "--tokens", "-5"], "tokens: '-5' is not allowed"),
        (["run", "roofline", "--gpu", "TPU"], "gpu: 'TPU' is not allowed; expected one of"),
        (["run", "roofline", "--wat", "1"], "unknown parameter 'wat' for lab roofline"),
        (["run", "roofline", "--tokens"], "--tokens: missing value"),
        (["run", "roofline", "stray"], "unexpected argument 'stray'"),
        (["run", "roofline", "--tokens", "5", "--tokens", "6"], "--tokens: given twice"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["train-mini", "--epochs", "3"], "unexpected argument '--epochs'; allowed: --out FILE, --steps N"),
        (["train-mini", "--out"], "unexpected argument '--out'"),
        (["train-mini", "--steps", "0"], "--steps: '0' is not allowed; allowed: a whole number >= 1"),
        (
            ["run", "cache-schedule", "--policy", "dfs"],
            "policy: 'dfs' is not allowed; expected one of fcfs, lspf, dfs-rank, aging",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, needle):
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["reproduce", "--help"], "kvweb reproduce [--out DIR] [--quick]"),
        (["reproduce", "--quick", "-h"], "kvweb reproduce [--out DIR] [--quick]"),
        (["labs", "--help"], "kvweb labs "),
        (["train-mini", "--help"], "kvweb train-mini [--out FILE] [--steps N]"),
        (["run", "--help"], "labs: beam-search, block-tables"),
        (["run", "-h"], "kvweb run LAB --help"),
        (["--help"], "kvweb reproduce"),
    ],
)
def test_every_subcommand_has_help(argv, needle):
    code, out, err = run(*argv)
    assert code == 0 and err == "" and out.startswith("usage:") and needle in out


def test_labs_takes_no_argument():
    code, out, err = run("labs", "x")
    assert code == 2 and out == "" and "unexpected argument 'x'" in err


def test_help_lists_every_parameter_with_limits():
    code, out, _ = run("run", "roofline", "--help")
    assert code == 0 and "--block_size (default 16; an integer from 1 to 1024)" in out


@pytest.mark.parametrize("lab", sorted(LABS))
def test_every_lab_cli_json_equals_the_library_run(lab):
    code, out, err = run("run", lab, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["params"] == LABS[lab]().values()
    assert data["result"] == json.loads(json.dumps(jsonable(LABS[lab]().run())))
    code, table_out, _ = run("run", lab)
    assert code == 0 and table_out.startswith(f"{lab}: ")
