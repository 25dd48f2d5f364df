"""English and Simplified Chinese for the app's labels, explanations and messages.

The English text is the key (gettext's msgid): `tr(text)` returns the session language's
form, read with the standard library's `gettext` from the catalog app/locale/LANG/LC_MESSAGES/
kvweb.po (compiled when the app starts, `app.catalogs`). A missing translation shows the
English, so nothing disappears. Messages built by the library
(ParamError lines) are translated by pattern in `tr_message`: each pattern's English template
is a msgid of its own (context "message"). The language is per session (per Bokeh document),
set from `lang=` in the URL or the language control.

Adding a language: copy app/locale/zh to app/locale/LANG, translate the msgstr lines, add
one line to LANGS.
"""

from __future__ import annotations

import gettext
import re
import unicodedata
from weakref import WeakKeyDictionary

import panel as pn

from app.catalogs import translations

LANGS = {"en": "English", "zh": "中文"}
_CATALOGS: dict[str, gettext.NullTranslations] = {
    code: gettext.NullTranslations() if code == "en" else translations(code) for code in LANGS
}
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


def translate(text: str, lang: str, context: str | None = None) -> str:
    """`text` in `lang`; `context` tells apart equal English words (gettext's msgctxt)."""
    catalog = _CATALOGS[lang]
    return catalog.pgettext(context, text) if context else catalog.gettext(text)


def tr(text: str, context: str | None = None) -> str:
    """`text` in the session's language."""
    return translate(text, current(), context)


def yes_no(flag: bool) -> str:
    """A yes/no result in plain words (never Python's `True`)."""
    return tr("yes") if flag else tr("no")


def quoted(text: str) -> str:
    """Text shown as text, between curly quotes (never a Python string's quotes and escapes)."""
    return f"\u201c{text}\u201d"


def known(text: str) -> bool:
    """Whether the session's language has its own form of `text` (English always has)."""
    return current() == "en" or tr(text) != text


