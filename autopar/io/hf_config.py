"""Hugging Face ``config.json`` (and state-spaces ``mamba_ssm`` config) readers.

Each supported ``model_type`` maps its own keys onto a :class:`ModelSpec`.
A config.json carries many keys that do not matter for cost (dropout, token ids,
quantization), so unknown keys are ignored here, unlike in the strict YAML
format. The keys read are typed and bounded by one pydantic model per family
(:mod:`autopar.io.hf_schema`, imported when a config is read); a key that
matters and is missing or wrong is a one-line :class:`SpecError` naming it and
the file.

What the readers leave out, by family:

- sliding windows (``sliding_window`` with ``layer_types``, Gemma 2's alternation,
  Gemma 3's ``sliding_window_pattern``, Qwen's ``use_sliding_window`` from
  ``max_window_layers``, Mistral / Phi-3 on every layer) are read as how many
  layers are windowed, not which (``ModelSpec.window_layers``).
- gemma2 / gemma3: the gated GELU MLP is costed as SwiGLU (the same three
  matrices); logit soft-capping, the extra norms and Gemma 3's vision tower are
  left out (a multimodal config is read through its ``text_config``).
- gpt_oss: attention sinks and linear-layer biases are ignored.
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
from typing import TYPE_CHECKING, Any, TypeVar

from autopar.errors import SpecError
from autopar.io.reading import one_line, shown
from autopar.spec.families import PATTERN_KINDS, MambaSpec, MLASpec, MoESpec
from autopar.spec.model import ModelSpec

if TYPE_CHECKING:
    from autopar.io import hf_schema as hf

# HF hidden_act -> our ffn_activation. SiLU/Swish in these families is always the gated (SwiGLU) MLP.
_HF_ACT = {"silu": "swiglu", "swish": "swiglu", "gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu",
           "gelu_pytorch_tanh": "gelu", "relu2": "relu2"}
_DEFAULT_SEQ_CAP = 8192  # default training sequence length: the position range, capped here
_SSM_MAX_SEQ = 1 << 20  # an SSM has no position range; the longest sequence autopar models
_SSM_SEQ_LEN = 4096  # default training sequence length for a pure SSM config (which states none)
V = TypeVar("V")


class _Config:
    """One config.json being read: its raw mapping, its validated keys, and where it came from."""

    def __init__(self, data: dict[str, Any], where: str, kind: str, keys: Any):
        self.data = data
        self.where = where
        self.kind = kind
        self.keys = keys

    def fail(self, key: str, msg: str) -> SpecError:
        return SpecError(f"{self.where}: {key}: {msg}")

    def need(self, value: V | None, key: str) -> V:
        """A key this config needs though others of its type may leave it out."""
        if value is None:
            raise self.fail(key, "missing required field")
        return value

    @property
    def name(self) -> str:
        return one_line(str(self.data.get("_name_or_path") or Path(self.where).parent.name or self.kind), 100)

    def activation(self, key: str, hf_act: str) -> str:
        if hf_act not in _HF_ACT:
            raise self.fail(key, f"unsupported activation {shown(hf_act)}; supported: {', '.join(sorted(_HF_ACT))}")
        return _HF_ACT[hf_act]

    def head_dim(self, hidden: int, heads: int, explicit: int | None, key: str = "head_dim") -> int:
        """The explicit per-head width, else hidden / heads (which must divide)."""
        if explicit is not None:
            return explicit
        if hidden % heads:
            raise SpecError(f"{self.where}: hidden size ({hidden}) is not divisible by the number of attention heads "
                            f"({heads}), and no {key} is given")
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
        if isinstance(self.keys, _attention_keys()):
            window, windowed = _windows(self, fields["layers"])
            if window >= max_seq:  # a window the whole context long is full attention (Qwen2's 131072)
                window, windowed = 0, 0
            fields.update(sliding_window=window, window_layers=windowed)
        return ModelSpec(name=self.name, max_seq_len=max_seq, source=self.where, **self.arch(), **fields)

    def arch(self) -> dict[str, Any]:
        """Norm, positions, rotary base, biases and QK norm, as transformers' modeling code for the type has them."""
        if self.kind in _SSM_KINDS:  # Mamba stacks carry position in the recurrence: no position embedding
            return {"position_embedding": "none"}
        if self.kind == "gpt2":
            return {"norm": "layernorm", "position_embedding": "learned", "linear_bias": True}
        k: hf.Common = self.keys
        nested = k.rope_parameters.rope_theta if k.rope_parameters is not None else None  # newer transformers
        theta = nested if nested is not None else k.rope_theta
        scaling = k.rope_scaling
        factor = 1.0
        if scaling is not None and (scaling.rope_type or scaling.type) == "llama3":  # Llama 3.1's frequency scaling
            factor = scaling.factor if scaling.factor is not None else 1.0
            if factor < 1:
                raise self.fail("rope_scaling.factor", f"must be >= 1 for llama3 scaling, got {shown(factor)}")
        return {"norm": "layernorm" if self.kind == "gpt_neox" else "rmsnorm", "rope_base": float(theta),
                "rope_scaling": float(factor), "linear_bias": self.kind == "gpt_neox" or k.attention_bias or k.mlp_bias,
                "qk_norm": self.kind in ("qwen3", "qwen3_moe", "gemma3_text")}


