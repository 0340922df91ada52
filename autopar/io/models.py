"""Model loaders: a preset name, a YAML spec (format in DESIGN.md), a Hugging Face
config.json, or a folder holding one; all become a :class:`ModelSpec`."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.hf_config import from_hf_config
from autopar.io.strict import did_you_mean, load_mapping, named
from autopar.spec.families import MambaSpec, MLASpec, MoESpec
from autopar.spec.model import ModelSpec


def preset_names() -> list[str]:
    """Names of the built-in model presets."""
    root = resources.files("autopar") / "data" / "presets"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_model(ref: str) -> ModelSpec:
    """A preset name, a YAML spec, a Hugging Face config.json, or a folder holding one."""
    if not ref.strip():
        raise SpecError("empty model name: give a preset name (see `autopar models`), a model .yaml file "
                        "or a Hugging Face config.json")
    path = Path(ref)
    if path.is_dir():
        path = path / "config.json"
        if not path.exists():
            raise SpecError(f"{named(ref)}: folder has no config.json")
    if path.suffix.lower() == ".json":
        return from_hf_config(load_mapping(path), where=named(path))
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return from_yaml_mapping(load_mapping(path), where=named(path))
    names = preset_names()
    if ref in names:
        preset = resources.files("autopar") / "data" / "presets" / f"{ref}.yaml"
        with resources.as_file(preset) as p:
            return from_yaml_mapping(load_mapping(p), where=f"preset {ref}")
    raise SpecError(
        f"unknown model '{named(ref)}'{did_you_mean(ref, names)}: give a preset name (see `autopar models`), "
        "a model .yaml file or a Hugging Face config.json"
    )


def from_yaml_mapping(data: dict[str, Any], *, where: str) -> ModelSpec:
    """Build a spec from the DESIGN.md YAML format (autopar.io.schema.ModelFile); unknown keys are errors."""
    from autopar.io.schema import ModelFile, validate  # pydantic: only once a file is read

    m = validate(ModelFile, data, where=where, err=SpecError)
    heads, hidden = m.num_attention_heads, m.hidden_size
    return ModelSpec(
        name=m.name,
        layers=m.layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=m.num_kv_heads or heads,
        head_dim=m.head_dim or _default_head_dim(hidden, heads, where),
        ffn_hidden_size=m.ffn_hidden_size,
        ffn_activation=m.ffn_activation,
        vocab_size=m.vocab_size,
        seq_len=m.seq_len,
        max_seq_len=m.max_seq_len or m.seq_len,
        tie_embeddings=m.tie_embeddings,
        source=m.source or where,
        dropout=m.dropout,
        norm=m.norm,
        position_embedding=m.position_embedding,
        rope_base=m.rope_base,
        rope_scaling=m.rope_scaling,
        linear_bias=m.linear_bias,
        qk_norm=m.qk_norm,
        moe=MoESpec(**m.moe.model_dump()) if m.moe else None,
        mla=MLASpec(**m.mla.model_dump()) if m.mla else None,
        mamba=MambaSpec(**m.mamba.model_dump()) if m.mamba else None,
    )


def _default_head_dim(hidden: int, heads: int, where: str) -> int:
    if hidden % heads:
        raise SpecError(f"{where}: hidden_size ({hidden}) must be divisible by num_attention_heads ({heads}), or give head_dim")
    return hidden // heads