def columns(text: str) -> int:
    """Width in a monospace font: Chinese characters take two columns (for aligned tables)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# (English pattern, its template); the template is a msgid (context "message"), and the
# groups are carried over, translated with `_phrase` where they are phrases of ours.
_MESSAGES = [
    (r"^(.*); using the defaults for (.*)$", "{0}; using the defaults for {1}"),
    (
        r"^(\d+) unknown parameters? for lab (\S+) ignored: (.*); allowed: (.*)$",
        "{0} unknown parameters for lab {1} ignored: {2}; allowed: {3}",
    ),
    (r"^\.\.\. and (\d+) more problems$", "... and {0} more problems"),
    (
        r"^this URL could not be opened \((\w+)\); showing the tour$",
        "this URL could not be opened ({0}); showing the tour",
    ),
    (
        r"^(\S+): (.*) is not allowed; expected (.*?)(; using the default|; ignored)?$",
        "{0}: {1} is not allowed; expected {2}{3}",
    ),
    (
        r"^unknown parameter '(.*)' for lab (\S+); allowed: (.*?)(; using the default|; ignored)?$",
        "unknown parameter '{0}' for lab {1}; allowed: {2}{3}",
    ),
    (r"^unknown lab '(.*)'; allowed: (.*?)(; showing \S+)?$", "unknown lab '{0}'; allowed: {1}{2}"),
    (
        r"^(.*?): this run is estimated at (\S+) s of work( \(.*\))?, over the budget of (\S+) s; (.*)$",
        "{0}: this run is estimated at {1} s of work{2}, over the budget of {3} s; {4}",
    ),
    (
        r"^(.*?): this run is estimated at (\S+) MB of memory( \(.*\))?, over the budget of (\S+) MB; (.*)$",
        "{0}: this run is estimated at {1} MB of memory{2}, over the budget of {3} MB; {4}",
    ),
    (
        r"^this run needed more than (\d+) MB of memory, the served app's cap per run; it was stopped$",
        "this run needed more than {0} MB of memory, the served app's cap per run; it was stopped",
    ),
    (
        r"^this run computed for more than (\S+) s, the served app's cap per run; it was stopped$",
        "this run computed for more than {0} s, the served app's cap per run; it was stopped",
    ),
    (r"^this run's process ended without a result \((.*)\)$", "this run's process ended without a result ({0})"),
    (
        r"^the URL query is (\d+) characters long; at most (\d+) are read$",
        "the URL query is {0} characters long; at most {1} are read",
    ),
    (
        r"^(\S+) does not fit on one (\S+): its weights take (\S+) GB and (\S+) GB is usable \((\S+) of (\S+) GB\), "
        r"so nothing is priced as if it ran; ignore_weights=true prices it as a what-if$",
        "{0} does not fit on one {1}: its weights take {2} GB and {3} GB is usable ({4} of {5} GB), "
        "so nothing is priced as if it ran; ignore_weights=true prices it as a what-if",
    ),
    (
        r"^(\S+) does not fit on (\d+) x (\S+): its weights take (\S+) GB per GPU and (\S+) GB is usable \((\S+) of "
        r"(\S+) GB\), so nothing is priced as if it ran; ignore_weights=true prices it as a what-if$",
        "{0} does not fit on {1} x {2}: its weights take {3} GB per GPU and {4} GB is usable ({5} of {6} GB), "
        "so nothing is priced as if it ran; ignore_weights=true prices it as a what-if",
    ),
    (
        r"^(\S+) cannot be split over (\d+) GPUs: its (\d+) query heads are not a multiple of (\d+), so nothing is priced$",
        "{0} cannot be split over {1} GPUs: its {2} query heads are not a multiple of {3}, so nothing is priced",
    ),
    (
        r"^what-if: the weights of (\S+) \((\S+) GB\) are left out of (\S+)'s (\S+) GB; for real it (fits|does not fit)$",
        "what-if: the weights of {0} ({1} GB) are left out of {2}'s {3} GB; for real it {4}",
    ),
    # the schedulers lab's host tier (kvweb/labs/modes_lab.py)
    (
        r"^host_tier_gb: (\S+) is not allowed with prefix_caching false; the host tier keeps prefix-cache blocks \(use 0\)$",
        "host_tier_gb: {0} is not allowed with prefix_caching false; the host tier keeps prefix-cache blocks (use 0)",
    ),
    (
        r"^host_tier_gb: (\S+) holds no KV block of (\S+) bytes; use 0 \(off\) or at least (\S+)$",
        "host_tier_gb: {0} holds no KV block of {1} bytes; use 0 (off) or at least {2}",
    ),
    (
        r"^host_tier_gb: (\S+) is not allowed with model (\S+); its layers mix kinds \(vLLM's KV cache groups\), and the "
        r"host tier is simulated for models whose layers are all alike only \(use 0\)$",
        "host_tier_gb: {0} is not allowed with model {1}; its layers mix kinds (vLLM's KV cache groups), and the "
        "host tier is simulated for models whose layers are all alike only (use 0)",
    ),
    # LoRA adapters in the schedulers and fleet labs (kvweb/labs/modes_lab.py, kvweb/labs/fleet.py)
    (
        r"^prefill_replicas: (\S+) is not allowed with loras (\S+); the KV transfer of LoRA adapters' requests is "
        r"not simulated \(use 0 for one of them\)$",
        "prefill_replicas: {0} is not allowed with loras {1}; the KV transfer of LoRA adapters' requests is not "
        "simulated (use 0 for one of them)",
    ),
    (
        r"^loras: (\S+) is not allowed with mode (\S+); LoRA adapters \(loras > 0\) are simulated in vllm-v1 "
        r"and sglang only \(use 0\)$",
        "loras: {0} is not allowed with mode {1}; LoRA adapters (loras > 0) are simulated in vllm-v1 and sglang "
        "only (use 0)",
    ),
    (
        r"^loras: (\S+) is not allowed with spec_tokens (\S+); adapters and speculative decoding together are "
        r"not simulated \(use 0 for one of them\)$",
        "loras: {0} is not allowed with spec_tokens {1}; adapters and speculative decoding together are not "
        "simulated (use 0 for one of them)",
    ),
    (
        r"^loras: (\S+) is not allowed with model (\S+); its layers are not all full attention, and LoRA is "
        r"simulated on models whose layers are \(use 0\)$",
        "loras: {0} is not allowed with model {1}; its layers are not all full attention, and LoRA is "
        "simulated on models whose layers are (use 0)",
    ),
    (
        r"^loras: (\S+) is not allowed with model (\S+); it is a mixture of experts, and its experts' adapters "
        r"are not simulated \(use lora_targets qkvo\)$",
        "loras: {0} is not allowed with model {1}; it is a mixture of experts, and its experts' adapters are "
        "not simulated (use lora_targets qkvo)",
    ),
    (
        r"^max_loras: (\S+) is not allowed; (\S+) slots of rank (\S+) leave no KV cache \(use fewer or a lower "
        r"lora_rank\)$",
        "max_loras: {0} is not allowed; {1} slots of rank {2} leave no KV cache (use fewer or a lower lora_rank)",
    ),
    # a weight precision the model cannot take (kvweb/gpu/cost.py)
    (
        r"^weight_precision mxfp4 quantizes routed experts only \(as gpt-oss ships\); (\S+) has none: use (.*)$",
        "weight_precision mxfp4 quantizes routed experts only (as gpt-oss ships); {0} has none: use {1}",
    ),
    # the schedulers lab's speculative decoding (kvweb/labs/modes_lab.py, kvweb/serving/schedulers/spec_decode.py)
    (
        r"^spec_tokens: (\S+) is not allowed with mode (\S+); speculative decoding \(spec_tokens > 0\) is simulated in "
        r"vllm-v1 and sglang only \(use 0\)$",
        "spec_tokens: {0} is not allowed with mode {1}; speculative decoding (spec_tokens > 0) is simulated in vllm-v1 and "
        "sglang only (use 0)",
    ),
    (
        r"^acceptance: (.*) is not allowed; give one rate in \[0, 1\] or (\S+) rates, one per draft position, separated "
        r"by commas$",
        "acceptance: {0} is not allowed; give one rate in [0, 1] or {1} rates, one per draft position, separated by commas",
    ),
    # the drafter (kvweb/serving/schedulers/drafters.py)
    (
        r"^drafter: (\S+) is not allowed with model (\S+); it ships no MTP module; mtp drafts for (.*) only \(use eagle\)$",
        "drafter: {0} is not allowed with model {1}; it ships no MTP module; mtp drafts for {2} only (use eagle)",
    ),
    (
        r"^drafter: (\S+) is not allowed with model (\S+); a draft model must be smaller \((\S+) B parameters\) and "
        r"share its vocabulary \((\S+) tokens\): (\S+) has (\S+) B and (\S+) \(use eagle or a smaller model of the same "
        r"vocabulary\)$",
        "drafter: {0} is not allowed with model {1}; a draft model must be smaller ({2} B parameters) and share its "
        "vocabulary ({3} tokens): {4} has {5} B and {6} (use eagle or a smaller model of the same vocabulary)",
    ),
    (
        r"^drafter: (\S+) is not allowed with model (\S+); (\S+)'s layers mix kinds \(vLLM's KV cache groups\), and a "
        r"draft model is simulated with full or latent layers only \(use eagle\)$",
        "drafter: {0} is not allowed with model {1}; {2}'s layers mix kinds (vLLM's KV cache groups), and a draft model "
        "is simulated with full or latent layers only (use eagle)",
    ),
    (
        r"^drafter: (\S+) is not allowed on (.*); its (\S+) query heads do not split over (\S+) GPUs \(vLLM runs a draft "
        r"model at the target's tensor parallelism; use eagle or a tp that divides them\)$",
        "drafter: {0} is not allowed on {1}; its {2} query heads do not split over {3} GPUs (vLLM runs a draft model at "
        "the target's tensor parallelism; use eagle or a tp that divides them)",
    ),
    (
        r"^drafter: (\S+) is not allowed on (.*); its weights \((\S+) GB a GPU\) leave no KV cache beside (\S+) \(use "
        r"eagle or more GPUs\)$",
        "drafter: {0} is not allowed on {1}; its weights ({2} GB a GPU) leave no KV cache beside {3} (use eagle or more "
        "GPUs)",
    ),
    (
        r"^spec_sweep: true is not allowed with spec_tokens 0; the sweep runs every draft length from 0 to "
        r"spec_tokens \(set spec_tokens above 0\)$",
        "spec_sweep: true is not allowed with spec_tokens 0; the sweep runs every draft length from 0 to spec_tokens "
        "(set spec_tokens above 0)",
    ),
    (
        r"^spec_tokens: (\S+) is not allowed with async_scheduling true; speculative decoding is simulated with "
        r"synchronous scheduling only \(use 0\)$",
        "spec_tokens: {0} is not allowed with async_scheduling true; speculative decoding is simulated with synchronous "
        "scheduling only (use 0)",
    ),
    (
        r"^spec_tokens: (\S+) is not allowed with model (\S+); its layers mix kinds \(vLLM's KV cache groups\), and "
        r"speculative decoding is simulated for models whose layers are all alike only \(use 0\)$",
        "spec_tokens: {0} is not allowed with model {1}; its layers mix kinds (vLLM's KV cache groups), and speculative "
        "decoding is simulated for models whose layers are all alike only (use 0)",
    ),
    # the schedulers and fleet labs' images (kvweb/labs/modes_lab.py, kvweb/serving/memory/encoder_cache.py)
    (
        r"^images: (\S+) is not allowed with mode (\S+); images \(images > 0\) are simulated in vllm-v1 only \(use 0\)$",
        "images: {0} is not allowed with mode {1}; images (images > 0) are simulated in vllm-v1 only (use 0)",
    ),
    (
        r"^images: (\S+) is not allowed with spec_tokens (\S+); images and speculative decoding together are not "
        r"simulated \(use 0 for one of them\)$",
        "images: {0} is not allowed with spec_tokens {1}; images and speculative decoding together are not simulated "
        "(use 0 for one of them)",
    ),
    (
        r"^images: (\S+) is not allowed with model (\S+); its layers mix kinds \(vLLM's KV cache groups\), and images "
        r"are simulated for models whose layers are all alike only \(use 0\)$",
        "images: {0} is not allowed with model {1}; its layers mix kinds (vLLM's KV cache groups), and images are "
        "simulated for models whose layers are all alike only (use 0)",
    ),
    (
        r"^image_tokens: (\S+) images of (\S+) tokens is not allowed; scenario (\S+) allows at most (\S+) tokens a "
        r"request, text and output included$",
        "image_tokens: {0} images of {1} tokens is not allowed; scenario {2} allows at most {3} tokens a request, "
        "text and output included",
    ),
    # the fleet lab's disaggregation (kvweb/labs/fleet.py)
    (
        r"^prefill_replicas: (\S+) is not allowed with model (\S+); its layers mix kinds \(vLLM's KV cache groups\), and "
        r"the KV transfer is simulated for models whose layers are all alike only \(use 0\)$",
        "prefill_replicas: {0} is not allowed with model {1}; its layers mix kinds (vLLM's KV cache groups), and the "
        "KV transfer is simulated for models whose layers are all alike only (use 0)",
    ),
    # a trace file (kvweb/serving/load/traces.py) and the trace parameters (kvweb/labs/engine.py): the file's text stays as given
    (
        r"^trace line (\d+), field (.+?): (.*) is not allowed; expected (.*)$",
        "trace line {0}, field {1}: {2} is not allowed; expected {3}",
    ),
    (r"^trace file: (.*)$", "trace file: {0}"),
    (
        r"^(\S+): given, but workload is '(.*)'; set workload to trace to use it$",
        "{0}: given, but workload is '{1}'; set workload to trace to use it",
    ),
    (
        r"^trace_start, trace_duration: the window (.*) holds no request; the trace (\S+) spans 0 to (\S+) s$",
        "trace_start, trace_duration: the window {0} holds no request; the trace {1} spans 0 to {2} s",
    ),
    (
        r"^trace_file: (\S+) \((\S+) rows, digest (\S+)\) is not loaded here; pick the file again, or choose a trace_preset "
        r"\(presets load anywhere\)$",
        "trace_file: {0} ({1} rows, digest {2}) is not loaded here; pick the file again, or choose a trace_preset "
        "(presets load anywhere)",
    ),
    *[
        (re.escape(line) + "$", line)
        for line in ("trace_preset: none is not allowed with workload trace; choose a trace_preset or a trace_file",)
    ],
    (
        r"^trace_file: (.*) is no trace file kvweb can read here; expected the path of a trace file \(command line\) or a "
        r"file picked in the app$",
        "trace_file: {0} is no trace file kvweb can read here; expected the path of a trace file (command line) or a file "
        "picked in the app",
    ),
    # a pasted config.json (kvweb/gpu/hf_config.py); JSON's own error stays English
    (
        r"^config\.json is not JSON: (.*) at line (\d+) column (\d+)$",
        "config.json is not JSON: {0} at line {1} column {2}",
    ),
    (r"^config\.json: (\d+) characters; at most (\d+) are read$", "config.json: {0} characters; at most {1} are read"),
    (
        r"^config\.json: nested (\d+) deep; at most (\d+) levels are read$",
        "config.json: nested {0} deep; at most {1} levels are read",
    ),
    (
        r"^config\.json: an integer of (\d+) digits; at most (\d+) are read$",
        "config.json: an integer of {0} digits; at most {1} are read",
    ),
    (r"^config\.json: (\S+) \((.*)\) is not modelled$", "config.json: {0} ({1}) is not modelled"),
    # the user's benchmark runs a measured model is calibrated to (kvweb/gpu/calibration.py): the field stays English
    (r"^calibration: (.*)$", "calibration: {0}"),
    # a measured cost model without tables (kvweb/gpu/measured_cost.py)
    (r"^cost_model: measured: (.*); use cost_model=roofline$", "cost_model: measured: {0}; use cost_model=roofline"),
    (r"^config\.json: (\S+) is missing; it is needed here$", "config.json: {0} is missing; it is needed here"),
    (
        r"^config\.json: (\S+) is (.*); expected an integer from (\d+) to (\d+)$",
        "config.json: {0} is {1}; expected an integer from {2} to {3}",
    ),
    (
        r"^config\.json: layer_types must list (\d+) layer types \(num_hidden_layers\)$",
        "config.json: layer_types must list {0} layer types (num_hidden_layers)",
    ),
    (r"^config\.json: layer_types has (.*); allowed: (.*)$", "config.json: layer_types has {0}; allowed: {1}"),
    (r"^config\.json: (\S+) \((\d+)\) must divide (\S+) \((\d+)\)$", "config.json: {0} ({1}) must divide {2} ({3})"),
    (r"^config\.json: (\S+) and (\S+) disagree$", "config.json: {0} and {1} disagree"),
    (
        r"^config\.json: (\S+) \((\d+)\) is more than the (\d+) experts$",
        "config.json: {0} ({1}) is more than the {2} experts",
    ),
    (r"^config\.json: (\S+) \((\d+)\) is more than (\S+) \((\d+)\)$", "config.json: {0} ({1}) is more than {2} ({3})"),
    (
        r"^config\.json: (\S+) other than 1 \(experts in only some layers\) is not modelled$",
        "config.json: {0} other than 1 (experts in only some layers) is not modelled",
    ),
    *[
        (re.escape(line) + "$", line)
        for line in (
            "config.json: expected a JSON object",
            "config.json: text_config is not an object",
            "config.json: kv_lora_rank (MLA) with layer types other than full attention",
            "config.json: layer_types has no attention layer; kvweb needs at least one",
            "config.json: tie_word_embeddings must be true or false",
            "config: empty; paste a config.json, or choose a model",
        )
    ],
]
_PHRASES = [
    (r"^an integer from (\S+) to (\S+)$", "an integer from {0} to {1}"),
    (r"^a number from (\S+) to (\S+)$", "a number from {0} to {1}"),
    (r"^one of (.*)$", "one of {0}"),
    (r"^true or false$", "true or false"),
    (r"^text of at most (\d+) characters$", "text of at most {0} characters"),
    (r"^a whole number; using 0$", "a whole number; using 0"),
    (r"^; using the default$", "; using the default"),
    (r"^; ignored$", "; ignored"),
    (r"^; showing (\S+)$", "; showing {0}"),
    (r"^lower (\S+) or raise (\S+)$", "lower {0} or raise {1}"),
    (r"^lower (\S+)$", "lower {0}"),
    (r"^raise (\S+)$", "raise {0}"),
    (r"^a comma-separated list of integers from (\S+) to (\S+)$", "a comma-separated list of integers from {0} to {1}"),
    (r"^a comma-separated list of (.*)$", "a comma-separated list of {0}"),
    (
        r"^GPU=dollars per GPU-hour \(above 0, at most (\S+)\) for a GPU of (.*), items separated by commas$",
        "GPU=dollars per GPU-hour (above 0, at most {0}) for a GPU of {1}, items separated by commas",
    ),
    (r"^at most (\S+) candidates in the grid$", "at most {0} candidates in the grid"),
    (
        r"^0 \(off\) or, with mode sglang or vllm-v1, 1 to (\d+) \(replicas - 1: one at least decodes\)$",
        "0 (off) or, with mode sglang or vllm-v1, 1 to {0} (replicas - 1: one at least decodes)",
    ),
    (
        r"^0 \(off\) or, with images > 0 \(mode vllm-v1\), 1 to (\d+) \(replicas - prefill_replicas - 1: one at least "
        r"decodes\)$",
        "0 (off) or, with images > 0 (mode vllm-v1), 1 to {0} (replicas - prefill_replicas - 1: one at least decodes)",
    ),
    (r"^0 \(the scenario's\) or 2 to (\d+)$", "0 (the scenario's) or 2 to {0}"),
    (r"^fits$", "fits"),
    (r"^does not fit$", "does not fit"),
]


# Qualifiers in front of a figure's label ("A: paged / oracle throughput", "n = 4: saving"):
# technical names stay, the words around them are translated (context "qualifier").
_QUALIFIERS = [
    (r"^(A|B)$", "scenario {0}"),
    (r"^mean size (\d+)$", "mean size {0}"),
    (r"^width (\d+)$", "width {0}"),
    (r"^rate (\S+)/s, block (\d+)$", "rate {0}/s, block {1}"),
    (r"^block (\d+)$", "block {0}"),
]


def tr_figure(text: str) -> str:
    """A report or exercise label: whole if known, else `qualifier: phrase` translated in parts."""
    if known(text):
        return tr(text)
    head, sep, rest = text.partition(": ")
    if not sep:
        return text
    for pattern, template in _QUALIFIERS:
        m = re.match(pattern, head)
        if m:
            head = tr(template, "qualifier").format(*m.groups())
            break
    return tr("{0}: {1}", "qualifier").format(head, tr(rest))


def _phrase(text: str) -> str:
    for pattern, template in _PHRASES:
        m = re.match(pattern, text)
        if m:
            return tr(template, "message").format(*m.groups())
    return text


_WORK = re.compile(r"^ \((.*)\)$")  # a budget refusal's work: " (10,000 requests ..., 43 KV blocks filled)"


def _part(text: str) -> str:
    """A group of a message: a phrase of ours, a work estimate's units, or a whole message inside
    another (a refusal whose values were then reset: "...; using the defaults for ...")."""
    phrase = _phrase(text)
    if phrase != text:
        return phrase
    work = _WORK.match(text)
    if work:
        units = [count.partition(" ") for count in work.group(1).split(", ")]
        return tr(" ({0})", "message").format(
            tr(", ", "message").join(f"{n} {tr(name, 'unit')}" for n, _, name in units)
        )
    return tr_message(text) if any(re.match(pattern, text) for pattern, _ in _MESSAGES) else text


def tr_message(line: str) -> str:
    """Translate one library message line; user text inside it is kept as it was."""
    if current() == "en":
        return line
    for pattern, template in _MESSAGES:
        m = re.match(pattern, line)
        if m:
            return tr(template, "message").format(*(_part(g) if g else "" for g in m.groups()))
    phrase = _phrase(line)
    return phrase if phrase != line else tr(line)
