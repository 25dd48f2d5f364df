"""Print the transformers class defaults that kvweb/gpu/hf_config.py fills in (DEFAULTS there).

A published config.json leaves out every field equal to its class's default (Gemma 3's text_config
has no vocab_size: Gemma3TextConfig's 262_208). This reads those defaults from the transformers
source, without importing it (no torch needed):

    pip download transformers==5.25.0 --no-deps -d /tmp/tf
    python scripts/derive_hf_defaults.py /tmp/tf/transformers-5.25.0-py3-none-any.whl

For each model_type below it finds the configuration class that declares it, takes the class-level
defaults (`vocab_size: int = 262_208`) of the fields hf_config reads, and prints the table. Defaults
set in `__post_init__` (the layer patterns) are not class fields; hf_config adds them by hand.
"""

from __future__ import annotations

import ast
import sys
import zipfile
from pprint import pformat

sys.path.insert(0, __file__.rsplit("/scripts/", 1)[0])
from kvweb.gpu.hf_config import READ  # noqa: E402

# a file without these names no experts (a class's default count is its demo model's), or turns nothing on
NOT_FILLED = {
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "experts_per_token",
    "decoder_sparse_step",
    "use_sliding_window",
}
# the model_types (a text_config's own where it has one) of the configs kvweb loads: the transformers folder,
# and the model_type its class declares where that differs (Step-3.7-Flash's file says step3p7, its class step3p5)
MODEL_TYPES = {
    "llama": "llama",
    "mixtral": "mixtral",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "qwen3_vl_text": "qwen3_vl",
    "qwen3_vl_moe_text": "qwen3_vl_moe",
    "qwen3_5_text": "qwen3_5",
    "qwen3_5_moe_text": "qwen3_5_moe",
    "qwen3_next": "qwen3_next",
    "gemma3_text": "gemma3",
    "gpt_oss": "gpt_oss",
    "deepseek_v3": "deepseek_v3",
    "minimax_m2": "minimax_m2",
    "step3p7": ("step3p7", "step3p5"),
}


def class_defaults(source: str, model_type: str) -> dict:
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields, declared = {}, None
        for item in node.body:
            target = (
                item.target
                if isinstance(item, ast.AnnAssign)
                else (item.targets[0] if isinstance(item, ast.Assign) and len(item.targets) == 1 else None)
            )
            if not isinstance(target, ast.Name) or item.value is None:
                continue
            try:
                value = ast.literal_eval(item.value)
            except ValueError:
                continue
            if target.id == "model_type":
                declared = value
            elif target.id in READ and target.id not in NOT_FILLED and value is not None:
                fields[target.id] = value
        if declared == model_type:
            return fields
    raise SystemExit(f"no configuration class declares model_type {model_type!r}")


def main(wheel: str) -> None:
    table = {}
    with zipfile.ZipFile(wheel) as z:
        for model_type, where in MODEL_TYPES.items():
            folder, declared = where if isinstance(where, tuple) else (where, model_type)
            source = z.read(f"transformers/models/{folder}/configuration_{folder}.py").decode()
            table[model_type] = class_defaults(source, declared)
    print(pformat(table, width=118, sort_dicts=True))


if __name__ == "__main__":
    main(sys.argv[1])