def _attention_keys() -> type:
    from autopar.io.hf_schema import _Attention

    return _Attention


_ALL_WINDOWED = ("mistral", "mixtral", "phi3")  # sliding_window, when set, applies to every layer
_LAYER_KINDS = ("full_attention", "sliding_attention")


def _windows(c: _Config, layers: int) -> tuple[int, int]:
    """(sliding_window, windowed layers) as transformers' config class for the type places the windows."""
    k = c.keys
    window = k.sliding_window or 0
    if k.layer_types is not None:  # transformers >= 4.53 writes every layer's kind
        bad = sorted(set(k.layer_types) - set(_LAYER_KINDS))
        if bad:
            raise c.fail("layer_types", f"unsupported kind(s) {', '.join(map(shown, bad))}; autopar reads "
                         f"{' and '.join(_LAYER_KINDS)}")
        if len(k.layer_types) != layers:
            raise c.fail("layer_types", f"has {len(k.layer_types)} entries but num_hidden_layers is {layers}")
        windowed = k.layer_types.count("sliding_attention")
        if windowed and not window:
            raise c.fail("sliding_window", f"missing: layer_types has {windowed} sliding_attention layers")
    elif not window:  # the families below state no window without it
        windowed = 0
    elif c.kind in ("gemma2", "gpt_oss"):  # layer i windowed iff (i + 1) % 2: the even-indexed layers
        windowed = (layers + 1) // 2
    elif c.kind == "gemma3_text":  # (i + 1) % pattern: all but every pattern-th layer (Gemma 3: 5 of 6)
        windowed = layers - layers // (k.sliding_window_pattern or 6)
    elif c.kind in ("qwen2", "qwen3", "qwen3_moe"):  # Qwen2Config: layers from max_window_layers, if enabled
        windowed = layers - min(layers, k.max_window_layers or 0) if k.use_sliding_window else 0
    else:
        windowed = layers if c.kind in _ALL_WINDOWED else 0
    return (window, windowed) if windowed else (0, 0)


# --- dense transformers ------------------------------------------------------------


def _gpt2(c: _Config) -> ModelSpec:
    k: hf.Gpt2 = c.keys
    hidden, heads = k.n_embd, k.n_head
    return c.spec(
        layers=k.n_layer, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=heads,
        head_dim=c.head_dim(hidden, heads, None), ffn_hidden_size=k.n_inner or 4 * hidden,
        ffn_activation="gelu", vocab_size=k.vocab_size, max_seq_len=k.n_positions, tie_embeddings=k.tie_word_embeddings,
    )


