"""Hugging Face ``config.json`` (and state-spaces ``mamba_ssm`` config) readers.

Each supported ``model_type`` maps its own keys onto a :class:`ModelSpec`.
A config.json carries many keys that do not matter for cost (dropout, token ids,
rope scaling, quantization), so unknown keys are ignored here, unlike in the
strict YAML format; a key that does matter and is missing is a one-line
:class:`SpecError` naming it.

What the readers leave out, by family:

- gpt_oss: alternating sliding-window attention is read as full attention;
  attention sinks and linear-layer biases are ignored.
- deepseek_v2/v3: the multi-token-prediction module (``num_nextn_predict_layers``)
  is not modelled; ``moe_layer_freq`` must be 1 (MoE on every layer after the
  first ``first_k_dense_replace``).
- qwen3_moe: dense layers (``mlp_only_layers``, ``decoder_sparse_step``) are
  supported only when they form a prefix of the stack.
- Mamba-2 (mamba2, nemotron_h, mamba_ssm): ``d_inner`` must be an integer
  multiple of ``hidden_size`` (autopar's Mamba-2 model has an integer ``expand``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.strict import Fields, one_line, shown
from autopar.spec.families import PATTERN_KINDS, MambaSpec, MLASpec, MoESpec
from autopar.spec.limits import MODEL_KEY_LIMITS
from autopar.spec.model import ModelSpec

# HF hidden_act -> our ffn_activation. SiLU/Swish in these families is always the gated (SwiGLU) MLP.
_HF_ACT = {"silu": "swiglu", "swish": "swiglu", "gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu",
           "gelu_pytorch_tanh": "gelu", "relu2": "relu2"}
_DEFAULT_SEQ_CAP = 8192  # default training sequence length: the position range, capped here
_SSM_MAX_SEQ = 1 << 20  # an SSM has no position range; the longest sequence autopar models
_SSM_SEQ_LEN = 4096  # default training sequence length for a pure SSM config (which states none)


class _Config:
    """One config.json being read: typed field access plus where it came from."""

    def __init__(self, data: dict[str, Any], where: str, kind: str):
        self.data = data
        self.where = where
        self.kind = kind
        self.f = Fields(data, f"{where}: ", limits=MODEL_KEY_LIMITS)

    @property
    def name(self) -> str:
        return one_line(str(self.data.get("_name_or_path") or Path(self.where).parent.name or self.kind), 100)

    def activation(self, key: str = "hidden_act", default: str = "silu") -> str:
        hf_act = self.f.text(key, default)
        if hf_act not in _HF_ACT:
            raise self.f.fail(key, f"unsupported activation {shown(hf_act)}; supported: {', '.join(sorted(_HF_ACT))}")
        return _HF_ACT[hf_act]

    def head_dim(self, hidden: int, heads: int, key: str | None = "head_dim") -> int:
        """The explicit per-head width under `key`, else hidden / heads (which must divide)."""
        if key is not None and self.f.has(key):
            return self.f.integer(key)
        if hidden % heads:
            raise SpecError(f"{self.where}: hidden size ({hidden}) is not divisible by the number of attention heads "
                            f"({heads}), and no {key or 'head_dim'} is given")
        return hidden // heads

    def build(self, part: str, make: Callable[[], Any]) -> Any:
        """Construct a MoE/MLA/Mamba value; its own validation error is prefixed with the file and the part."""
        try:
            return make()
        except SpecError as exc:
            msg = str(exc)
            if msg.startswith(self.where):
                raise
            raise SpecError(f"{self.where}: {msg if msg.startswith(part) else f'{part}: {msg}'}") from None

    def spec(self, **fields: Any) -> ModelSpec:
        max_seq = fields.pop("max_seq_len")
        fields.setdefault("seq_len", min(max_seq, _DEFAULT_SEQ_CAP))
        return ModelSpec(name=self.name, max_seq_len=max_seq, source=self.where, **self.arch(), **fields)

    def arch(self) -> dict[str, Any]:
        """Norm, positions, rotary base, biases and QK norm, as transformers' modeling code for the type has them."""
        if self.kind in _SSM_KINDS:  # Mamba stacks carry position in the recurrence: no position embedding
            return {"position_embedding": "none"}
        if self.kind == "gpt2":
            return {"norm": "layernorm", "position_embedding": "learned", "linear_bias": True}
        nested = self.data.get("rope_parameters")
        theta = (nested if isinstance(nested, dict) else self.data).get("rope_theta", 10000.0)
        if isinstance(theta, bool) or not isinstance(theta, int | float) or theta <= 0:
            raise self.f.fail("rope_theta", f"expected a positive number, got {theta!r}")
        bias = self.kind == "gpt_neox" or self.f.flag("attention_bias", False) or self.f.flag("mlp_bias", False)
        raw = self.data.get("rope_scaling")
        scaling: dict[str, Any] = raw if isinstance(raw, dict) else {}
        llama3 = scaling.get("rope_type", scaling.get("type")) == "llama3"  # Llama 3.1's frequency scaling
        factor = scaling.get("factor", 1.0) if llama3 else 1.0
        if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 1:
            raise self.f.fail("rope_scaling", f"factor must be a number >= 1, got {factor!r}")
        return {"norm": "layernorm" if self.kind == "gpt_neox" else "rmsnorm", "rope_base": float(theta),
                "rope_scaling": float(factor),
                "linear_bias": bias, "qk_norm": self.kind in ("qwen3", "qwen3_moe")}


