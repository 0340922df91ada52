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

from autopar.spec.families import KIND_PARTS
from autopar.spec.model import ModelSpec

FLASH_BWD_OVER_FWD = 2.5  # FlashAttention-2 benchmark convention, sec. 4.1


@dataclass(frozen=True, slots=True, kw_only=True)
class Gemm:
    """A forward GEMM (m x k) @ (k x n) on one rank, `count` times (grouped experts)."""

    name: str  # which projection
    m: float  # rows: tokens on this rank (fractional for an expert's average share)
    n: int  # output features on this rank
    k: int  # reduction dimension on this rank
    count: int = 1  # how many such GEMMs (local experts)

    @property
    def flops(self) -> float:
        """FLOPs of one of them."""
        return 2.0 * self.m * self.n * self.k


def _up(model: ModelSpec, width: int) -> int:
    """Output width of an MLP input projection: gate and up for SwiGLU."""
    return 2 * width if model.ffn_activation == "swiglu" else width


def part_gemms(model: ModelSpec, part: str, *, tokens: float, tp: int) -> tuple[Gemm, ...]:
    """Forward GEMMs of one sub-layer on one TP rank (Megatron column/row splits).

    Column-parallel projections (QKV, MLP input, Mamba in_proj) split their
    output by tp, row-parallel ones (attention output, MLP output, out_proj)
    their reduction. MLA's down-projections are small and replicated on every TP
    rank. For an MoE this is the router and the shared experts; the routed
    experts are in expert_gemms().
    """
    h = model.hidden_size
    if part == "attn" and model.mla is not None:
        mla, a = model.mla, model.num_attention_heads
        q_in = mla.q_lora_rank or h
        gemms = [Gemm(name="q_down", m=tokens, n=mla.q_lora_rank, k=h)] if mla.q_lora_rank else []
        return (
            *gemms,
            Gemm(name="q_up", m=tokens, n=a * mla.qk_head_dim // tp, k=q_in),
            Gemm(name="kv_down", m=tokens, n=mla.kv_lora_rank + mla.qk_rope_head_dim, k=h),
            Gemm(name="kv_up", m=tokens, n=a * (mla.qk_nope_head_dim + mla.v_head_dim) // tp, k=mla.kv_lora_rank),
            Gemm(name="attn_out", m=tokens, n=h, k=a * mla.v_head_dim // tp),
        )
    if part == "attn":
        return (
            Gemm(name="qkv", m=tokens, n=(model.q_width + 2 * model.kv_width) // tp, k=h),
            Gemm(name="attn_out", m=tokens, n=h, k=model.q_width // tp),
        )
    if part == "mlp":
        f = model.ffn_hidden_size
        return (Gemm(name="mlp_in", m=tokens, n=_up(model, f) // tp, k=h), Gemm(name="mlp_out", m=tokens, n=h, k=f // tp))
    if part == "moe" and model.moe is not None:
        moe = model.moe
        router = Gemm(name="router", m=tokens, n=moe.num_experts, k=h)
        if not moe.shared_width:
            return (router,)
        w = moe.shared_width
        return (router, Gemm(name="shared_in", m=tokens, n=_up(model, w) // tp, k=h), Gemm(name="shared_out", m=tokens, n=h, k=w // tp))
    if part == "mamba" and model.mamba is not None:
        mamba = model.mamba
        return (
            Gemm(name="in_proj", m=tokens, n=mamba.in_proj_width(h) // tp, k=h),
            Gemm(name="out_proj", m=tokens, n=h, k=mamba.inner(h) // tp),
        )
    raise ValueError(f"{model.name} has no {part} sub-layer")


def block_gemms(model: ModelSpec, *, tokens: int, tp: int) -> tuple[Gemm, ...]:
    """Forward GEMMs of one dense block (attention + MLP) on one TP rank."""
    return part_gemms(model, "attn", tokens=tokens, tp=tp) + part_gemms(model, "mlp", tokens=tokens, tp=tp)


def expert_gemms(model: ModelSpec, *, tokens: float, ep: int, etp: int) -> tuple[Gemm, ...]:
    """Routed-expert GEMMs on one rank: E/ep local experts, each a (rows x h) @ (h x f/etp) pair.

    The EP group's ep*tokens tokens make top_k copies each, spread over E experts;
    the busiest expert gets capacity_factor times the mean. Grouped GEMMs run at
    the efficiency of one expert's size, which is what makes small experts slow.
    """
    moe = model.moe
    if moe is None:
        return ()
    rows = ep * tokens * moe.top_k * moe.capacity_factor / moe.num_experts
    local, f = moe.num_experts // ep, moe.expert_ffn_hidden_size
    return (
        Gemm(name="expert_in", m=rows, n=_up(model, f) // etp, k=model.hidden_size, count=local),
        Gemm(name="expert_out", m=rows, n=model.hidden_size, k=f // etp, count=local),
    )


def logits_gemm(model: ModelSpec, *, tokens: float, tp: int) -> Gemm:
    """The output projection onto the vocabulary (vocab-parallel over tp)."""
    return Gemm(name="logits", m=tokens, n=-(-model.vocab_size // tp), k=model.hidden_size)


def attention_head_width(model: ModelSpec) -> int:
    """d_qk + d_v per head: what QK^T and AV multiply over (2d for standard attention)."""
    return model.mla.qk_head_dim + model.mla.v_head_dim if model.mla else 2 * model.head_dim


def attention_fwd_flops(model: ModelSpec, *, seq_len: int, batch: int, tp: int, cp: int) -> float:
    """Executed forward FLOPs of causal attention on one rank.

    QK^T costs 2*s_q*s_k*d_qk per head and AV 2*s_q*s_k*d_v. With CP and causal
    load balancing each rank holds s/cp queries that see, on average, half of the
    s keys: 2*b*(s/cp)*s*(a/tp)*(d_qk + d_v) / 2 (= 4*b*s^2*a*d/2 for GQA/MHA).
    """
    heads = model.num_attention_heads / tp
    full = 2.0 * batch * (seq_len / cp) * seq_len * heads * attention_head_width(model) / 2.0
    return full * model.causal_attention_share(seq_len)  # sliding-window layers see at most the window


def ssd_scan_flops(model: ModelSpec, *, tokens: float, tp: int) -> float:
    """Forward FLOPs of the Mamba-2 chunked scan (SSD, Dao & Gu 2024 sec. 6) on one TP rank.

    Per token and head, with chunk Q, state N, head width P: the diagonal blocks
    cost 2Q(N + P) (C B^T within the chunk, then times X), the chunk states and
    their contribution to the output 4NP.
    """
    mamba = model.mamba
    if mamba is None:
        return 0.0
    q, n, p = mamba.chunk_size, mamba.state_size, mamba.head_dim
    heads = mamba.heads(model.hidden_size) / tp
    return tokens * heads * (2.0 * q * (n + p) + 4.0 * n * p)


def _matmul_part(model: ModelSpec, part: str) -> int:
    if part == "mamba" and model.mamba is not None:
        # the projections only: the time model prices the conv, dt, A, D and norm weights as memory
        # traffic (cost/compute.py _mamba), so counting them as 6N FLOPs would lift MFU past what it times
        return model.mamba.matmul_params(model.hidden_size)
    return model.part_params(part, active=True)


def matmul_params(model: ModelSpec) -> int:
    """Weights one token multiplies: active sub-layer projections plus the logits layer."""
    per_layer = sum(_matmul_part(model, p) for k in model.layer_kinds() for p in KIND_PARTS[k])
    return per_layer + model.vocab_size * model.hidden_size


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """PaLM MFU convention: 6*N_active + 6*s*a*(d_qk + d_v) per attention layer (no recompute, not halved;
    sliding-window layers over their window) + 3 x the SSD scan for Mamba layers."""
    kinds = model.layer_kinds()
    attn_layers = sum(1 for k in kinds if k in ("dense", "moe", "attention"))
    attention = 6.0 * attn_layers * model.num_attention_heads * attention_head_width(model) * seq_len
    attention *= model.causal_attention_share(seq_len)  # a windowed layer's work ends at its window
    scan = 3.0 * sum(1 for k in kinds if k == "mamba") * ssd_scan_flops(model, tokens=1, tp=1)
    return 6.0 * matmul_params(model) + attention + scan


def megatron_flops_per_iteration(*, batch: int, seq_len: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 eq. (3): 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)).

    GPT with a 4h MLP, MHA, full activation recomputation counted (4 passes).
    """
    return 96.0 * batch * seq_len * layers * hidden**2 * (1 + seq_len / (6 * hidden) + vocab / (16 * layers * hidden))
