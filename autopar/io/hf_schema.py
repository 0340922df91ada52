"""Hugging Face ``config.json`` keys autopar reads, as pydantic models (one per family).

A config.json carries many keys that do not matter for cost (dropout, token ids,
quantization), so unknown keys are ignored, unlike in the strict YAML formats of
:mod:`autopar.io.schema`; a null is read as an absent key. Every key read is
typed and bounded as there (:mod:`autopar.spec.limits`): ints may be written as
integral floats, nothing else is coerced. Keys some configs need and others not
(the MoE keys of a Nemotron-H pattern without MoE layers) are optional here and
required by the reader (:mod:`autopar.io.hf_config`).

pydantic is imported here only, and this module only when a config.json is read.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from autopar.io.schema import (
    Experts,
    Experts0,
    Heads,
    Layers,
    Layers0,
    Small,
    Small0,
    Text,
    Tokens,
    Vocab,
    Width,
    Width0,
    validate,
)
from autopar.spec import limits as lim

__all__ = [
    "READERS_SCHEMA",
    "AttnCfg",
    "Common",
    "DeepSeek",
    "Gemma2",
    "Gemma3Text",
    "Gpt2",
    "GptOss",
    "Kind",
    "Llama",
    "Mamba2",
    "MambaSsm",
    "Mixtral",
    "NemotronH",
    "Qwen3Moe",
    "SsmCfg",
    "validate",
]

RopeTheta = Annotated[float, Field(ge=1, le=lim.MAX_ROPE_BASE, allow_inf_nan=False)]
RopeFactor = Annotated[float, Field(gt=0, le=lim.MAX_ROPE_SCALING, allow_inf_nan=False)]  # >= 1 for llama3 (reader)
Indices = Annotated[list[Annotated[int, Field(ge=0, le=lim.MAX_LAYERS)]], Field(max_length=lim.MAX_LAYERS)]


class _HF(BaseModel):
    """Unknown keys ignored, nulls absent, no coercion but integral floats to ints."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_absent(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, dict) else data


class Kind(_HF):
    model_type: Text


class Rope(_HF):
    """rope_scaling, or newer transformers' rope_parameters (which also nests rope_theta)."""

    rope_type: Text | None = None
    type: Text | None = None  # older configs
    factor: RopeFactor | None = None
    rope_theta: RopeTheta | None = None


class Common(_HF):
    """Keys read for every transformers model type (arch(): norm, rotary base, biases)."""

    hidden_act: Text = "silu"
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    rope_theta: RopeTheta = 10000.0
    rope_parameters: Rope | None = None
    rope_scaling: Rope | None = None


class Gpt2(Common):
    n_embd: Width
    n_head: Heads
    n_layer: Layers
    n_inner: Width | None = None  # default 4 x n_embd
    vocab_size: Vocab
    n_positions: Tokens
    tie_word_embeddings: bool = True


class _Attention(Common):
    """The Llama-style attention and stack keys most families share."""

    hidden_size: Width
    num_attention_heads: Heads
    num_key_value_heads: Heads | None = None  # default: num_attention_heads
    head_dim: Width | None = None  # default: hidden_size / num_attention_heads
    num_hidden_layers: Layers
    vocab_size: Vocab
    max_position_embeddings: Tokens
    # sliding-window attention, as each family states it (hf_common._windows)
    sliding_window: Tokens | None = None
    layer_types: Annotated[list[Text], Field(max_length=lim.MAX_LAYERS)] | None = None
    use_sliding_window: bool = False  # qwen2 / qwen3: windows on the layers from max_window_layers
    max_window_layers: Layers0 | None = None
    sliding_window_pattern: Small | None = None  # gemma3 (before layer_types): one full layer in this many


class Llama(_Attention):
    intermediate_size: Width


class Gemma2(Llama):
    """transformers Gemma2Config: a gated GELU MLP, tied embeddings, every other layer windowed."""

    hidden_activation: Text = "gelu_pytorch_tanh"
    tie_word_embeddings: bool = True
    head_dim: Width = 256
    sliding_window: Tokens = 4096


class Gemma3Text(Gemma2):
    """transformers Gemma3TextConfig, whose defaults a multimodal config's text_config leaves out."""

    num_attention_heads: Heads = 8
    num_key_value_heads: Heads = 4
    vocab_size: Vocab = 262208
    max_position_embeddings: Tokens = 131072
    rope_theta: RopeTheta = 1_000_000.0


