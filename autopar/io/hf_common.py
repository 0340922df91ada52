"""What every family's reader of a Hugging Face config.json shares (:mod:`autopar.io.hf_config`).

The config being read (its raw keys, its validated keys, where it came from and its one-line
errors), the activation names, and the architecture keys every family states the same way: norm,
positions, rotary base, biases, QK norm and the sliding windows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from autopar.errors import SpecError
from autopar.io.reading import one_line, shown
from autopar.spec.model import ModelSpec

if TYPE_CHECKING:
    from autopar.io import hf_schema as hf

# HF hidden_act -> our ffn_activation. SiLU/Swish in these families is always the gated (SwiGLU) MLP.
_HF_ACT = {
    "silu": "swiglu",
    "swish": "swiglu",
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_fast": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu2": "relu2",
}
_DEFAULT_SEQ_CAP = 8192  # default training sequence length: the position range, capped here
V = TypeVar("V")
_SSM_KINDS = ("mamba2", "nemotron_h", "mamba_ssm")  # carry position in the recurrence (_Config.arch)


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
            raise SpecError(
                f"{self.where}: hidden size ({hidden}) is not divisible by the number of attention heads ({heads}), and no {key} is given"
            )
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
        return {
            "norm": "layernorm" if self.kind == "gpt_neox" else "rmsnorm",
            "rope_base": float(theta),
            "rope_scaling": float(factor),
            "linear_bias": self.kind == "gpt_neox" or k.attention_bias or k.mlp_bias,
            "qk_norm": self.kind in ("qwen3", "qwen3_moe", "gemma3_text"),
        }


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
            raise c.fail("layer_types", f"unsupported kind(s) {', '.join(map(shown, bad))}; autopar reads {' and '.join(_LAYER_KINDS)}")
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
