"""What to try (kvweb/challenges.py): every challenge is checked on the lab's own result, is not
met at the lab's defaults, and is met by its solution's parameters."""

import pytest

import kvweb.labs  # noqa: F401
from kvweb.challenges import CHALLENGES, progress
from kvweb.lab import LABS

CASES = [(lab, i) for lab, challenges in CHALLENGES.items() for i in range(len(challenges))]
QUICK = {"schedulers": {"requests": 100}, "fleet": {"requests": 100}}  # a smaller run, the same question


@pytest.mark.parametrize("lab, i", CASES, ids=[f"{lab}-{i}" for lab, i in CASES])
def test_a_challenge_is_not_met_at_the_defaults_and_met_by_its_solution(lab, i):
    challenge = CHALLENGES[lab][i]
    base = QUICK.get(lab, {})
    assert not progress(lab, LABS[lab](**base).run())[i][1], challenge.task
    assert progress(lab, LABS[lab](**{**base, **challenge.solution}).run())[i][1], challenge.task


def test_a_mode_that_did_not_run_meets_no_challenge():
    """gpt-oss has window layers: the papers' engine does not run it (no 'paper' mode in the result)."""
    result = LABS["schedulers"](model="gpt-oss-20b", scenario="B", workload="long-context", requests=40).run()
    assert "paper" not in [m["mode"] for m in result["modes"]]
    hits, preempts = (met for _, met in progress("schedulers", result))
    assert hits and not preempts  # long prompts share no prefix: vLLM V1 hits under 10 %; no paper run to preempt


def test_the_lab_area_ticks_a_challenge_and_shows_its_answer_after_a_try():
    import sys

    if sys.platform == "emscripten":
        pytest.skip("the app (Panel) is tested in CPython only")
    from bokeh.document import Document
    from panel.io.state import set_curdoc

    from app.shell import Shell
    from app.site.location import install as install_location

    challenge = CHALLENGES["fleet"][0]
    with set_curdoc(Document()):
        install_location({"pathname": "/main", "search": "", "href": "http://127.0.0.1/main", "origin": "x"})
        shell = Shell()
        shell.labs.runner.pool = None
        shell.router.open("?lab=fleet&requests=100")
        assert shell.labs.tries.text == f"What to try:\n☐ {challenge.task}"  # no answer before a try
        shell.labs.widgets["replicas"].value = 16
        shell.labs._apply_widgets()
        assert shell.labs.tries.text == f"What to try:\n☑ {challenge.task}\n   {challenge.answer}"
