"""Readers of the transformer families of config.json: dense (GPT-2, Llama and its kin, Gemma) and
mixture-of-experts (Mixtral, Qwen3-MoE, DeepSeek-V2/V3, gpt-oss), each onto a ModelSpec.

Called by :func:`autopar.io.hf_config.from_hf_config`, which says what each family leaves out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autopar.io.hf_common import _Config
from autopar.spec.families import MLASpec, MoESpec
from autopar.spec.model import ModelSpec

if TYPE_CHECKING:
    from autopar.io import hf_schema as hf


# --- dense transformers ------------------------------------------------------------


def _gpt2(c: _Config) -> ModelSpec:
    k: hf.Gpt2 = c.keys
    hidden, heads = k.n_embd, k.n_head
    return c.spec(
        layers=k.n_layer,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=c.head_dim(hidden, heads, None),
        ffn_hidden_size=k.n_inner or 4 * hidden,
        ffn_activation="gelu",
        vocab_size=k.vocab_size,
        max_seq_len=k.n_positions,
        tie_embeddings=k.tie_word_embeddings,
    )


def _attention(c: _Config) -> dict[str, Any]:
    """The Llama-style attention and stack keys shared by most families."""
    k: hf.Llama = c.keys
    hidden, heads = k.hidden_size, k.num_attention_heads
    return {
        "layers": k.num_hidden_layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": k.num_key_value_heads or heads,
        "head_dim": c.head_dim(hidden, heads, k.head_dim),
        "vocab_size": k.vocab_size,
        "max_seq_len": k.max_position_embeddings,
        "tie_embeddings": k.tie_word_embeddings,
    }


def _gemma(c: _Config) -> ModelSpec:
    """Gemma 2 and the Gemma 3 text stack: a gated GELU MLP (gate, up, down), costed as SwiGLU's three matrices."""
    k: hf.Gemma2 = c.keys
    c.activation("hidden_activation", k.hidden_activation)  # refused if unknown
    return c.spec(ffn_hidden_size=k.intermediate_size, ffn_activation="swiglu", **_attention(c))


def _llama_like(c: _Config) -> ModelSpec:
    k: hf.Llama = c.keys
    fields = _attention(c)
    act = c.activation("hidden_act", k.hidden_act)
    if c.kind == "gpt_neox":  # GPT-NeoX: plain GELU MLP, head width always hidden / heads
        act = "gelu"
        hidden, heads = fields["hidden_size"], fields["num_attention_heads"]
        if hidden % heads == 0:
            fields["head_dim"] = hidden // heads
    return c.spec(ffn_hidden_size=k.intermediate_size, ffn_activation=act, **fields)


# --- mixture of experts ------------------------------------------------------------


def _mixtral(c: _Config) -> ModelSpec:
    k: hf.Mixtral = c.keys
    width = k.intermediate_size  # every layer is MoE: this is the expert width
    moe = c.build("moe", lambda: MoESpec(num_experts=k.num_local_experts, top_k=k.num_experts_per_tok, expert_ffn_hidden_size=width))
    return c.spec(ffn_hidden_size=width, ffn_activation=c.activation("hidden_act", k.hidden_act), moe=moe, **_attention(c))


def _qwen3_moe(c: _Config) -> ModelSpec:
    k: hf.Qwen3Moe = c.keys
    fields = _attention(c)
    layers = fields["layers"]
    # transformers' Qwen3MoeDecoderLayer: sparse iff not in mlp_only_layers and (i + 1) % step == 0.
    mlp_only = set(k.mlp_only_layers or [])
    dense = [i for i in range(layers) if i in mlp_only or (i + 1) % k.decoder_sparse_step]
    if dense != list(range(len(dense))):
        raise c.fail(
            "mlp_only_layers", f"dense layers {dense} are not a prefix of the stack; autopar models dense layers only before the MoE ones"
        )
    width = k.moe_intermediate_size
    ffn = c.need(k.intermediate_size, "intermediate_size") if dense else width  # dense width, or unused
    moe = c.build(
        "moe",
        lambda: MoESpec(
            num_experts=k.num_experts, top_k=k.num_experts_per_tok, expert_ffn_hidden_size=width, first_dense_layers=len(dense)
        ),
    )
    return c.spec(ffn_hidden_size=ffn, ffn_activation=c.activation("hidden_act", k.hidden_act), moe=moe, **fields)


def _deepseek(c: _Config) -> ModelSpec:
    """DeepSeek-V2/V3: multi-head latent attention, shared + routed experts, leading dense layers."""
    k: hf.DeepSeek = c.keys
    mla = c.build(
        "mla",
        lambda: MLASpec(
            q_lora_rank=k.q_lora_rank,
            kv_lora_rank=k.kv_lora_rank,
            qk_nope_head_dim=k.qk_nope_head_dim,
            qk_rope_head_dim=k.qk_rope_head_dim,
            v_head_dim=k.v_head_dim,
        ),
    )
    if k.moe_layer_freq != 1:
        raise c.fail("moe_layer_freq", "only 1 (every layer after first_k_dense_replace is MoE) is supported")
    width, shared = k.moe_intermediate_size, k.n_shared_experts
    moe = c.build(
        "moe",
        lambda: MoESpec(
            num_experts=k.n_routed_experts,
            top_k=k.num_experts_per_tok,
            expert_ffn_hidden_size=width,
            shared_experts=shared,
            shared_expert_ffn_hidden_size=width if shared else 0,
            first_dense_layers=k.first_k_dense_replace,
            # group-limited routing: experts sit in n_group groups (one per node when EP spans that many
            # nodes) and a token reaches at most topk_group of them
            max_nodes_per_token=k.topk_group if k.n_group is not None else 0,
        ),
    )
    return c.spec(
        layers=k.num_hidden_layers,
        hidden_size=k.hidden_size,
        num_attention_heads=k.num_attention_heads,
        num_kv_heads=k.num_attention_heads,  # MLA expands the latent to a key and a value per head
        head_dim=mla.v_head_dim,
        ffn_hidden_size=k.intermediate_size,
        ffn_activation=c.activation("hidden_act", k.hidden_act),
        vocab_size=k.vocab_size,
        max_seq_len=k.max_position_embeddings,
        tie_embeddings=k.tie_word_embeddings,
        mla=mla,
        moe=moe,
    )


def _gpt_oss(c: _Config) -> ModelSpec:
    """gpt-oss: every layer MoE; banded/full alternation read as full attention, sinks and biases ignored."""
    k: hf.GptOss = c.keys
    legacy = k.num_experts_per_tok is None and k.experts_per_token  # older gpt-oss configs
    top_k = legacy or c.need(k.num_experts_per_tok, "num_experts_per_tok")
    moe = c.build("moe", lambda: MoESpec(num_experts=k.num_local_experts, top_k=top_k, expert_ffn_hidden_size=k.intermediate_size))
    return c.spec(ffn_hidden_size=k.intermediate_size, ffn_activation=c.activation("hidden_act", k.hidden_act), moe=moe, **_attention(c))