# --- dense transformers ------------------------------------------------------------


def _gpt2(c: _Config) -> ModelSpec:
    f = c.f
    hidden, heads = f.integer("n_embd"), f.integer("n_head")
    return c.spec(
        layers=f.integer("n_layer"), hidden_size=hidden, num_attention_heads=heads, num_kv_heads=heads,
        head_dim=c.head_dim(hidden, heads, key=None), ffn_hidden_size=f.integer("n_inner", 4 * hidden),
        ffn_activation="gelu", vocab_size=f.integer("vocab_size"), max_seq_len=f.integer("n_positions"),
        tie_embeddings=f.flag("tie_word_embeddings", True),
    )


def _attention(c: _Config) -> dict[str, Any]:
    """The Llama-style attention and stack keys shared by most families."""
    f = c.f
    hidden, heads = f.integer("hidden_size"), f.integer("num_attention_heads")
    return {
        "layers": f.integer("num_hidden_layers"), "hidden_size": hidden, "num_attention_heads": heads,
        "num_kv_heads": f.integer("num_key_value_heads", heads), "head_dim": c.head_dim(hidden, heads),
        "vocab_size": f.integer("vocab_size"), "max_seq_len": f.integer("max_position_embeddings"),
        "tie_embeddings": f.flag("tie_word_embeddings", False),
    }


def _llama_like(c: _Config) -> ModelSpec:
    f = c.f
    fields = _attention(c)
    act = c.activation()
    if c.kind == "gpt_neox":  # GPT-NeoX: plain GELU MLP, head width always hidden / heads
        act = "gelu"
        hidden, heads = fields["hidden_size"], fields["num_attention_heads"]
        if hidden % heads == 0:
            fields["head_dim"] = hidden // heads
    return c.spec(ffn_hidden_size=f.integer("intermediate_size"), ffn_activation=act, **fields)


# --- mixture of experts ------------------------------------------------------------


def _mixtral(c: _Config) -> ModelSpec:
    f = c.f
    width = f.integer("intermediate_size")  # every layer is MoE: this is the expert width
    moe = c.build("moe", lambda: MoESpec(num_experts=f.integer("num_local_experts"),
                                         top_k=f.integer("num_experts_per_tok"), expert_ffn_hidden_size=width))
    return c.spec(ffn_hidden_size=width, ffn_activation=c.activation(), moe=moe, **_attention(c))


