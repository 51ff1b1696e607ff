"""Chapter 4's table of released models, read from ``transformers``' configuration classes.

Each entry is a configuration class of ``transformers`` 5.23 (its defaults describe a model
similar to the one the class documents) and the position keys the released checkpoints
ship where the defaults lack them. :func:`released_rope_rows` reads every configuration
with :func:`posenc.inspect_config`, so the chapter's rows come from the same code that
reads a user's ``config.json``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..rope.hf_config import inspect_config
from ._validate import check_rows

__all__ = ["RELEASED", "ROW_FIELDS", "released_configs", "released_rope_rows", "rope_table_text"]

# (model, transformers module, configuration class, keyword arguments)
RELEASED: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("Llama 3.1", "llama", "LlamaConfig", {
        "max_position_embeddings": 131072,
        "rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192, "rope_theta": 500000.0}}),
    # Meta's reference code scales only Scout's RoPE: llama3 rule, factor 16, low = high = 1,
    # from 8,192 positions (models/llama4/args.py and model.py of meta-llama/llama-models);
    # Maverick ships no rope_scaling
    ("Llama 4 Scout", "llama4", "Llama4TextConfig", {
        "max_position_embeddings": 10485760,
        "rope_parameters": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192, "rope_theta": 500000.0}}),
    ("Llama 4 Maverick", "llama4", "Llama4TextConfig", {"max_position_embeddings": 1048576}),
    # the rope_scaling of the 4B, 12B and 27B config.json files (none on 1B); transformers
    # applies it to the global layers only
    ("Gemma 3", "gemma3", "Gemma3TextConfig", {"rope_scaling": {"rope_type": "linear", "factor": 8.0}}),
    ("Gemma 4", "gemma4", "Gemma4TextConfig", {}),
    ("Command A", "cohere2", "Cohere2Config", {}),
    ("SmolLM3", "smollm3", "SmolLM3Config", {}),
    # YaRN factor 40 from 4,096 positions (the frequencies; the mscale keys change only the scale)
    ("DeepSeek-V3", "deepseek_v3", "DeepseekV3Config", {
        "max_position_embeddings": 163840,
        "rope_parameters": {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                            "beta_fast": 32.0, "beta_slow": 1.0, "rope_theta": 10000.0}}),
    ("gpt-oss", "gpt_oss", "GptOssConfig", {}),
    ("Qwen3-VL", "qwen3_vl", "Qwen3VLTextConfig", {}),
    ("Qwen3.5", "qwen3_5", "Qwen3_5TextConfig", {}),
)


def released_configs() -> dict[str, Any]:
    """The configurations of :data:`RELEASED`, built with ``transformers`` (no download)."""
    import warnings

    out = {}
    with warnings.catch_warnings():  # transformers' import may warn about tqdm widgets
        warnings.simplefilter("ignore")
        for name, module, cls, kwargs in RELEASED:
            config_cls = getattr(importlib.import_module(f"transformers.models.{module}.configuration_{module}"), cls)
            out[name] = config_cls(**kwargs)
    return out


def released_rope_rows() -> list[dict[str, Any]]:
    """One row per model and rotating layer type: :func:`posenc.inspect_config`'s row with
    ``model``, ``share`` (``"k of n"`` layers) and ``nope`` (layers without positions,
    ``"k of n"``)."""
    rows = []
    for name, config in released_configs().items():
        report = inspect_config(config)
        n = report.num_layers
        without = len(report.nope_layers) + len(report.no_attention_layers)
        for row in report.rows:
            rows.append({**row, "model": name, "share": f"{len(row['layers'])} of {n}",
                         "nope": f"{without} of {n}" if without else "-"})
    return rows


#: The fields of a row of :func:`released_rope_rows` that :func:`rope_table_text` shows.
ROW_FIELDS = ("model", "layer_type", "share", "rotated_pairs", "head_dim", "layout", "base", "scaling", "reach",
              "nope", "sections")


def rope_table_text(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned text table: model, layer type and its share of the layers,
    rotated pairs of the head's pairs, layout, base, rule, reach, the layers without RoPE,
    multimodal sections."""
    if not isinstance(rows, list):
        raise TypeError(f"rows must be the list released_rope_rows returns, got {type(rows).__name__}")
    rows = check_rows("rows", rows, ROW_FIELDS)
    head = ("model", "layers", "share", "pairs", "layout", "base", "scaling", "reach", "no RoPE", "sections")
    lines = [head]
    for r in rows:
        reach = "-" if r["reach"] is None else ("all" if r["reach"] == float("inf") else f"{r['reach']:,.0f}")
        sections = "-"
        if r["sections"]:
            counts, kind = r["sections"].rsplit(" ", 1)
            sections = "/".join(c.strip() for c in counts.strip("[]").split(",")) + f" {kind}"
        lines.append((
            r["model"], r["layer_type"].removesuffix("_attention"), r["share"].replace(" of ", "/"),
            f"{r['rotated_pairs']}/{r['head_dim'] // 2}", r["layout"], f"{r['base']:,.0f}", r["scaling"], reach,
            r["nope"].replace(" of ", "/"), sections,
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)
