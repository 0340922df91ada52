"""Readers of the Mamba-2 families of config.json: transformers' Mamba2Config, NVIDIA Nemotron-H
(hybrid Mamba-2, attention, MLP and MoE layers) and state-spaces ``mamba_ssm`` configs.

Called by :func:`autopar.io.hf_config.from_hf_config`, which says what each family leaves out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopar.io.hf_common import _Config
from autopar.io.reading import shown
from autopar.spec.families import PATTERN_KINDS, MambaSpec, MoESpec
from autopar.spec.model import ModelSpec

if TYPE_CHECKING:
    from autopar.io import hf_schema as hf

_SSM_MAX_SEQ = 1 << 20  # an SSM has no position range; the longest sequence autopar models
_SSM_SEQ_LEN = 4096  # default training sequence length for a pure SSM config (which states none)


# --- Mamba-2 and hybrids -----------------------------------------------------------


def _expand(c: _Config, key: str, inner: int, hidden: int) -> int:
    if inner % hidden:
        raise c.fail(
            key,
            f"Mamba-2 inner width {inner} is not an integer multiple of hidden_size ({hidden}); "
            "autopar models d_inner = expand x hidden_size with an integer expand",
        )
    return inner // hidden


def _ssm_only(hidden: int) -> dict[str, int]:
    """Attention/MLP widths for a stack without attention or MLP: unused, but the spec needs valid values."""
    heads = hidden // 64 if hidden % 64 == 0 else 1
    return {"num_attention_heads": heads, "num_kv_heads": heads, "head_dim": hidden // heads, "ffn_hidden_size": 4 * hidden}


def _pattern(c: _Config, key: str, pattern: str, layers: int) -> str:
    bad = sorted(set(pattern) - set(PATTERN_KINDS))
    if bad:
        raise c.fail(key, f"unknown character(s) {shown(''.join(bad))}; expected M (Mamba), * (attention), - (MLP), E (MoE)")
    if len(pattern) != layers:
        raise c.fail(key, f"has {len(pattern)} layers but num_hidden_layers is {layers}")
    return pattern


def _mamba2(c: _Config) -> ModelSpec:
    """transformers' Mamba2Config: a pure Mamba-2 stack."""
    k: hf.Mamba2 = c.keys
    hidden, layers, head_dim, expand = k.hidden_size, k.num_hidden_layers, k.head_dim, k.expand
    if k.num_heads is not None and k.num_heads * head_dim != expand * hidden:
        raise c.fail(
            "num_heads", f"num_heads x head_dim ({k.num_heads} x {head_dim}) must equal expand x hidden_size ({expand} x {hidden})"
        )
    mamba = c.build(
        "mamba",
        lambda: MambaSpec(
            state_size=k.state_size,
            head_dim=head_dim,
            expand=expand,
            layer_pattern="M" * layers,
            num_groups=k.n_groups,
            conv_kernel=k.conv_kernel,
            chunk_size=k.chunk_size,
        ),
    )
    return c.spec(
        layers=layers,
        hidden_size=hidden,
        ffn_activation="swiglu",
        vocab_size=k.vocab_size,
        seq_len=_SSM_SEQ_LEN,
        max_seq_len=_SSM_MAX_SEQ,
        tie_embeddings=k.tie_word_embeddings,
        mamba=mamba,
        **_ssm_only(hidden),
    )


