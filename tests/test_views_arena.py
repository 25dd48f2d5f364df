"""The views name the arena of reserved memory (issue 26): the fragmentation arena's title and the
engine's reserved memory map say which placement drew them, in the session's language."""

import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

import kvweb.labs  # noqa: E402, F401
from app import i18n  # noqa: E402
from app.views.fragmentation import FragmentationView  # noqa: E402
from app.views.memory_maps import EngineView  # noqa: E402
from kvweb.jsonable import jsonable  # noqa: E402
from kvweb.lab import LABS  # noqa: E402


def drawn(view_class, lab_name: str, **params):
    lab = LABS[lab_name](**params)
    view = view_class()
    view.update(lab, jsonable(lab.run()))
    return view


@pytest.mark.parametrize("allocator", ["ideal", "first-fit", "buddy"])
def test_the_fragmentation_arena_names_its_placement(allocator):
    title = drawn(FragmentationView, "fragmentation", requests=200, allocator=allocator).arena.title.text
    assert f"({allocator})" in title
    assert ("no hole between them" in title) == (allocator == "ideal")


def test_the_engine_names_the_arena_of_the_reserved_map_only():
    view = drawn(EngineView, "engine", requests=40, memory="oracle", compare="paged", allocator="ideal")
    reserved, paged = (m.figure.title.text for m in view.maps[:2])
    assert reserved.startswith("oracle (arena: ideal): one cell = ") and paged.startswith("paged: one cell = ")
    i18n.use("zh")
    try:
        view = drawn(EngineView, "engine", requests=40, memory="oracle", compare="none", allocator="buddy")
        assert view.maps[0].figure.title.text.startswith(f"oracle ({i18n.tr('arena')}: buddy)")
        assert i18n.tr("arena") != "arena"
    finally:
        i18n.use("en")
