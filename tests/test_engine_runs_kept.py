"""The engine lab remembers its runs (kvweb/labs/engine.py `served_once`): a remembered run must
be the run itself, so changing `compare` and back gives exactly what a fresh computation gives."""

from kvweb.jsonable import jsonable
from kvweb.labs import engine


def fresh(**values: object) -> dict:
    engine._RUNS.clear()
    return jsonable(engine.EngineLab(**values).run())


def test_a_remembered_run_is_the_run():
    small = {"requests": 60, "rate": 4.0}
    expected = fresh(**small, compare="max")
    engine._RUNS.clear()
    engine.EngineLab(**small, compare="oracle").run()  # remembers paged and oracle
    got = jsonable(engine.EngineLab(**small, compare="max").run())  # paged from memory, max fresh
    assert got == expected
    assert got["compare"]["memory"] == "max" and got["memory"] == "paged"
    # back to oracle: both runs from memory, same as computing them again
    assert jsonable(engine.EngineLab(**small, compare="oracle").run()) == fresh(**small, compare="oracle")


def test_runs_differ_when_any_other_parameter_does():
    engine._RUNS.clear()
    a = jsonable(engine.EngineLab(requests=60, rate=4.0, seed=1).run())
    b = jsonable(engine.EngineLab(requests=60, rate=4.0, seed=2).run())
    assert a["trace"] != b["trace"] and len(engine._RUNS) <= engine.RUNS_KEPT