def _nemotron_h(c: _Config) -> ModelSpec:
    """NVIDIA Nemotron-H: Mamba-2 (M), attention (*), squared-ReLU MLP (-) and MoE (E) layers by pattern."""
    k: hf.NemotronH = c.keys
    hidden, layers, heads = k.hidden_size, k.num_hidden_layers, k.num_attention_heads
    pattern = _pattern(c, "hybrid_override_pattern", k.hybrid_override_pattern, layers)
    expand = _expand(c, "mamba_num_heads", k.mamba_num_heads * k.mamba_head_dim, hidden)
    act_key = "mlp_hidden_act" if k.mlp_hidden_act is not None else "hidden_act"
    moe = None
    if "E" in pattern:
        shared_width = k.moe_shared_expert_intermediate_size
        moe = c.build(
            "moe",
            lambda: MoESpec(
                num_experts=c.need(k.n_routed_experts, "n_routed_experts"),
                top_k=c.need(k.num_experts_per_tok, "num_experts_per_tok"),
                expert_ffn_hidden_size=c.need(k.moe_intermediate_size, "moe_intermediate_size"),
                shared_experts=1 if shared_width else 0,
                shared_expert_ffn_hidden_size=shared_width,
            ),
        )
    # keys under their attribute names, or under the constructor arguments' (mamba_*)
    mamba = c.build(
        "mamba",
        lambda: MambaSpec(
            state_size=k.ssm_state_size or k.mamba_d_state,
            head_dim=k.mamba_head_dim,
            expand=expand,
            layer_pattern=pattern,
            num_groups=k.n_groups or k.mamba_n_groups,
            conv_kernel=k.conv_kernel or k.mamba_d_conv,
            chunk_size=k.chunk_size or k.mamba_chunk_size,
        ),
    )
    head_key = "attention_head_dim" if k.attention_head_dim is not None else "head_dim"
    return c.spec(
        layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=k.num_key_value_heads or heads,
        head_dim=c.head_dim(hidden, heads, k.attention_head_dim or k.head_dim, key=head_key),
        ffn_hidden_size=k.intermediate_size,
        ffn_activation=c.activation(act_key, k.mlp_hidden_act or k.hidden_act),
        vocab_size=k.vocab_size,
        max_seq_len=k.max_position_embeddings,
        tie_embeddings=k.tie_word_embeddings,
        mamba=mamba,
        moe=moe,
    )


def _mamba_ssm(c: _Config) -> ModelSpec:
    """A state-spaces ``mamba_ssm`` config (MambaConfig: d_model, n_layer, ssm_cfg, ...), as on state-spaces/mamba2-*."""
    k: hf.MambaSsm = c.keys
    ssm = k.ssm_cfg
    if ssm.layer != "Mamba2":
        raise c.fail("ssm_cfg.layer", f"only Mamba2 mixers are supported, got {shown(ssm.layer)}")
    hidden, n_layer = k.d_model, k.n_layer
    attn_idx = k.attn_layer_idx or []
    if any(i >= n_layer for i in attn_idx):
        raise c.fail("attn_layer_idx", f"expected layer indices below n_layer ({n_layer}), got {shown(attn_idx)}")
    mlp = k.d_intermediate
    # mamba_ssm Block: a mixer (Mamba2 or attention), then a gated MLP when d_intermediate > 0.
    pattern = "".join(("*" if i in attn_idx else "M") + ("-" if mlp else "") for i in range(n_layer))
    mamba = c.build(
        "mamba",
        lambda: MambaSpec(
            state_size=ssm.d_state,
            head_dim=ssm.headdim,
            expand=ssm.expand,
            layer_pattern=pattern,
            num_groups=ssm.ngroups,
            conv_kernel=ssm.d_conv,
            chunk_size=ssm.chunk_size,
        ),
    )
    widths = _ssm_only(hidden)
    if attn_idx:
        attn = k.attn_cfg or hf_attn_cfg()
        heads = c.need(attn.num_heads, "attn_cfg.num_heads")
        widths.update(
            num_attention_heads=heads,
            num_kv_heads=attn.num_heads_kv or heads,
            head_dim=c.head_dim(hidden, heads, attn.head_dim, key="attn_cfg.head_dim"),
        )
    if mlp:
        widths["ffn_hidden_size"] = mlp
    multiple = k.pad_vocab_size_multiple  # the embedding matrix is padded up to this multiple
    vocab = -(-k.vocab_size // multiple) * multiple
    return c.spec(
        layers=len(pattern),
        hidden_size=hidden,
        ffn_activation="swiglu",
        vocab_size=vocab,
        seq_len=_SSM_SEQ_LEN,
        max_seq_len=_SSM_MAX_SEQ,
        tie_embeddings=k.tie_embeddings,
        mamba=mamba,
        **widths,
    )


def hf_attn_cfg() -> hf.AttnCfg:
    from autopar.io.hf_schema import AttnCfg

    return AttnCfg()
