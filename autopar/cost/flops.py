"""FLOPs and shapes of the work in one transformer block, per rank.

Conventions:
- A GEMM of (m x k) @ (k x n) costs 2*m*n*k FLOPs. Its backward costs two GEMMs of
  the same FLOPs (input gradient and weight gradient), so backward = 2 x forward.
- Causal flash attention forward executes 4*b*s_q*s_kv*a*d FLOPs halved for the
  mask; its backward executes 2.5 x forward (FlashAttention-2, Dao 2023, sec. 4.1
  benchmark convention: backward recomputes the scores).
- Model FLOPs for MFU follow PaLM (Chowdhery et al. 2022, appendix B): per token
  6*N + 12*L*a*d*s, N the weights that take part in matmuls (blocks + logits),
  attention counted in full (not halved for causality), recomputation not counted.
  For dense models this equals Megatron-Core r0.8's num_floating_point_operations
  (megatron/training/training.py), which NVIDIA's published MFU figures use.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.model import ModelSpec

FLASH_BWD_OVER_FWD = 2.5  # FlashAttention-2 benchmark convention, sec. 4.1


@dataclass(frozen=True, slots=True, kw_only=True)
class Gemm:
    """One forward GEMM (m x k) @ (k x n) on one rank."""

    name: str  # which projection
    m: int  # rows: tokens on this rank
    n: int  # output features on this rank
    k: int  # reduction dimension on this rank

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


def block_gemms(model: ModelSpec, *, tokens: int, tp: int) -> tuple[Gemm, ...]:
    """Forward GEMMs of one dense block on one TP rank (Megatron column/row splits).

    QKV and the MLP input are column-parallel (output split by tp), the attention
    output and MLP output projections row-parallel (reduction split by tp).
    """
    h, f = model.hidden_size, model.ffn_hidden_size
    up = 2 * f if model.ffn_activation == "swiglu" else f
    return (
        Gemm(name="qkv", m=tokens, n=(model.q_width + 2 * model.kv_width) // tp, k=h),
        Gemm(name="attn_out", m=tokens, n=h, k=model.q_width // tp),
        Gemm(name="mlp_in", m=tokens, n=up // tp, k=h),
        Gemm(name="mlp_out", m=tokens, n=h, k=f // tp),
    )


def logits_gemm(model: ModelSpec, *, tokens: int, tp: int) -> Gemm:
    """The output projection onto the vocabulary (vocab-parallel over tp)."""
    return Gemm(name="logits", m=tokens, n=-(-model.vocab_size // tp), k=model.hidden_size)


def attention_fwd_flops(model: ModelSpec, *, seq_len: int, batch: int, tp: int, cp: int) -> float:
    """Executed forward FLOPs of causal attention on one rank.

    With CP and causal load balancing each rank holds s/cp queries that see, on
    average, half of the s keys: 4*b*(s/cp)*s*(a/tp)*d / 2.
    """
    heads = model.num_attention_heads / tp
    return 4.0 * batch * (seq_len / cp) * seq_len * heads * model.head_dim / 2.0


def matmul_params(model: ModelSpec) -> int:
    """Weights that take part in matmuls: every block's projections plus the logits layer."""
    return model.layers * (model.attention_params() + model.mlp_params()) + model.vocab_size * model.hidden_size


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """PaLM MFU convention: 6*N + 12*L*a*d*s (no recompute, attention not halved)."""
    return 6.0 * matmul_params(model) + 12.0 * model.layers * model.q_width * seq_len


def megatron_flops_per_iteration(*, batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 eq. (3): 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)).

    GPT with a 4h MLP, MHA, full activation recomputation counted (4 passes).
    """
    return 96.0 * batch * seq_len * layers * hidden**2 * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))
