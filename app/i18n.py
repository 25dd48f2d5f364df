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
    (r"^(.*); using the defaults for (.*)$", "{0}；改用以下参数的默认值：{1}"),
    (r"^(\d+) unknown parameters? for lab (\S+) ignored: (.*); allowed: (.*)$", "实验 {1} 没有这 {0} 个参数，已忽略：{2}；可用参数：{3}"),
    (r"^\.\.\. and (\d+) more problems$", "……另有 {0} 个问题"),
    (r"^this URL could not be opened \((\w+)\); showing the tour$", "无法打开此 URL（{0}）；显示导览"),
    (r"^(\S+): (.*) is not allowed; expected (.*?)(; using the default|; ignored)?$",
     "{0}：{1} 不允许；应为 {2}{3}"),
    (r"^unknown parameter '(.*)' for lab (\S+); allowed: (.*?)(; using the default|; ignored)?$",
     "实验 {1} 没有参数 '{0}'；可用参数：{2}{3}"),
    (r"^unknown lab '(.*)'; allowed: (.*?)(; showing \S+)?$", "没有实验 '{0}'；可用实验：{1}{2}"),
    (r"^the URL query is (\d+) characters long; at most (\d+) are read$", "URL 查询有 {0} 个字符；至多读取 {1} 个"),
    (r"^(\S+) does not fit on one (\S+): its weights take (\S+) GB and (\S+) GB is usable \((\S+) of (\S+) GB\), "
     r"so nothing is priced as if it ran; ignore_weights=true prices it as a what-if$",
     "{0} 放不进一块 {1}：权重占 {2} GB，可用的只有 {3} GB（{5} GB 的 {4}），所以不按能运行来计价；"
     "ignore_weights=true 可按假设情形 (what-if) 计价"),
    (r"^what-if: the weights of (\S+) \((\S+) GB\) are left out of (\S+)'s (\S+) GB; for real it (fits|does not fit)$",
     "假设情形 (what-if)：{0} 的权重（{1} GB）不计入 {2} 可用的 {3} GB；实际上它{4}"),
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
    (r"^fits$", "放得下"),
    (r"^does not fit$", "放不下"),
]


# Qualifiers in front of a figure's label ("A: paged / oracle throughput", "n = 4: saving"):
# technical names stay, the words around them are translated.
_QUALIFIERS = [
    (r"^(A|B)$", "场景 {0}"),
    (r"^mean size (\d+)$", "平均大小 {0}"),
    (r"^width (\d+)$", "宽度 {0}"),
    (r"^rate (\S+)/s, block (\d+)$", "速率 {0}/s，块大小 {1}"),
    (r"^block (\d+)$", "块大小 {0}"),
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
