"""RadixAttention on the mini model, and the radix labs through the command line."""
from __future__ import annotations

import io
import json

import pytest

from kvweb.cli import main
from kvweb.labs.radix_demo import RadixDemo
from kvweb.kv.model import MiniModel, encode
from kvweb.prefix.radix_demo import run_demo

SYSTEM = "You are a helpful assistant. Answer briefly. "  # 45 tokens


def test_demo_prefills_only_the_uncached_suffix_and_matches_a_fresh_run() -> None:
    r = RadixDemo().run()
    assert r["identical"]
    reqs = r["requests"]
    assert [x["follow_up"] for x in reqs] == [False, False, True, False, False]
    assert reqs[0]["cached_tokens"] == 0
    # "Why cache the KV?" shares the system prompt and the "Wh" of "What is a radix tree?"
    assert reqs[1]["cached_tokens"] == len(SYSTEM) + 2
    # the follow-up turn reads the first question and the 15 answer tokens fed back from the cache
    assert reqs[2]["cached_tokens"] == len(SYSTEM) + len("What is a radix tree?") + 15
    assert reqs[2]["prefilled_tokens"] == len(" Tell me more.") + 1
    # "What is a page?" finds "What is a " in the tree: token granularity
    assert reqs[4]["cached_tokens"] == len(SYSTEM) + len("What is a ")
    for x in reqs:
        assert x["cached_tokens"] + x["prefilled_tokens"] == len(x["prompt"])
    # 180 slots: the last request evicts the least recently used leaf (the second answer)
    assert [x["evicted"] > 0 for x in reqs] == [False, False, False, False, True]
    def texts(tree: dict) -> list[str]:
        return [n["text"] for n in tree["nodes"]]

    assert any(t.startswith("y cache the KV?") for t in texts(reqs[3]["tree"]))
    assert not any("cache the KV" in t for t in texts(reqs[4]["tree"]))
    # while it runs, the request's matched path is locked and its new slots sit in the same pool
    running = reqs[4]["running_tree"]
    assert running["protected"] >= reqs[4]["cached_tokens"]
    assert running["pool_used"] - running["cached"] == len(reqs[4]["prompt"]) + 15 - reqs[4]["cached_tokens"]
    assert all(n["lock"] == 0 for n in reqs[4]["tree"]["nodes"])
    assert reqs[4]["tree"]["pool_used"] == reqs[4]["tree"]["cached"] <= 180


@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_demo_identical_with_pages_greedy_and_sampled(page_size: int, temperature: float) -> None:
    model = MiniModel()
    prompts = [encode(SYSTEM + q) for q in ("Hi.", "Hello there.", "", "Hi!")]
    done = run_demo(model, prompts, 6, 120, page_size, seed=3, temperature=temperature,
                    follow={2: (0, encode(" And then?"))})
    assert all(d.output == d.reference for d in done)
    assert all(d.cached_tokens % page_size == 0 for d in done)
    assert done[2].cached_tokens >= len(SYSTEM) + 3 + 5 - page_size


def test_tree_marks_the_path_and_what_was_read_from_cache() -> None:
    r = RadixDemo().run()
    last = r["requests"][4]
    nodes = last["tree"]["nodes"]
    assert sum(n["hit"] for n in nodes) == last["cached_tokens"]
    assert sum(n["path"] for n in nodes) == len(last["prompt"]) + 16 - 1
    parents = {n["parent"] for n in nodes}
    assert nodes[0]["rows"] == sum(n["id"] not in parents for n in nodes)  # one row per leaf


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv, needle", [
    (["radix-demo", "--pool", "50"], "pool"),
    (["radix-demo", "--questions", "Qu\u00e9?"], "questions"),
    (["radix-demo", "--questions", "|"], "questions"),
    (["radix-demo", "--page_size", "0"], "page_size"),
    (["cache-schedule", "--policy", "random"], "policy"),
    (["cache-schedule", "--workload", "multi-turn", "--sessions", "128", "--turns", "16",
      "--system_len", "2048"], "workload"),
    (["cache-sweep", "--points", "40"], "points"),
    (["prefill-savings", "--gpu", "TPU"], "gpu"),
    (["prefix-hash", "--capacity", "8", "--block_size", "16"], "capacity"),
])
def test_bad_input_exits_2_with_one_line(argv: list[str], needle: str) -> None:
    code, out, err = cli("run", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err


def test_labs_run_from_the_command_line() -> None:
    code, out, _ = cli("run", "cache-schedule", "--tasks", "4", "--per_task", "4", "--json")
    assert code == 0
    result = json.loads(out)["result"]
    assert {"hit_rate", "optimal_hit_rate", "max_wait", "mean_wait"} <= set(result)
    assert set(result["runs"]) == {"fcfs", "lspf"}
    code, out, _ = cli("run", "prefix-hash", "--json")
    assert code == 0 and {"radix_hit_rate", "hash_hit_rate", "block_size"} <= set(json.loads(out)["result"])
    code, out, _ = cli("run", "prefill-savings", "--json")
    r = json.loads(out)["result"]
    assert r["prefill_s_lspf"] < r["prefill_s_fcfs"] < r["prefill_s_no_cache"]
    assert r["time_saved_lspf"] < r["hit_rate_lspf"]
    code, out, _ = cli("run", "radix-demo", "--json")
    assert code == 0 and json.loads(out)["result"]["identical"] is True
