"""What an engine's `--kv-cache-dtype auto` reads from a checkpoint: its KV-cache quantisation.

vLLM, SGLang and TensorRT-LLM take `auto` from the checkpoint, not from the activation dtype alone:
ModelOpt checkpoints (NVIDIA's FP8 and NVFP4 ones) name it in hf_quant_config.json,
`quantization.kv_cache_quant_algo` (TensorRT-LLM `_torch/pyexecutor/model_loader.py`, SGLang
`model_runner.py`, vLLM >= 0.15 `engine/arg_utils.py`), or in config.json's `quantization_config`
(`kv_cache_quant_algo` for ModelOpt, `kv_cache_scheme` for compressed-tensors: 8-bit float is FP8,
null is none). A checkpoint that names none caches K and V in the activation dtype (bf16).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.reading import load_mapping, named

QUANT_FILE = "hf_quant_config.json"
# kv_cache_quant_algo values and the KV dtype autopar prices them as (None: not quantised)
ALGOS = {"FP8": "fp8", "NONE": None}


def _algo(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value.upper() not in ALGOS:
        raise SpecError(f"{where}: {value!r} is not a KV-cache quantisation autopar prices (FP8, or none)")
    return ALGOS[value.upper()]


def _scheme(value: Any, where: str) -> str | None:
    """compressed-tensors kv_cache_scheme: null, or {num_bits: 8, type: float}."""
    if value is None:
        return None
    if isinstance(value, dict) and value.get("num_bits") == 8 and value.get("type") == "float":
        return "fp8"
    raise SpecError(f"{where}: {str(value)[:80]!r} is not a KV-cache scheme autopar prices (8-bit float, or null)")


def _quantization_config(config: dict[str, Any]) -> tuple[str, Any]:
    """config.json's quantization_config (a multimodal checkpoint nests it in text_config) and its path."""
    if "quantization_config" in config:
        return "quantization_config", config["quantization_config"]
    text = config.get("text_config")
    if isinstance(text, dict) and "quantization_config" in text:
        return "text_config.quantization_config", text["quantization_config"]
    return "", None


def checkpoint_kv_dtype(config_path: Path, config: dict[str, Any]) -> tuple[str, str]:
    """(KV dtype, why) that `auto` resolves to for the checkpoint whose config.json is `config_path`;
    ("", "") when the checkpoint names no KV quantisation. A field it cannot read exits 2 naming it."""
    quant = config_path.parent / QUANT_FILE
    if quant.is_file():
        data = load_mapping(quant)
        block = data.get("quantization")
        where = f"{named(quant)}: quantization.kv_cache_quant_algo"
        if not isinstance(block, dict):
            raise SpecError(f"{named(quant)}: quantization must be a mapping with kv_cache_quant_algo")
        dtype = _algo(block.get("kv_cache_quant_algo"), where)
        return (dtype or "bf16"), f"{QUANT_FILE} kv_cache_quant_algo {block.get('kv_cache_quant_algo')}"
    path, qc = _quantization_config(config)
    if qc is None:
        return "", ""
    if not isinstance(qc, dict):
        raise SpecError(f"{named(config_path)}: {path} must be a mapping")
    if "kv_cache_quant_algo" in qc:
        dtype = _algo(qc["kv_cache_quant_algo"], f"{named(config_path)}: {path}.kv_cache_quant_algo")
        return (dtype or "bf16"), f"config.json {path}.kv_cache_quant_algo {qc['kv_cache_quant_algo']}"
    if "kv_cache_scheme" in qc:
        dtype = _scheme(qc["kv_cache_scheme"], f"{named(config_path)}: {path}.kv_cache_scheme")
        return (dtype or "bf16"), f"config.json {path}.kv_cache_scheme {'8-bit float' if dtype else 'null'}"
    return "", ""
