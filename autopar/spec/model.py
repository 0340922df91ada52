"""ModelSpec: the shape of the network.

A spec comes from a built-in preset name, a YAML file (format in DESIGN.md), or
a Hugging Face ``config.json`` (readers in :mod:`autopar.io.models`); all three
become the same frozen value.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError
from autopar.spec.families import KIND_PARTS, PATTERN_KINDS, MambaSpec, MLASpec, MoESpec

ACTIVATIONS = ("swiglu", "gelu", "relu2")
NORMS = ("rmsnorm", "layernorm", "layernorm1p")  # layernorm1p: LayerNorm with a zero-centred gamma (Nemotron)
POSITIONS = ("rope", "learned", "alibi", "none")  # none: no position signal (Mamba and hybrid stacks)


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
    # Architecture details a launch needs to build the same network (no effect on cost):
    norm: str = "rmsnorm"  # rmsnorm | layernorm | layernorm1p
    position_embedding: str = "rope"  # rope | learned | alibi | none
    rope_base: float = 10000.0  # rotary base (theta); read only with rope
    rope_scaling: float = 1.0  # Llama 3.1 rotary frequency scaling factor (rope_type llama3); 1 = none
    linear_bias: bool = False  # biases on the attention and MLP linears (GPT-2/3, BLOOM)
    qk_norm: bool = False  # a norm on each query and key head (Qwen3, OLMo 2)
    # Sliding-window attention: `window_layers` of the attention layers attend to the last `sliding_window`
    # tokens only (Mistral 7B v0.1, Phi-3: all; Gemma 2: every other; Gemma 3: 5 of 6; gpt-oss: half), the
    # rest to the whole sequence. Counted in the attention FLOPs and the KV cache; which layers are windowed
    # is not kept (a pipeline stage holds the stack's share of each).
    sliding_window: int = 0  # tokens a windowed layer attends to; 0: no windowed layer
    window_layers: int = 0  # attention layers with the window
    # What an engine's KV dtype `auto` reads from the checkpoint (io/hf_quant.py): fp8 for NVIDIA's FP8/NVFP4
    # ones; "" names none (the activation dtype, bf16); kv_dtype_source says where it was read
    kv_dtype_default: str = ""
    kv_dtype_source: str = ""

    def __post_init__(self) -> None:
        if self.head_dim < 1:
            raise SpecError(f"{self.name}: head_dim must be >= 1, got {self.head_dim}")
        if self.sliding_window < 0 or self.window_layers < 0:
            raise SpecError(f"{self.name}: sliding_window and window_layers must be >= 0")
        if bool(self.sliding_window) != bool(self.window_layers):
            raise SpecError(
                f"{self.name}: sliding_window ({self.sliding_window}) and window_layers "
                f"({self.window_layers}) must both be 0 or both positive"
            )
        if self.kv_dtype_default not in ("", "bf16", "fp8"):
            raise SpecError(f"{self.name}: kv_dtype_default must be bf16 or fp8, got {self.kv_dtype_default!r}")
        if self.window_layers > self.layers:
            raise SpecError(f"{self.name}: window_layers ({self.window_layers}) exceeds layers ({self.layers})")
        if self.num_attention_heads % self.num_kv_heads:
            raise SpecError(
                f"{self.name}: num_attention_heads ({self.num_attention_heads}) must be divisible by num_kv_heads ({self.num_kv_heads})"
            )
        if self.ffn_activation not in ACTIVATIONS:
            raise SpecError(f"{self.name}: ffn_activation must be one of {', '.join(ACTIVATIONS)}")
        if self.norm not in NORMS:
            raise SpecError(f"{self.name}: norm must be one of {', '.join(NORMS)}, got {self.norm!r}")
        if self.position_embedding not in POSITIONS:
            raise SpecError(f"{self.name}: position_embedding must be one of {', '.join(POSITIONS)}, got {self.position_embedding!r}")
        if self.rope_scaling < 1:
            raise SpecError(f"{self.name}: rope_scaling must be >= 1 (1 = none), got {self.rope_scaling}")
        if self.rope_base <= 0:
            raise SpecError(f"{self.name}: rope_base must be > 0, got {self.rope_base}")
        if self.sliding_window > self.max_seq_len:  # issue 23: a window past the context is no window
            raise SpecError(
                f"{self.name}: sliding_window ({self.sliding_window}) exceeds max_seq_len "
                f"({self.max_seq_len}); a window that long is full attention: set it to 0"
            )
        if self.max_seq_len < self.seq_len:
            raise SpecError(f"{self.name}: max_seq_len ({self.max_seq_len}) is below seq_len ({self.seq_len})")
        if self.mamba is not None:
            pattern = self.mamba.layer_pattern
            if len(pattern) != self.layers:
                raise SpecError(f"{self.name}: mamba.layer_pattern has {len(pattern)} layers but layers is {self.layers}")
            if "E" in pattern and self.moe is None:
                raise SpecError(f"{self.name}: mamba.layer_pattern uses E (MoE) but the spec has no moe section")
            if self.mamba.inner(self.hidden_size) % self.mamba.head_dim:
                raise SpecError(
                    f"{self.name}: mamba d_inner ({self.mamba.inner(self.hidden_size)}) must be divisible "
                    f"by mamba.head_dim ({self.mamba.head_dim})"
                )
        if self.moe is not None and self.moe.first_dense_layers > self.layers:
            raise SpecError(f"{self.name}: moe.first_dense_layers ({self.moe.first_dense_layers}) exceeds layers ({self.layers})")

    # --- sliding windows ----------------------------------------------------------
    def _windowed_share(self) -> float:
        attention = sum(1 for k in self.layer_kinds() if k in ("dense", "moe", "attention"))
        return min(1.0, self.window_layers / attention) if attention else 0.0

    def kv_share(self, context: float) -> float:
        """Cached K/V of a request of `context` tokens over that of full attention on every layer: a
        windowed layer keeps the last `sliding_window` tokens (vLLM and SGLang free the rest)."""
        if not self.sliding_window or context <= self.sliding_window:
            return 1.0
        share = self._windowed_share()
        return 1.0 - share + share * self.sliding_window / context

    def causal_attention_share(self, seq_len: float) -> float:
        """Causal attention work over a sequence of `seq_len` tokens over that of full attention: a windowed
        layer's query i sees min(i, w) keys, s*w - w^2/2 pairs against s^2/2 (for s > w)."""
        w = self.sliding_window
        if not w or seq_len <= w:
            return 1.0
        share = self._windowed_share()
        return 1.0 - share + share * (2.0 * w / seq_len - (w / seq_len) ** 2)

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
        qk_norm = 2 * self.head_dim if self.qk_norm else 0  # one RMSNorm weight per head width, for q and for k
        return h * self.q_width + 2 * h * self.kv_width + self.q_width * h + qk_norm

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
