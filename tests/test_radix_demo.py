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
    done = run_demo(
        model, prompts, 6, 120, page_size, seed=3, temperature=temperature, follow={2: (0, encode(" And then?"))}
    )
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


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["radix-demo", "--pool", "50"], "pool"),
        (["radix-demo", "--questions", "Qu\u00e9?"], "questions"),
        (["radix-demo", "--questions", "|"], "questions"),
        (["radix-demo", "--page_size", "0"], "page_size"),
        (["cache-schedule", "--policy", "random"], "policy"),
        (
            [
                "cache-schedule",
                "--workload",
                "multi-turn",
                "--sessions",
                "128",
                "--turns",
                "16",
                "--system_len",
                "2048",
            ],
            "workload",
        ),
        (["cache-sweep", "--points", "40"], "points"),
        (["prefill-savings", "--gpu", "TPU"], "gpu"),
        (["prefix-hash", "--capacity", "8", "--block_size", "16"], "capacity"),
    ],
)
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


def _steps(r: dict) -> list[dict]:
    return [t for x in r["requests"] for t in (x["running_tree"], x["tree"])]


@pytest.mark.parametrize(
    "pool, questions, max_new",
    [
        (180, "What is a radix tree?|Why cache the KV?|How does LRU work?|What is a page?", 16),
        (90, "Hi.|Hello there.|Hey you.|What now?|Why so?|Hi again.", 8),  # evictions in four steps
    ],
)
def test_trace_ghosts_are_the_evicted_nodes_and_leave_the_next_tree(pool: int, questions: str, max_new: int) -> None:
    r = RadixDemo(pool=pool, questions=questions, max_new=max_new).run()
    steps = _steps(r)
    evicted = 0
    for i, tree in enumerate(steps):
        ghosts = [n for n in tree["nodes"] if n["ghost"]]
        ids = [n["id"] for n in ghosts]
        assert len(ids) == len(set(ids))  # each evicted node drawn once
        assert not ghosts or i % 2 == 0  # evictions happen only while a request takes slots
        evicted += sum(n["size"] for n in ghosts)
        live = {n["id"] for n in tree["nodes"] if not n["ghost"]}
        assert not live & set(ids)
        if i + 1 < len(steps):
            assert not {n["id"] for n in steps[i + 1]["nodes"]} & set(ids)  # gone from the next tree
        if i > 0:  # every node that left the tree since the last step is a ghost now
            before = {n["id"] for n in steps[i - 1]["nodes"] if not n["ghost"]}
            split = {n["id"] for n in tree["nodes"] if n["split"]}
            assert before - live == set(ids) and not split & before
    assert evicted == r["evicted"] > 0  # the tokens the ghosts hold are the tokens evicted


def test_default_run_splits_at_match_and_opens_on_the_split() -> None:
    r = RadixDemo().run()
    steps = _steps(r)
    split_at = [i for i, t in enumerate(steps) if any(n["split"] for n in t["nodes"])]
    # request 1 ("Why cache the KV?") splits system + "What is a radix tree?..." after "Wh" while it
    # matches; requests 3 and 4 split the system prompt's edge and "at is a radix..." the same way
    assert split_at == [2, 6, 8] and r["opening_step"] == 2
    upper = next(n for n in steps[2]["nodes"] if n["split"])
    assert upper["size"] == len(SYSTEM) + 2 and upper["text"] == SYSTEM + "Wh"
    assert upper["lock"] == 1 and r["requests"][1]["match_node"] == upper["id"]
    assert r["requests"][1]["suffix"] == "y cache the KV?"
    # the last request evicts request 1's leaf: 30 tokens, the answer included
    ghost = [n for n in steps[8]["nodes"] if n["ghost"]]
    assert [(n["size"], n["text"][:15]) for n in ghost] == [(30, "y cache the KV?")]