def _attention(c: _Config) -> dict[str, Any]:
    """The Llama-style attention and stack keys shared by most families."""
    k: hf.Llama = c.keys
    hidden, heads = k.hidden_size, k.num_attention_heads
    return {
        "layers": k.num_hidden_layers, "hidden_size": hidden, "num_attention_heads": heads,
        "num_kv_heads": k.num_key_value_heads or heads, "head_dim": c.head_dim(hidden, heads, k.head_dim),
        "vocab_size": k.vocab_size, "max_seq_len": k.max_position_embeddings, "tie_embeddings": k.tie_word_embeddings,
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
    moe = c.build("moe", lambda: MoESpec(num_experts=k.num_local_experts, top_k=k.num_experts_per_tok,
                                         expert_ffn_hidden_size=width))
    return c.spec(ffn_hidden_size=width, ffn_activation=c.activation("hidden_act", k.hidden_act), moe=moe,
                  **_attention(c))


def _qwen3_moe(c: _Config) -> ModelSpec:
    k: hf.Qwen3Moe = c.keys
    fields = _attention(c)
    layers = fields["layers"]
    # transformers' Qwen3MoeDecoderLayer: sparse iff not in mlp_only_layers and (i + 1) % step == 0.
    mlp_only = set(k.mlp_only_layers or [])
    dense = [i for i in range(layers) if i in mlp_only or (i + 1) % k.decoder_sparse_step]
    if dense != list(range(len(dense))):
        raise c.fail("mlp_only_layers", f"dense layers {dense} are not a prefix of the stack; autopar models dense "
                     "layers only before the MoE ones")
    width = k.moe_intermediate_size
    ffn = c.need(k.intermediate_size, "intermediate_size") if dense else width  # dense width, or unused
    moe = c.build("moe", lambda: MoESpec(num_experts=k.num_experts, top_k=k.num_experts_per_tok,
                                         expert_ffn_hidden_size=width, first_dense_layers=len(dense)))
    return c.spec(ffn_hidden_size=ffn, ffn_activation=c.activation("hidden_act", k.hidden_act), moe=moe, **fields)


def _deepseek(c: _Config) -> ModelSpec:
    """DeepSeek-V2/V3: multi-head latent attention, shared + routed experts, leading dense layers."""
    k: hf.DeepSeek = c.keys
    mla = c.build("mla", lambda: MLASpec(
        q_lora_rank=k.q_lora_rank, kv_lora_rank=k.kv_lora_rank, qk_nope_head_dim=k.qk_nope_head_dim,
        qk_rope_head_dim=k.qk_rope_head_dim, v_head_dim=k.v_head_dim))
    if k.moe_layer_freq != 1:
        raise c.fail("moe_layer_freq", "only 1 (every layer after first_k_dense_replace is MoE) is supported")
    width, shared = k.moe_intermediate_size, k.n_shared_experts
    moe = c.build("moe", lambda: MoESpec(
        num_experts=k.n_routed_experts, top_k=k.num_experts_per_tok, expert_ffn_hidden_size=width,
        shared_experts=shared, shared_expert_ffn_hidden_size=width if shared else 0,
        first_dense_layers=k.first_k_dense_replace,
        # group-limited routing: experts sit in n_group groups (one per node when EP spans that many
        # nodes) and a token reaches at most topk_group of them
        max_nodes_per_token=k.topk_group if k.n_group is not None else 0))
    return c.spec(
        layers=k.num_hidden_layers, hidden_size=k.hidden_size, num_attention_heads=k.num_attention_heads,
        num_kv_heads=k.num_attention_heads,  # MLA expands the latent to a key and a value per head
        head_dim=mla.v_head_dim, ffn_hidden_size=k.intermediate_size,
        ffn_activation=c.activation("hidden_act", k.hidden_act), vocab_size=k.vocab_size,
        max_seq_len=k.max_position_embeddings, tie_embeddings=k.tie_word_embeddings, mla=mla, moe=moe,
    )


def _gpt_oss(c: _Config) -> ModelSpec:
    """gpt-oss: every layer MoE; banded/full alternation read as full attention, sinks and biases ignored."""
    k: hf.GptOss = c.keys
    legacy = k.num_experts_per_tok is None and k.experts_per_token  # older gpt-oss configs
    top_k = legacy or c.need(k.num_experts_per_tok, "num_experts_per_tok")
    moe = c.build("moe", lambda: MoESpec(num_experts=k.num_local_experts, top_k=top_k,
                                         expert_ffn_hidden_size=k.intermediate_size))
    return c.spec(ffn_hidden_size=k.intermediate_size, ffn_activation=c.activation("hidden_act", k.hidden_act), moe=moe,
                  **_attention(c))


# --- Mamba-2 and hybrids -----------------------------------------------------------


def _expand(c: _Config, key: str, inner: int, hidden: int) -> int:
    if inner % hidden:
        raise c.fail(key, f"Mamba-2 inner width {inner} is not an integer multiple of hidden_size ({hidden}); "
                     "autopar models d_inner = expand x hidden_size with an integer expand")
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
        raise c.fail("num_heads", f"num_heads x head_dim ({k.num_heads} x {head_dim}) must equal "
                     f"expand x hidden_size ({expand} x {hidden})")
    mamba = c.build("mamba", lambda: MambaSpec(
        state_size=k.state_size, head_dim=head_dim, expand=expand, layer_pattern="M" * layers,
        num_groups=k.n_groups, conv_kernel=k.conv_kernel, chunk_size=k.chunk_size))
    return c.spec(layers=layers, hidden_size=hidden, ffn_activation="swiglu", vocab_size=k.vocab_size,
                  seq_len=_SSM_SEQ_LEN, max_seq_len=_SSM_MAX_SEQ, tie_embeddings=k.tie_word_embeddings,
                  mamba=mamba, **_ssm_only(hidden))


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
        moe = c.build("moe", lambda: MoESpec(
            num_experts=c.need(k.n_routed_experts, "n_routed_experts"), top_k=c.need(k.num_experts_per_tok,
                                                                                    "num_experts_per_tok"),
            expert_ffn_hidden_size=c.need(k.moe_intermediate_size, "moe_intermediate_size"),
            shared_experts=1 if shared_width else 0, shared_expert_ffn_hidden_size=shared_width))
    # keys under their attribute names, or under the constructor arguments' (mamba_*)
    mamba = c.build("mamba", lambda: MambaSpec(
        state_size=k.ssm_state_size or k.mamba_d_state, head_dim=k.mamba_head_dim, expand=expand,
        layer_pattern=pattern, num_groups=k.n_groups or k.mamba_n_groups, conv_kernel=k.conv_kernel or k.mamba_d_conv,
        chunk_size=k.chunk_size or k.mamba_chunk_size))
    head_key = "attention_head_dim" if k.attention_head_dim is not None else "head_dim"
    return c.spec(
        layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=k.num_key_value_heads or heads,
        head_dim=c.head_dim(hidden, heads, k.attention_head_dim or k.head_dim, key=head_key),
        ffn_hidden_size=k.intermediate_size, ffn_activation=c.activation(act_key, k.mlp_hidden_act or k.hidden_act),
        vocab_size=k.vocab_size, max_seq_len=k.max_position_embeddings, tie_embeddings=k.tie_word_embeddings,
        mamba=mamba, moe=moe,
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
    mamba = c.build("mamba", lambda: MambaSpec(
        state_size=ssm.d_state, head_dim=ssm.headdim, expand=ssm.expand, layer_pattern=pattern,
        num_groups=ssm.ngroups, conv_kernel=ssm.d_conv, chunk_size=ssm.chunk_size))
    widths = _ssm_only(hidden)
    if attn_idx:
        attn = k.attn_cfg or hf_attn_cfg()
        heads = c.need(attn.num_heads, "attn_cfg.num_heads")
        widths.update(num_attention_heads=heads, num_kv_heads=attn.num_heads_kv or heads,
                      head_dim=c.head_dim(hidden, heads, attn.head_dim, key="attn_cfg.head_dim"))
    if mlp:
        widths["ffn_hidden_size"] = mlp
    multiple = k.pad_vocab_size_multiple  # the embedding matrix is padded up to this multiple
    vocab = -(-k.vocab_size // multiple) * multiple
    return c.spec(layers=len(pattern), hidden_size=hidden, ffn_activation="swiglu", vocab_size=vocab,
                  seq_len=_SSM_SEQ_LEN, max_seq_len=_SSM_MAX_SEQ, tie_embeddings=k.tie_embeddings,
                  mamba=mamba, **widths)


def hf_attn_cfg() -> hf.AttnCfg:
    from autopar.io.hf_schema import AttnCfg

    return AttnCfg()


_SSM_KINDS = ("mamba2", "nemotron_h", "mamba_ssm")

_READERS: dict[str, Callable[[_Config], ModelSpec]] = {
    "gpt2": _gpt2,
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3", "gpt_neox", "phi3"), _llama_like),
    "gemma2": _gemma,
    "gemma3_text": _gemma,
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt_oss": _gpt_oss,
    "mamba2": _mamba2,
    "nemotron_h": _nemotron_h,
}

SUPPORTED_MODEL_TYPES = tuple(sorted([*_READERS, "gemma3"]))  # gemma3: read through its text_config


def from_hf_config(data: dict[str, Any], *, where: str) -> ModelSpec:
    """Read a Hugging Face config.json (or a state-spaces mamba_ssm config) into a ModelSpec."""
    from autopar.io import hf_schema as hf  # pydantic: loaded when a config is read, not for --help

    reader: Callable[[_Config], ModelSpec] = _mamba_ssm
    kind = "mamba_ssm"
    if data.get("model_type") == "gemma3":  # Gemma 3 4B-27B: the language model is the text_config
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise SpecError(f"{where}: text_config: a gemma3 config holds its language model here; missing")
        data = {"model_type": "gemma3_text", **{k: v for k, v in data.items() if k == "_name_or_path"}, **text,
                **({"tie_word_embeddings": data["tie_word_embeddings"]} if "tie_word_embeddings" in data else {})}
    if "model_type" in data or "ssm_cfg" not in data or "d_model" not in data:
        kind = hf.validate(hf.Kind, data, where=where, err=SpecError).model_type
        if kind not in _READERS:
            raise SpecError(f"{where}: model_type: unsupported model_type {shown(kind)}; supported: "
                            f"{', '.join(SUPPORTED_MODEL_TYPES)} (and state-spaces mamba_ssm configs)")
        reader = _READERS[kind]
    keys = hf.validate(hf.READERS_SCHEMA[kind], data, where=where, err=SpecError)
    return reader(_Config(data, where, kind, keys))