class Mixtral(_Attention):
    intermediate_size: Width  # the expert width: every layer is MoE
    num_local_experts: Experts
    num_experts_per_tok: Small


class Qwen3Moe(_Attention):
    num_experts: Experts
    num_experts_per_tok: Small
    moe_intermediate_size: Width
    intermediate_size: Width | None = None  # required when some layers are dense
    mlp_only_layers: Indices | None = None
    decoder_sparse_step: Small = 1


class DeepSeek(Common):
    hidden_size: Width
    num_attention_heads: Heads
    num_hidden_layers: Layers
    vocab_size: Vocab
    max_position_embeddings: Tokens
    intermediate_size: Width
    q_lora_rank: Width0 = 0  # null in V2-Lite: direct query projection
    kv_lora_rank: Width
    qk_nope_head_dim: Width
    qk_rope_head_dim: Width
    v_head_dim: Width
    moe_layer_freq: Small = 1
    moe_intermediate_size: Width
    n_shared_experts: Experts0 = 0
    n_routed_experts: Experts
    num_experts_per_tok: Small
    first_k_dense_replace: Layers0 = 0
    n_group: Small | None = None
    topk_group: Small0 = 0


class GptOss(_Attention):
    intermediate_size: Width
    num_local_experts: Experts
    num_experts_per_tok: Small | None = None
    experts_per_token: Small | None = None  # older gpt-oss configs


class Mamba2(Common):
    hidden_size: Width
    num_hidden_layers: Layers
    vocab_size: Vocab
    head_dim: Width = 64
    expand: Small = 2
    num_heads: Heads | None = None
    state_size: Small = 128
    n_groups: Small = 8
    conv_kernel: Small = 4
    chunk_size: Small = 256


class NemotronH(Common):
    hidden_size: Width
    num_hidden_layers: Layers
    num_attention_heads: Heads
    num_key_value_heads: Heads | None = None
    attention_head_dim: Width | None = None
    head_dim: Width | None = None
    hybrid_override_pattern: Text
    mamba_num_heads: Heads
    mamba_head_dim: Width
    intermediate_size: Width
    mlp_hidden_act: Text | None = None
    hidden_act: Text = "relu2"
    vocab_size: Vocab
    max_position_embeddings: Tokens
    # MoE (E) layers: required when the pattern has them
    n_routed_experts: Experts | None = None
    num_experts_per_tok: Small | None = None
    moe_intermediate_size: Width | None = None
    moe_shared_expert_intermediate_size: Width0 = 0
    # Mamba-2 keys under their attribute names, or the constructor arguments' (mamba_*)
    ssm_state_size: Small | None = None
    mamba_d_state: Small = 128
    n_groups: Small | None = None
    mamba_n_groups: Small = 8
    conv_kernel: Small | None = None
    mamba_d_conv: Small = 4
    chunk_size: Small | None = None
    mamba_chunk_size: Small = 256


class SsmCfg(_HF):
    layer: Text = "Mamba1"
    d_state: Small = 128
    headdim: Width = 64
    expand: Small = 2
    ngroups: Small = 1
    d_conv: Small = 4
    chunk_size: Small = 256


class AttnCfg(_HF):
    num_heads: Heads | None = None  # required when attn_layer_idx names a layer
    num_heads_kv: Heads | None = None
    head_dim: Width | None = None


class MambaSsm(_HF):
    """A state-spaces ``mamba_ssm`` MambaConfig."""

    d_model: Width
    n_layer: Layers
    vocab_size: Vocab
    ssm_cfg: SsmCfg = SsmCfg()
    attn_layer_idx: Indices | None = None
    attn_cfg: AttnCfg | None = None
    d_intermediate: Width0 = 0
    pad_vocab_size_multiple: Small = 8
    tie_embeddings: bool = True


READERS_SCHEMA: dict[str, type[_HF]] = {
    "gpt2": Gpt2,
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gpt_neox", "phi3"), Llama),
    "gemma2": Gemma2,
    "gemma3_text": Gemma3Text,
    "mixtral": Mixtral,
    "qwen3_moe": Qwen3Moe,
    "deepseek_v2": DeepSeek,
    "deepseek_v3": DeepSeek,
    "gpt_oss": GptOss,
    "mamba2": Mamba2,
    "nemotron_h": NemotronH,
    "mamba_ssm": MambaSsm,
}
