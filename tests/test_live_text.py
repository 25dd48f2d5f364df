"""`LiveText` (app/text.py): text that changes every step reaches the page as data a script sets
as textContent, never as markup and never as a string parameter (Panel would clean it with nh3,
which the static site lacks)."""

import sys

import pytest

if sys.platform == "emscripten":
    pytest.skip("the app (Panel) is tested in CPython only", allow_module_level=True)

from bokeh.document import Document  # noqa: E402

from app.text import LiveText  # noqa: E402


def test_the_text_travels_as_data_and_is_set_as_text_content():
    text = LiveText(css_class="kv-x-step", mono=True)
    doc = Document()
    model = text.get_root(doc)
    text.text = '<img src=x onerror="alert(1)"> t = 1.0 s'
    assert text.text == '<img src=x onerror="alert(1)"> t = 1.0 s'
    assert model.data.content == {"text": text.text}  # literally, as the page receives it
    assert "kv-x-step" in model.css_classes and model.styles["font-family"] == "monospace"
    assert "textContent" in model.scripts["content"][0] and "innerHTML" not in str(model.scripts)
    strings = [n for n, p in LiveText.param.objects().items() if type(p).__name__ == "String"]
    assert strings == ["name"] and LiveText.param["name"].precedence < 0
