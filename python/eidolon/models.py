"""Model descriptions for specs: Hugging Face configs and expert-load tables.

>>> from eidolon.models import from_hf_config
>>> m = from_hf_config({"model_type": "mixtral", "num_hidden_layers": 32,
...     "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
...     "intermediate_size": 14336, "vocab_size": 32000,
...     "num_local_experts": 8, "num_experts_per_tok": 2}, layers=2)
>>> sorted(m)
['hf_config', 'layers']
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, NoReturn, Union

from .errors import spec_error

__all__ = ["from_hf_config", "expert_loads"]

ConfigLike = Union[Mapping[str, Any], str, "os.PathLike[str]", Any]  # Any: a transformers config


def from_hf_config(config: ConfigLike, **overrides: Any) -> dict[str, Any]:
    """A spec ``model`` from a Hugging Face ``config.json``.

    ``config`` is the decoded dict, a path to the file, or its JSON text.
    The core maps the transformers field names (``model_type`` llama,
    mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, gpt_oss, llama4, glm4_moe,
    deepseek_v2, deepseek_v3, gpt2, mamba; sliding-window and chunked
    attention from ``sliding_window``, ``attention_chunk_size`` and
    ``layer_types``) to Eidolon's hyper-parameters, so the same
    ``{"hf_config": {...}}`` works in a JSON spec; ``overrides`` are
    Eidolon model fields that replace the config's values (e.g.
    ``layers=2``). Problems are reported by ``eidolon.validate`` / ``run``
    as a ``SpecError`` under ``model.hf_config``.
    A transformers ``PretrainedConfig`` (``AutoConfig.from_pretrained(...)``)
    is read through its ``to_dict()``. What is not a config (a file that
    does not parse, no ``model_type``) is a ``SpecError`` at ``hf_config``.
    """
    if isinstance(config, Mapping):
        cfg: Any = dict(config)
    elif callable(getattr(config, "to_dict", None)):
        cfg = config.to_dict()  # type: ignore[union-attr]
    else:
        try:
            text = os.fspath(config)
        except TypeError:
            _bad(f"must be a config.json dict, its path or text, or a transformers config, got {type(config).__name__}")
        try:
            if text.lstrip().startswith("{"):
                cfg = json.loads(text)
            else:
                with open(text, encoding="utf-8") as f:
                    cfg = json.load(f)
        except (OSError, ValueError) as exc:
            _bad(f"cannot read a config.json from {text[:80]!r}: {exc}")
    if not isinstance(cfg, dict) or "model_type" not in cfg:
        _bad("a Hugging Face config needs a 'model_type' field")
    # Keep the JSON scalars the mapping reads, the per-layer attention lists
    # (which layers attend locally), a text_config's the same way, and of a
    # quantization_config only what says an FP8 checkpoint is block-scaled
    # (rope-scaling and the rest of the nested objects are not
    # hyper-parameters Eidolon uses).
    quant, text_config = cfg.get("quantization_config"), cfg.get("text_config")
    cfg = _hyper_parameters(cfg)
    if isinstance(text_config, Mapping):  # Llama 4: the language model's config inside the multimodal one's
        cfg["text_config"] = _hyper_parameters(text_config)
    if isinstance(quant, Mapping) and isinstance(quant.get("quant_method"), str):
        cfg["quantization_config"] = {"quant_method": quant["quant_method"]}
        block = quant.get("weight_block_size")
        if isinstance(block, (list, tuple)) and all(isinstance(b, int) for b in block):
            cfg["quantization_config"]["weight_block_size"] = list(block)
    return {"hf_config": cfg, **overrides}


def _hyper_parameters(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A config's JSON scalars and its per-layer lists of attention types
    (layer_types) and rotary use (no_rope_layers)."""
    out: dict[str, Any] = {k: v for k, v in cfg.items() if v is None or isinstance(v, (bool, int, float, str))}
    for key in ("layer_types", "no_rope_layers"):
        v = cfg.get(key)
        if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v):
            out[key] = list(v)
    return out


def _bad(message: str) -> NoReturn:
    raise spec_error([("hf_config", message)])


def expert_loads(table: Any, column: str = "load") -> list[float]:
    """A routing ``loads`` list from a per-expert load table.

    ``table`` is a ``pyarrow.Table`` (or anything with ``column(name)``,
    or a pandas DataFrame) with one row per routed expert, in expert order;
    ``column`` holds each expert's relative load (tokens routed, or a
    share). Use as ``"routing": {"distribution": "table", "loads": ...}``.
    """
    if hasattr(table, "column") and not hasattr(table, "iloc"):
        values = table.column(column).to_pylist()
    else:
        values = list(table[column])
    return [float(v) for v in values]