def _qwen3_moe(c: _Config) -> ModelSpec:
    f = c.f
    fields = _attention(c)
    layers = fields["layers"]
    experts = f.integer("num_experts")
    width = f.integer("moe_intermediate_size")
    only_mlp = f.sequence("mlp_only_layers", required=False) or []
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in only_mlp):
        raise f.fail("mlp_only_layers", f"expected a list of layer indices, got {shown(only_mlp)}")
    step = f.integer("decoder_sparse_step", 1)
    # transformers' Qwen3MoeDecoderLayer: sparse iff not in mlp_only_layers and (i + 1) % step == 0.
    mlp_only = set(only_mlp)
    dense = [i for i in range(layers) if i in mlp_only or (i + 1) % step]
    if dense != list(range(len(dense))):
        raise f.fail("mlp_only_layers", f"dense layers {dense} are not a prefix of the stack; autopar models dense "
                     "layers only before the MoE ones")
    ffn = f.integer("intermediate_size") if dense else width  # dense width, or unused (set to the expert width)
    moe = c.build("moe", lambda: MoESpec(num_experts=experts, top_k=f.integer("num_experts_per_tok"),
                                         expert_ffn_hidden_size=width, first_dense_layers=len(dense)))
    return c.spec(ffn_hidden_size=ffn, ffn_activation=c.activation(), moe=moe, **fields)


def _deepseek(c: _Config) -> ModelSpec:
    """DeepSeek-V2/V3: multi-head latent attention, shared + routed experts, leading dense layers."""
    f = c.f
    hidden, heads = f.integer("hidden_size"), f.integer("num_attention_heads")
    mla = c.build("mla", lambda: MLASpec(
        q_lora_rank=f.integer("q_lora_rank", 0, minimum=0),  # null in V2-Lite: direct query projection
        kv_lora_rank=f.integer("kv_lora_rank"), qk_nope_head_dim=f.integer("qk_nope_head_dim"),
        qk_rope_head_dim=f.integer("qk_rope_head_dim"), v_head_dim=f.integer("v_head_dim")))
    if f.integer("moe_layer_freq", 1) != 1:
        raise f.fail("moe_layer_freq", "only 1 (every layer after first_k_dense_replace is MoE) is supported")
    width = f.integer("moe_intermediate_size")
    shared = f.integer("n_shared_experts", 0, minimum=0)
    moe = c.build("moe", lambda: MoESpec(
        num_experts=f.integer("n_routed_experts"), top_k=f.integer("num_experts_per_tok"), expert_ffn_hidden_size=width,
        shared_experts=shared, shared_expert_ffn_hidden_size=width if shared else 0,
        first_dense_layers=f.integer("first_k_dense_replace", 0, minimum=0),
        # group-limited routing: experts sit in n_group groups (one per node when EP spans that many
        # nodes) and a token reaches at most topk_group of them
        max_nodes_per_token=f.integer("topk_group", 0, minimum=0) if f.has("n_group") else 0))
    return c.spec(
        layers=f.integer("num_hidden_layers"), hidden_size=hidden, num_attention_heads=heads,
        num_kv_heads=heads,  # MLA expands the latent to a key and a value per head
        head_dim=mla.v_head_dim, ffn_hidden_size=f.integer("intermediate_size"), ffn_activation=c.activation(),
        vocab_size=f.integer("vocab_size"), max_seq_len=f.integer("max_position_embeddings"),
        tie_embeddings=f.flag("tie_word_embeddings", False), mla=mla, moe=moe,
    )


def _gpt_oss(c: _Config) -> ModelSpec:
    """gpt-oss: every layer MoE; banded/full alternation read as full attention, sinks and biases ignored."""
    f = c.f
    width = f.integer("intermediate_size")
    legacy = not f.has("num_experts_per_tok") and f.has("experts_per_token")  # older gpt-oss configs
    top_k = f.integer("experts_per_token") if legacy else f.integer("num_experts_per_tok")
    moe = c.build("moe", lambda: MoESpec(num_experts=f.integer("num_local_experts"), top_k=top_k,
                                         expert_ffn_hidden_size=width))
    return c.spec(ffn_hidden_size=width, ffn_activation=c.activation(), moe=moe, **_attention(c))


# --- Mamba-2 and hybrids -----------------------------------------------------------


def _expand(c: _Config, key: str, inner: int, hidden: int) -> int:
    if inner % hidden:
        raise c.f.fail(key, f"Mamba-2 inner width {inner} is not an integer multiple of hidden_size ({hidden}); "
                       "autopar models d_inner = expand x hidden_size with an integer expand")
    return inner // hidden


