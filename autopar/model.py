"""ModelSpec: the shape of the network, and its loaders.

A spec comes from a built-in preset name, a YAML file (format in DESIGN.md), or
a Hugging Face ``config.json``. All three become the same frozen value.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.families import KIND_PARTS, PATTERN_KINDS, MambaSpec, MLASpec, MoESpec
from autopar.spec_io import Fields, did_you_mean, load_mapping

ACTIVATIONS = ("swiglu", "gelu", "relu2")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer, as far as cost and memory are concerned."""

    name: str  # display name
    layers: int  # number of transformer blocks
    hidden_size: int  # model width h
    num_attention_heads: int  # query heads a
    num_kv_heads: int  # key/value heads (GQA groups); equals a for MHA
    head_dim: int  # per-head width d; h / a unless the spec says otherwise
    ffn_hidden_size: int  # MLP inner width f
    ffn_activation: str  # swiglu | gelu | relu2
    vocab_size: int  # V
    seq_len: int  # default training sequence length, tokens
    max_seq_len: int  # longest sequence the model accepts (position range), tokens
    tie_embeddings: bool  # output projection shares the embedding matrix
    source: str = ""  # citation for presets; file path for user specs
    dropout: bool = False  # hidden dropout after attention and MLP (GPT-3-era recipes); keeps a 1-byte mask each
    moe: MoESpec | None = None  # routed experts in place of the dense MLP
    mla: MLASpec | None = None  # multi-head latent attention in place of GQA
    mamba: MambaSpec | None = None  # Mamba-2 layers and the hybrid layer pattern

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_kv_heads:
            raise SpecError(
                f"{self.name}: num_attention_heads ({self.num_attention_heads}) must be divisible "
                f"by num_kv_heads ({self.num_kv_heads})"
            )
        if self.ffn_activation not in ACTIVATIONS:
            raise SpecError(f"{self.name}: ffn_activation must be one of {', '.join(ACTIVATIONS)}")
        if self.max_seq_len < self.seq_len:
            raise SpecError(f"{self.name}: max_seq_len ({self.max_seq_len}) is below seq_len ({self.seq_len})")
        if self.mamba is not None:
            pattern = self.mamba.layer_pattern
            if len(pattern) != self.layers:
                raise SpecError(f"{self.name}: mamba.layer_pattern has {len(pattern)} layers but layers is {self.layers}")
            if "E" in pattern and self.moe is None:
                raise SpecError(f"{self.name}: mamba.layer_pattern uses E (MoE) but the spec has no moe section")
            if self.mamba.inner(self.hidden_size) % self.mamba.head_dim:
                raise SpecError(f"{self.name}: mamba d_inner ({self.mamba.inner(self.hidden_size)}) must be divisible "
                                f"by mamba.head_dim ({self.mamba.head_dim})")
        if self.moe is not None and self.moe.first_dense_layers > self.layers:
            raise SpecError(f"{self.name}: moe.first_dense_layers ({self.moe.first_dense_layers}) exceeds layers ({self.layers})")

    # --- derived sizes ---------------------------------------------------------
    @property
    def q_width(self) -> int:
        """a * d: width of the query projection and of the attention output."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """kv_heads * d: width of each of the K and V projections."""
        return self.num_kv_heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of width f in the MLP: 3 for gated (SwiGLU), else 2."""
        return 3 if self.ffn_activation == "swiglu" else 2

    def family(self) -> str:
        """A short description: dense, MoE, MLA, Mamba or hybrid."""
        if self.mamba is not None:
            return "Mamba-2" if set(self.mamba.layer_pattern) == {"M"} else "hybrid Mamba-2"
        bits = ["MoE" if self.moe else "dense"]
        if self.mla:
            bits.append("MLA")
        elif self.num_kv_heads < self.num_attention_heads:
            bits.append("GQA")
        return " ".join(bits)

    def layer_kinds(self) -> tuple[str, ...]:
        """The kind of every layer, first to last (keys of families.KIND_PARTS)."""
        if self.mamba is not None:
            return tuple(PATTERN_KINDS[c] for c in self.mamba.layer_pattern)
        if self.moe is not None:
            dense = self.moe.first_dense_layers
            return ("dense",) * dense + ("moe",) * (self.layers - dense)
        return ("dense",) * self.layers

    def attention_params(self) -> int:
        h = self.hidden_size
        if self.mla is not None:
            return self.mla.params(h, self.num_attention_heads)
        return h * self.q_width + 2 * h * self.kv_width + self.q_width * h

    def mlp_params(self) -> int:
        return self.mlp_matrices * self.hidden_size * self.ffn_hidden_size

    def part_params(self, part: str, *, active: bool = False) -> int:
        """Matmul weights of one sub-layer (attn, mlp, moe, mamba); `active`: those one token uses."""
        if part == "attn":
            return self.attention_params()
        if part == "mlp":
            return self.mlp_params()
        if part == "moe" and self.moe is not None:
            h, mats = self.hidden_size, self.mlp_matrices
            return self.moe.active_params(h, mats) if active else self.moe.params(h, mats)
        if part == "mamba" and self.mamba is not None:
            return self.mamba.params(self.hidden_size)
        raise SpecError(f"{self.name}: no {part} sub-layer in this model")

    def kind_params(self, kind: str) -> int:
        """Weights of one layer of `kind`, including one norm per sub-layer."""
        return sum(self.part_params(p) + self.hidden_size for p in KIND_PARTS[kind])

    def layer_params(self) -> int:
        """Weights of the largest layer kind (the uniform block of a dense model)."""
        return max(self.kind_params(k) for k in set(self.layer_kinds()))

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def output_params(self) -> int:
        """Untied output projection (0 when tied) plus the final norm."""
        return (0 if self.tie_embeddings else self.vocab_size * self.hidden_size) + self.hidden_size

    def total_params(self) -> int:
        return sum(self.kind_params(k) for k in self.layer_kinds()) + self.embedding_params() + self.output_params()

    def active_params(self) -> int:
        """Parameters one token touches (all of them for a dense model)."""
        total = self.total_params()
        if self.moe is None:
            return total
        moe_layers = sum(1 for k in self.layer_kinds() if k in ("moe", "moe_mlp"))
        return total - moe_layers * (self.part_params("moe") - self.part_params("moe", active=True))


