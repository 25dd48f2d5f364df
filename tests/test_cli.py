"""The CLI: lab list, table and JSON output, exit status 2 with one stderr line on bad input."""
import io
import json

import pytest

import kvweb.labs  # noqa: F401
from kvweb.cli import main
from kvweb.jsonable import jsonable
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
    for key in ("kv_bytes_per_token", "weight_bytes", "kv_capacity_tokens", "kv_capacity_blocks",
                "prefill_s", "decode_step_s", "swap_roundtrip_s", "recompute_s"):
        assert key in r
    assert r["kv_bytes_per_token"] == 131_072
    assert r["kv_capacity_blocks"] == r["kv_capacity_tokens"] // 32


def test_table_output():
    code, out, _ = run("run", "roofline")
    assert code == 0 and "kv_capacity_tokens" in out and "11969" in out  # the lecture's OPT-13B-like, A100-40GB


@pytest.mark.parametrize("argv, needle", [
    (["run", "nope"], "unknown lab 'nope'; allowed:"),
    (["run", "roofline", "--tokens", "0"], "tokens: '0' is not allowed; expected an integer from 1 to 1000000"),
    (["run", "roofline", "--tokens", "-5"], "tokens: '-5' is not allowed"),
    (["run", "roofline", "--gpu", "TPU"], "gpu: 'TPU' is not allowed; expected one of"),
    (["run", "roofline", "--wat", "1"], "unknown parameter 'wat' for lab roofline"),
    (["run", "roofline", "--tokens"], "--tokens: missing value"),
    (["run", "roofline", "stray"], "unexpected argument 'stray'"),
    (["run", "roofline", "--tokens", "5", "--tokens", "6"], "--tokens: given twice"),
    (["frobnicate"], "unknown command 'frobnicate'"),
])
def test_bad_input_exits_2_with_one_line(argv, needle):
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err


@pytest.mark.parametrize("argv, needle", [
    (["reproduce", "--help"], "kvweb reproduce [--out DIR] [--quick]"),
    (["reproduce", "--quick", "-h"], "kvweb reproduce [--out DIR] [--quick]"),
    (["labs", "--help"], "kvweb labs "),
    (["run", "--help"], "labs: beam-search, block-tables"),
    (["run", "-h"], "kvweb run LAB --help"),
    (["--help"], "kvweb reproduce"),
])
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