def _ssm_only(hidden: int) -> dict[str, int]:
    """Attention/MLP widths for a stack without attention or MLP: unused, but the spec needs valid values."""
    heads = hidden // 64 if hidden % 64 == 0 else 1
    return {"num_attention_heads": heads, "num_kv_heads": heads, "head_dim": hidden // heads, "ffn_hidden_size": 4 * hidden}


def _pattern(c: _Config, key: str, pattern: str, layers: int) -> str:
    bad = sorted(set(pattern) - set(PATTERN_KINDS))
    if bad:
        raise c.f.fail(key, f"unknown character(s) {shown(''.join(bad))}; expected M (Mamba), * (attention), - (MLP), E (MoE)")
    if len(pattern) != layers:
        raise c.f.fail(key, f"has {len(pattern)} layers but num_hidden_layers is {layers}")
    return pattern


def _mamba2(c: _Config) -> ModelSpec:
    """transformers' Mamba2Config: a pure Mamba-2 stack."""
    f = c.f
    hidden, layers = f.integer("hidden_size"), f.integer("num_hidden_layers")
    head_dim = f.integer("head_dim", 64)
    expand = f.integer("expand", 2)
    if f.has("num_heads") and f.integer("num_heads") * head_dim != expand * hidden:
        raise f.fail("num_heads", f"num_heads x head_dim ({f.integer('num_heads')} x {head_dim}) must equal "
                     f"expand x hidden_size ({expand} x {hidden})")
    mamba = c.build("mamba", lambda: MambaSpec(
        state_size=f.integer("state_size", 128), head_dim=head_dim, expand=expand, layer_pattern="M" * layers,
        num_groups=f.integer("n_groups", 8), conv_kernel=f.integer("conv_kernel", 4), chunk_size=f.integer("chunk_size", 256)))
    return c.spec(layers=layers, hidden_size=hidden, ffn_activation="swiglu", vocab_size=f.integer("vocab_size"),
                  seq_len=_SSM_SEQ_LEN, max_seq_len=_SSM_MAX_SEQ, tie_embeddings=f.flag("tie_word_embeddings", False),
                  mamba=mamba, **_ssm_only(hidden))


def _either(f: Fields, key: str, alias: str, default: int) -> int:
    """A key saved under its attribute name, or under the constructor argument's name."""
    return f.integer(key) if f.has(key) else f.integer(alias, default)


def _nemotron_h(c: _Config) -> ModelSpec:
    """NVIDIA Nemotron-H: Mamba-2 (M), attention (*), squared-ReLU MLP (-) and MoE (E) layers by pattern."""
    f = c.f
    hidden, layers = f.integer("hidden_size"), f.integer("num_hidden_layers")
    heads = f.integer("num_attention_heads")
    pattern = _pattern(c, "hybrid_override_pattern", f.text("hybrid_override_pattern"), layers)
    mamba_heads, mamba_head_dim = f.integer("mamba_num_heads"), f.integer("mamba_head_dim")
    expand = _expand(c, "mamba_num_heads", mamba_heads * mamba_head_dim, hidden)
    act_key = "mlp_hidden_act" if f.has("mlp_hidden_act") else "hidden_act"
    moe = None
    if "E" in pattern:
        shared_width = f.integer("moe_shared_expert_intermediate_size", 0, minimum=0)
        moe = c.build("moe", lambda: MoESpec(
            num_experts=f.integer("n_routed_experts"), top_k=f.integer("num_experts_per_tok"),
            expert_ffn_hidden_size=f.integer("moe_intermediate_size"), shared_experts=1 if shared_width else 0,
            shared_expert_ffn_hidden_size=shared_width))
    mamba = c.build("mamba", lambda: MambaSpec(
        state_size=_either(f, "ssm_state_size", "mamba_d_state", 128), head_dim=mamba_head_dim, expand=expand,
        layer_pattern=pattern, num_groups=_either(f, "n_groups", "mamba_n_groups", 8),
        conv_kernel=_either(f, "conv_kernel", "mamba_d_conv", 4), chunk_size=_either(f, "chunk_size", "mamba_chunk_size", 256)))
    return c.spec(
        layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=f.integer("num_key_value_heads", heads),
        head_dim=c.head_dim(hidden, heads, key="attention_head_dim" if f.has("attention_head_dim") else "head_dim"),
        ffn_hidden_size=f.integer("intermediate_size"), ffn_activation=c.activation(act_key, "relu2"),
        vocab_size=f.integer("vocab_size"), max_seq_len=f.integer("max_position_embeddings"),
        tie_embeddings=f.flag("tie_word_embeddings", False), mamba=mamba, moe=moe,
    )


def _mamba_ssm(c: _Config) -> ModelSpec:
    """A state-spaces ``mamba_ssm`` config (MambaConfig: d_model, n_layer, ssm_cfg, ...), as on state-spaces/mamba2-*."""
    f = c.f
    ssm = Fields(f.mapping("ssm_cfg") or {}, f.prefix("ssm_cfg"), limits=MODEL_KEY_LIMITS)
    layer = ssm.text("layer", "Mamba1")
    if layer != "Mamba2":
        raise ssm.fail("layer", f"only Mamba2 mixers are supported, got {shown(layer)}")
    hidden, n_layer = f.integer("d_model"), f.integer("n_layer")
    attn_idx = f.sequence("attn_layer_idx", required=False) or []
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layer for i in attn_idx):
        raise f.fail("attn_layer_idx", f"expected layer indices below n_layer ({n_layer}), got {shown(attn_idx)}")
    mlp = f.integer("d_intermediate", 0, minimum=0)
    # mamba_ssm Block: a mixer (Mamba2 or attention), then a gated MLP when d_intermediate > 0.
    pattern = "".join(("*" if i in attn_idx else "M") + ("-" if mlp else "") for i in range(n_layer))
    expand = ssm.integer("expand", 2)
    mamba = c.build("mamba", lambda: MambaSpec(
        state_size=ssm.integer("d_state", 128), head_dim=ssm.integer("headdim", 64), expand=expand,
        layer_pattern=pattern, num_groups=ssm.integer("ngroups", 1), conv_kernel=ssm.integer("d_conv", 4),
        chunk_size=ssm.integer("chunk_size", 256)))
    widths = _ssm_only(hidden)
    if attn_idx:
        attn = Fields(f.mapping("attn_cfg") or {}, f.prefix("attn_cfg"), limits=MODEL_KEY_LIMITS)
        heads = attn.integer("num_heads")
        widths.update(num_attention_heads=heads, num_kv_heads=attn.integer("num_heads_kv", heads),
                      head_dim=attn.integer("head_dim", hidden // heads))
    if mlp:
        widths["ffn_hidden_size"] = mlp
    multiple = f.integer("pad_vocab_size_multiple", 8)  # the embedding matrix is padded up to this multiple
    vocab = -(-f.integer("vocab_size") // multiple) * multiple
    return c.spec(layers=len(pattern), hidden_size=hidden, ffn_activation="swiglu", vocab_size=vocab,
                  seq_len=_SSM_SEQ_LEN, max_seq_len=_SSM_MAX_SEQ, tie_embeddings=f.flag("tie_embeddings", True),
                  mamba=mamba, **widths)


_SSM_KINDS = ("mamba2", "nemotron_h", "mamba_ssm")

_READERS: dict[str, Callable[[_Config], ModelSpec]] = {
    "gpt2": _gpt2,
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gpt_neox"), _llama_like),
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt_oss": _gpt_oss,
    "mamba2": _mamba2,
    "nemotron_h": _nemotron_h,
}

SUPPORTED_MODEL_TYPES = tuple(sorted(_READERS))


def from_hf_config(data: dict[str, Any], *, where: str) -> ModelSpec:
    """Read a Hugging Face config.json (or a state-spaces mamba_ssm config) into a ModelSpec."""
    if "model_type" not in data and "ssm_cfg" in data and "d_model" in data:
        return _mamba_ssm(_Config(data, where, "mamba_ssm"))
    f = Fields(data, f"{where}: ", limits=MODEL_KEY_LIMITS)
    kind = f.text("model_type")
    reader = _READERS.get(kind)
    if reader is None:
        raise f.fail("model_type", f"unsupported model_type {shown(kind)}; supported: {', '.join(SUPPORTED_MODEL_TYPES)} "
                     "(and state-spaces mamba_ssm configs)")
    return reader(_Config(data, where, kind))
