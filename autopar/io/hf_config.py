"""Hugging Face ``config.json`` (and state-spaces ``mamba_ssm`` config) readers.

Each supported ``model_type`` maps its own keys onto a :class:`ModelSpec`: the readers are in
:mod:`autopar.io.hf_transformers` and :mod:`autopar.io.hf_mamba`, what they share in
:mod:`autopar.io.hf_common`; this module picks the reader.
A config.json carries many keys that do not matter for cost (dropout, token ids,
quantization), so unknown keys are ignored here, unlike in the strict YAML
format. The keys read are typed and bounded by one pydantic model per family
(:mod:`autopar.io.hf_schema`, imported when a config is read); a key that
matters and is missing or wrong is a one-line :class:`SpecError` naming it and
the file.

What the readers leave out, by family:

- sliding windows (``sliding_window`` with ``layer_types``, Gemma 2's alternation,
  Gemma 3's ``sliding_window_pattern``, Qwen's ``use_sliding_window`` from
  ``max_window_layers``, Mistral / Phi-3 on every layer) are read as how many
  layers are windowed, not which (``ModelSpec.window_layers``).
- gemma2 / gemma3: the gated GELU MLP is costed as SwiGLU (the same three
  matrices); logit soft-capping, the extra norms and Gemma 3's vision tower are
  left out (a multimodal config is read through its ``text_config``).
- gpt_oss: attention sinks and linear-layer biases are ignored.
- deepseek_v2/v3: the multi-token-prediction module (``num_nextn_predict_layers``)
  is not modelled; ``moe_layer_freq`` must be 1 (MoE on every layer after the
  first ``first_k_dense_replace``).
- qwen3_moe: dense layers (``mlp_only_layers``, ``decoder_sparse_step``) are
  supported only when they form a prefix of the stack.
- Mamba-2 (mamba2, nemotron_h, mamba_ssm): ``d_inner`` must be an integer
  multiple of ``hidden_size`` (autopar's Mamba-2 model has an integer ``expand``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autopar.errors import SpecError
from autopar.io.hf_common import _Config
from autopar.io.hf_mamba import _mamba2, _mamba_ssm, _nemotron_h
from autopar.io.hf_transformers import _deepseek, _gemma, _gpt2, _gpt_oss, _llama_like, _mixtral, _qwen3_moe
from autopar.io.reading import shown
from autopar.spec.model import ModelSpec

_READERS: dict[str, Callable[[_Config], ModelSpec]] = {
    "gpt2": _gpt2,
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gpt_neox", "phi3"), _llama_like),
    "gemma2": _gemma,
    "gemma3_text": _gemma,
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt_oss": _gpt_oss,
    "mamba2": _mamba2,
    "nemotron_h": _nemotron_h,
}

SUPPORTED_MODEL_TYPES = tuple(sorted([*_READERS, "gemma3"]))  # gemma3: read through its text_config


def from_hf_config(data: dict[str, Any], *, where: str) -> ModelSpec:
    """Read a Hugging Face config.json (or a state-spaces mamba_ssm config) into a ModelSpec."""
    from autopar.io import hf_schema as hf  # pydantic: loaded when a config is read, not for --help

    reader: Callable[[_Config], ModelSpec] = _mamba_ssm
    kind = "mamba_ssm"
    if data.get("model_type") == "gemma3":  # Gemma 3 4B-27B: the language model is the text_config
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise SpecError(f"{where}: text_config: a gemma3 config holds its language model here; missing")
        data = {
            "model_type": "gemma3_text",
            **{k: v for k, v in data.items() if k == "_name_or_path"},
            **text,
            **({"tie_word_embeddings": data["tie_word_embeddings"]} if "tie_word_embeddings" in data else {}),
        }
    if "model_type" in data or "ssm_cfg" not in data or "d_model" not in data:
        kind = hf.validate(hf.Kind, data, where=where, err=SpecError).model_type
        if kind not in _READERS:
            raise SpecError(
                f"{where}: model_type: unsupported model_type {shown(kind)}; supported: "
                f"{', '.join(SUPPORTED_MODEL_TYPES)} (and state-spaces mamba_ssm configs)"
            )
        reader = _READERS[kind]
    keys = hf.validate(hf.READERS_SCHEMA[kind], data, where=where, err=SpecError)
    return reader(_Config(data, where, kind, keys))
