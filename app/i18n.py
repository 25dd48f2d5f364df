"""English and Simplified Chinese for the app's labels, explanations and messages.

The English text is the key: `tr(text)` returns its Chinese form when the session's
language is `zh` (and the English when a translation is missing, so nothing disappears).
Messages built by the library (ParamError lines) are translated by pattern in
`tr_message`. The language is per session (per Bokeh document), set from `lang=` in the URL
or the language control.
"""
from __future__ import annotations

import re
import unicodedata
from weakref import WeakKeyDictionary

import panel as pn

from app.zh import ZH

LANGS = {"en": "English", "zh": "中文"}
_by_doc: WeakKeyDictionary = WeakKeyDictionary()
_no_doc = {"lang": "en"}


def use(lang: str) -> None:
    doc = pn.state.curdoc
    if doc is None:
        _no_doc["lang"] = lang
    else:
        _by_doc[doc] = lang


def current() -> str:
    doc = pn.state.curdoc
    return _no_doc["lang"] if doc is None else _by_doc.get(doc, "en")


def tr(text: str) -> str:
    return ZH.get(text, text) if current() == "zh" else text


def columns(text: str) -> int:
    """Width in a monospace font: Chinese characters take two columns (for aligned tables)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# (English pattern, Chinese template); groups are carried over, and translated with `tr`
# where they are phrases of ours rather than user text.
_MESSAGES = [
    (r"^(\S+): (.*) is not allowed; expected (.*?)(; using the default|; ignored)?$",
     "{0}：{1} 不允许；应为 {2}{3}"),
    (r"^unknown parameter '(.*)' for lab (\S+); allowed: (.*?)(; using the default|; ignored)?$",
     "实验 {1} 没有参数 '{0}'；可用参数：{2}{3}"),
    (r"^unknown lab '(.*)'; allowed: (.*?)(; showing \S+)?$", "没有实验 '{0}'；可用实验：{1}{2}"),
    (r"^the URL query is (\d+) characters long; at most (\d+) are read$", "URL 查询有 {0} 个字符；至多读取 {1} 个"),
]
_PHRASES = [
    (r"^an integer from (\S+) to (\S+)$", "{0} 到 {1} 之间的整数"),
    (r"^a number from (\S+) to (\S+)$", "{0} 到 {1} 之间的数"),
    (r"^one of (.*)$", "以下之一：{0}"),
    (r"^true or false$", "true 或 false"),
    (r"^text of at most (\d+) characters$", "至多 {0} 个字符的文本"),
    (r"^a whole number; using 0$", "整数；改用 0"),
    (r"^; using the default$", "；改用默认值"),
    (r"^; ignored$", "；已忽略"),
    (r"^; showing (\S+)$", "；显示 {0}"),
]


# Qualifiers in front of a figure's label ("A: paged / oracle throughput", "n = 4: saving"):
# technical names stay, the words around them are translated.
_QUALIFIERS = [
    (r"^(A|B)$", "场景 {0}"),
    (r"^mean size (\d+)$", "平均大小 {0}"),
    (r"^width (\d+)$", "宽度 {0}"),
    (r"^rate (\S+)/s, block (\d+)$", "速率 {0}/s，块大小 {1}"),
]


def tr_figure(text: str) -> str:
    """A report or exercise label: whole if known, else `qualifier: phrase` translated in parts."""
    if current() != "zh" or text in ZH:
        return tr(text)
    head, sep, rest = text.partition(": ")
    if not sep:
        return text
    for pattern, template in _QUALIFIERS:
        m = re.match(pattern, head)
        if m:
            head = template.format(*m.groups())
            break
    return f"{head}：{tr(rest)}"


def _phrase(text: str) -> str:
    for pattern, template in _PHRASES:
        m = re.match(pattern, text)
        if m:
            return template.format(*m.groups())
    return text


def tr_message(line: str) -> str:
    """Translate one library message line; user text inside it is kept as it was."""
    if current() != "zh":
        return line
    for pattern, template in _MESSAGES:
        m = re.match(pattern, line)
        if m:
            return template.format(*(_phrase(g) if g else "" for g in m.groups()))
    phrase = _phrase(line)
    return phrase if phrase != line else tr(line)
