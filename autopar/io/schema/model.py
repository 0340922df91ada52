"""A model spec YAML (format in DESIGN.md and the README)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StringConstraints

from autopar.io.schema.fields import (
    Capacity,
    Experts,
    Experts0,
    Heads,
    Layers,
    Layers0,
    RopeBase,
    RopeScaling,
    Small,
    Small0,
    Text,
    Tokens,
    Tokens0,
    Vocab,
    Width,
    Width0,
    _Strict,
)
from autopar.spec import limits as lim
from autopar.spec.model import NORMS, POSITIONS


class MoEFile(_Strict):
    num_experts: Experts
    top_k: Small
    expert_ffn_hidden_size: Width
    shared_experts: Experts0 = 0
    shared_expert_ffn_hidden_size: Width0 = 0
    first_dense_layers: Layers0 = 0
    capacity_factor: Capacity = 1.0
    max_nodes_per_token: Small0 = 0


class MLAFile(_Strict):
    q_lora_rank: Width0 = 0
    kv_lora_rank: Width
    qk_nope_head_dim: Width
    qk_rope_head_dim: Width
    v_head_dim: Width
    index_head_dim: Width0 = 0  # DeepSeek Sparse Attention indexer key width (GLM-5); 0: none


class MambaFile(_Strict):
    state_size: Small
    head_dim: Width
    expand: Small = 2
    layer_pattern: Annotated[str, StringConstraints(min_length=1, max_length=lim.MAX_LAYERS)]
    num_groups: Small = 8
    conv_kernel: Small = 4
    chunk_size: Small = 128
    ssm_state_dtype: Literal["bf16", "fp32"] = "bf16"  # the SSM state an engine keeps per request (config mamba_ssm_dtype)


class ModelFile(_Strict):
    """A model spec YAML (format in DESIGN.md and the README)."""

    name: Text
    layers: Layers
    hidden_size: Width
    num_attention_heads: Heads
    num_kv_heads: Heads | None = None  # default: num_attention_heads (MHA)
    head_dim: Width | None = None  # default: hidden_size / num_attention_heads
    ffn_hidden_size: Width
    ffn_activation: Literal["swiglu", "gelu", "relu2"] = "swiglu"
    vocab_size: Vocab
    seq_len: Tokens
    max_seq_len: Tokens | None = None  # default: seq_len
    tie_embeddings: bool = False
    source: Text | None = None  # a citation; default: the file's path
    dropout: bool = False
    norm: Literal["rmsnorm", "layernorm", "layernorm1p"] = "rmsnorm"
    position_embedding: Literal["rope", "learned", "alibi", "none"] = "rope"
    rope_base: RopeBase = 10000.0
    rope_scaling: RopeScaling = 1.0  # Llama 3.1 rotary frequency scaling (1 = none)
    linear_bias: bool = False
    qk_norm: bool = False
    sliding_window: Tokens0 = 0  # tokens a windowed attention layer sees (0: none)
    window_layers: Layers0 = 0  # how many attention layers have the window
    kv_dtype_default: Literal["bf16", "fp8"] | None = None  # what a serving engine's KV dtype auto reads (default bf16)
    moe: MoEFile | None = None
    mla: MLAFile | None = None
    mamba: MambaFile | None = None


assert ModelFile.model_fields["norm"].annotation.__args__ == NORMS  # type: ignore[union-attr]
assert ModelFile.model_fields["position_embedding"].annotation.__args__ == POSITIONS  # type: ignore[union-attr]