# --- loaders -------------------------------------------------------------------


def preset_names() -> list[str]:
    """Names of the built-in model presets."""
    root = resources.files("autopar") / "presets"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_model(ref: str) -> ModelSpec:
    """A preset name, a YAML spec, a Hugging Face config.json, or a folder holding one."""
    path = Path(ref)
    if path.is_dir():
        path = path / "config.json"
        if not path.exists():
            raise SpecError(f"{ref}: folder has no config.json")
    if path.suffix.lower() == ".json":
        return from_hf_config(load_mapping(path), where=str(path))
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return from_yaml_mapping(load_mapping(path), where=str(path))
    names = preset_names()
    if ref in names:
        preset = resources.files("autopar") / "presets" / f"{ref}.yaml"
        with resources.as_file(preset) as p:
            return from_yaml_mapping(load_mapping(p), where=f"preset {ref}")
    raise SpecError(
        f"unknown model '{ref}'{did_you_mean(ref, names)}: give a preset name (see `autopar models`), "
        "a model .yaml file or a Hugging Face config.json"
    )


def from_yaml_mapping(data: dict[str, Any], *, where: str) -> ModelSpec:
    """Build a spec from the DESIGN.md YAML format; unknown keys are errors."""
    f = Fields(data, f"{where}: ")
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
        moe=moe,
        mla=mla,
        mamba=mamba,
    )
    f.finish()
    return spec


def _section(f: Fields, key: str) -> Fields | None:
    data = f.mapping(key, required=False)
    return None if data is None else Fields(data, f.prefix(key))


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
        capacity_factor=g.number("capacity_factor", 1.0),
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


def from_hf_config(data: dict[str, Any], *, where: str) -> ModelSpec:
    """Read a Hugging Face config.json; the readers live in autopar.hf_config (imported here lazily,
    since that module imports this one)."""
    from autopar.hf_config import from_hf_config as read

    return read(data, where=where)
