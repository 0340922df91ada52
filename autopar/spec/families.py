"""Model families beyond the dense transformer block: MoE, MLA attention, Mamba-2.

Each is a frozen value that ModelSpec may carry; each knows its parameter count
and is validated when built. The cost model reads them through the layer kinds
that ModelSpec.layer_kinds() returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError

# Layer kinds and the sub-layers they are made of. A transformer block is
# attention followed by an MLP or an MoE; a hybrid stack (Megatron's
# hybrid_override_pattern) lists single sub-layers: M Mamba, * attention,
# - MLP, E MoE.
KIND_PARTS: dict[str, tuple[str, ...]] = {
    "dense": ("attn", "mlp"),
    "moe": ("attn", "moe"),
    "mamba": ("mamba",),
    "attention": ("attn",),
    "mlp": ("mlp",),
    "moe_mlp": ("moe",),
}
PATTERN_KINDS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe_mlp"}


@dataclass(frozen=True, slots=True, kw_only=True)
class MoESpec:
    """Mixture-of-experts MLP (Switch/GShard style top-k routing)."""

    num_experts: int  # routed experts per MoE layer
    top_k: int  # experts each token is routed to
    expert_ffn_hidden_size: int  # inner width of one routed expert
    shared_experts: int = 0  # always-active experts (DeepSeek), 0 for none
    shared_expert_ffn_hidden_size: int = 0  # inner width of one shared expert (defaults to the routed width)
    first_dense_layers: int = 0  # leading blocks that keep a dense MLP
    capacity_factor: float = 1.0  # load of the busiest expert over the mean (routing imbalance)
    max_nodes_per_token: int = 0  # node-limited routing (DeepSeek-V3 sec. 2.1.2): nodes a token may reach, 0 = any

    def __post_init__(self) -> None:
        if self.top_k > self.num_experts:
            raise SpecError(f"moe.top_k ({self.top_k}) must not exceed moe.num_experts ({self.num_experts})")
        if self.capacity_factor < 1.0:
            raise SpecError(f"moe.capacity_factor must be >= 1.0 (busiest expert over the mean), got {self.capacity_factor}")

    @property
    def shared_width(self) -> int:
        """Total inner width of the shared experts."""
        return self.shared_experts * (self.shared_expert_ffn_hidden_size or self.expert_ffn_hidden_size)

    def params(self, hidden: int, mats: int) -> int:
        """Router plus every routed and shared expert."""
        return hidden * self.num_experts + mats * hidden * (self.num_experts * self.expert_ffn_hidden_size + self.shared_width)

    def active_params(self, hidden: int, mats: int) -> int:
        """Weights one token multiplies: router, top_k routed experts, the shared ones."""
        return hidden * self.num_experts + mats * hidden * (self.top_k * self.expert_ffn_hidden_size + self.shared_width)


@dataclass(frozen=True, slots=True, kw_only=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2 sec. 2.1, DeepSeek-V3 sec. 2.1.1).

    Queries go h -> q_lora_rank -> heads x (nope + rope); keys and values share a
    compressed latent h -> kv_lora_rank (+ a decoupled rope key), expanded per head
    to nope (keys) and v_head_dim (values).
    """

    q_lora_rank: int  # query compression rank; 0 means a direct h -> heads projection
    kv_lora_rank: int  # joint key/value compression rank (the cached latent)
    qk_nope_head_dim: int  # per-head query/key width without rotary embedding
    qk_rope_head_dim: int  # per-head decoupled rotary width (key part shared across heads)
    v_head_dim: int  # per-head value width
    # DeepSeek Sparse Attention's indexer (DeepSeek-V3.2, GLM-5): width of the one key per token it caches
    # (fp8 plus an fp32 scale per 128 channels in vLLM and SGLang); 0: no indexer
    index_head_dim: int = 0

    @property
    def index_bytes_per_token(self) -> int:
        """Bytes one layer's indexer keeps per cached token, whatever the KV dtype (vLLM
        v1/attention/backends/mla/indexer.py, SGLang NSATokenToKVPool: index_head_dim + index_head_dim // 128 x 4)."""
        return self.index_head_dim + self.index_head_dim // 128 * 4

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def params(self, hidden: int, heads: int) -> int:
        q = (
            hidden * self.q_lora_rank + self.q_lora_rank * heads * self.qk_head_dim + self.q_lora_rank
            if self.q_lora_rank
            else hidden * heads * self.qk_head_dim
        )
        kv = hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
        kv += self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + heads * self.v_head_dim * hidden


@dataclass(frozen=True, slots=True, kw_only=True)
class MambaSpec:
    """Mamba-2 mixer (Dao & Gu 2024, "Transformers are SSMs", sec. 7) and the hybrid layout."""

    state_size: int  # N: SSM state per head
    head_dim: int  # P: channels per SSM head
    expand: int  # d_inner = expand * hidden
    layer_pattern: str  # one character per layer: M Mamba, * attention, - MLP, E MoE
    num_groups: int = 8  # groups sharing B and C (Megatron default 8)
    conv_kernel: int = 4  # causal depthwise convolution width
    chunk_size: int = 128  # SSD chunk length Q
    ssm_state_dtype: str = "bf16"  # dtype of the SSM state a serving engine keeps per request (bf16 | fp32); conv state is bf16

    def __post_init__(self) -> None:
        bad = sorted(set(self.layer_pattern) - set(PATTERN_KINDS))
        if bad:
            raise SpecError(
                f"mamba.layer_pattern: unknown character(s) {''.join(bad)[:20]!r}; use M (Mamba), * (attention), - (MLP), E (MoE)"
            )
        if not self.layer_pattern:
            raise SpecError("mamba.layer_pattern: must list at least one layer")

    def inner(self, hidden: int) -> int:
        return self.expand * hidden

    def heads(self, hidden: int) -> int:
        return self.inner(hidden) // self.head_dim

    def in_proj_width(self, hidden: int) -> int:
        """z and x (2 d_inner), B and C (2 G N), dt (one per head)."""
        return 2 * self.inner(hidden) + 2 * self.num_groups * self.state_size + self.heads(hidden)

    def matmul_params(self, hidden: int) -> int:
        """The in and out projections: the weights a token multiplies (the time model's two GEMMs)."""
        return hidden * self.in_proj_width(hidden) + self.inner(hidden) * hidden

    def params(self, hidden: int) -> int:
        """Projections, causal conv (weights and bias), dt bias, A, D and the gated norm."""
        di = self.inner(hidden)
        conv_channels = di + 2 * self.num_groups * self.state_size
        return hidden * self.in_proj_width(hidden) + conv_channels * (self.conv_kernel + 1) + 3 * self.heads(hidden) + di + di * hidden
