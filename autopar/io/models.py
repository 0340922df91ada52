"""Model loaders: a preset name, a YAML spec (format in DESIGN.md), a Hugging Face
config.json, or a folder holding one; all become a :class:`ModelSpec`."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.hf_config import from_hf_config
from autopar.io.strict import Fields, did_you_mean, load_mapping, named
from autopar.spec.families import MambaSpec, MLASpec, MoESpec
from autopar.spec.limits import MAX_CAPACITY_FACTOR, MODEL_KEY_LIMITS
from autopar.spec.model import ACTIVATIONS, NORMS, POSITIONS, ModelSpec


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
    """Build a spec from the DESIGN.md YAML format; unknown keys are errors."""
    f = Fields(data, f"{where}: ", limits=MODEL_KEY_LIMITS)
    heads = f.integer("num_attention_heads")
    hidden = f.integer("hidden_size")
    moe, mla, mamba = _moe(f), _mla(f), _mamba(f)
    seq_len = f.integer("seq_len")
    spec = ModelSpec(
        name=f.text("name"),
        layers=f.integer("layers"),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=f.integer("num_kv_heads", heads),
        head_dim=f.integer("head_dim", _default_head_dim(hidden, heads, where)),
        ffn_hidden_size=f.integer("ffn_hidden_size"),
        ffn_activation=f.text("ffn_activation", "swiglu", choices=ACTIVATIONS),
        vocab_size=f.integer("vocab_size"),
        seq_len=seq_len,
        max_seq_len=f.integer("max_seq_len", seq_len),
        tie_embeddings=f.flag("tie_embeddings", False),
        source=f.text("source", where),
        dropout=f.flag("dropout", False),
        norm=f.text("norm", "rmsnorm", choices=NORMS),
        position_embedding=f.text("position_embedding", "rope", choices=POSITIONS),
        rope_base=f.number("rope_base", 10000.0),
        rope_scaling=f.number("rope_scaling", 1.0),
        linear_bias=f.flag("linear_bias", False),
        qk_norm=f.flag("qk_norm", False),
        moe=moe,
        mla=mla,
        mamba=mamba,
    )
    f.finish()
    return spec


def _section(f: Fields, key: str) -> Fields | None:
    data = f.mapping(key, required=False)
    return None if data is None else Fields(data, f.prefix(key), limits=MODEL_KEY_LIMITS)


def _moe(f: Fields) -> MoESpec | None:
    g = _section(f, "moe")
    if g is None:
        return None
    spec = MoESpec(
        num_experts=g.integer("num_experts"),
        top_k=g.integer("top_k"),
        expert_ffn_hidden_size=g.integer("expert_ffn_hidden_size"),
        shared_experts=g.integer("shared_experts", 0, minimum=0),
        shared_expert_ffn_hidden_size=g.integer("shared_expert_ffn_hidden_size", 0, minimum=0),
        first_dense_layers=g.integer("first_dense_layers", 0, minimum=0),
        capacity_factor=g.number("capacity_factor", 1.0, maximum=MAX_CAPACITY_FACTOR),
        max_nodes_per_token=g.integer("max_nodes_per_token", 0, minimum=0),
    )
    g.finish()
    return spec


def _mla(f: Fields) -> MLASpec | None:
    g = _section(f, "mla")
    if g is None:
        return None
    spec = MLASpec(
        q_lora_rank=g.integer("q_lora_rank", 0, minimum=0),
        kv_lora_rank=g.integer("kv_lora_rank"),
        qk_nope_head_dim=g.integer("qk_nope_head_dim"),
        qk_rope_head_dim=g.integer("qk_rope_head_dim"),
        v_head_dim=g.integer("v_head_dim"),
    )
    g.finish()
    return spec


def _mamba(f: Fields) -> MambaSpec | None:
    g = _section(f, "mamba")
    if g is None:
        return None
    spec = MambaSpec(
        state_size=g.integer("state_size"),
        head_dim=g.integer("head_dim"),
        expand=g.integer("expand", 2),
        layer_pattern=g.text("layer_pattern"),
        num_groups=g.integer("num_groups", 8),
        conv_kernel=g.integer("conv_kernel", 4),
        chunk_size=g.integer("chunk_size", 128),
    )
    g.finish()
    return spec


def _default_head_dim(hidden: int, heads: int, where: str) -> int:
    if hidden % heads:
        raise SpecError(f"{where}: hidden_size ({hidden}) must be divisible by num_attention_heads ({heads}), or give head_dim")
    return hidden // heads
