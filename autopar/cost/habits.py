"""Memory habits of an execution stack: what the formulas of memory.py assume, named.

Two habits differ between stacks and decide bytes that `autopar calibrate`
measures exactly:

- ``StateBytes``: bytes per parameter of weights, gradients and optimizer
  state. Megatron-LM keeps bf16 weights, fp32 gradients and an fp32 master
  copy with Adam's two moments (2 + 4 + 12; Rajbhandari et al. 2020, ZeRO,
  sec. 3.1). PyTorch FSDP2 with ``MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)`` (torchtitan's default) keeps the fp32 sharded parameter
  as the master, fp32 gradients and AdamW's two fp32 moments (4 + 4 + 8); the
  bf16 unsharded copies exist only while a block runs.
- ``ActivationSaves``: what one block keeps for backward. ``FUSED`` is the
  Korthikanti et al. 2022 accounting of memory.py (fused norm, flash attention,
  fused SwiGLU; Megatron sequence parallelism keeps the sharded GEMM input and
  gathers it again in backward). ``EAGER_TORCH`` is what eager PyTorch saves,
  counted tensor by tensor with ``saved_tensors_hooks`` on calibrate's Llama
  block (autopar/calibrate/llama.py) under torch 2.13:

    per RMSNorm     fp32 input 4h, fp32 rstd 4, bf16 normalized 2h (before the weight)
    attention       bf16 GEMM input 2h (the all-gathered one under DTensor TP+SP),
                    Q and K after rotary, V, output 2(2q + 2kv)/t, fp32 logsumexp 4a/t;
                    under all-gather CP the gathered K and V: 2(2q + 2kv cp)/t
    SwiGLU MLP      GEMM input 2h, gate and up outputs, SiLU output, product 8f/t
    GELU/ReLU^2     GEMM input 2h, activation input and output 4f/t

  (bytes per token; h hidden, q = a*d, kv = g*d, f FFN width, t = tp; the norm
  terms divide by t under sequence parallelism). For a 4-layer Llama of
  hidden 256 this is 1.44x FUSED on one rank and 1.56x under tp2 with SP.

A stack profile names its activation habit (``memory.activation_saves`` in
data/stacks/*.yaml, fused by default); memory.py then counts a dense layer
without recompute as that habit saves it. `calibrate --save` records the
measured ratio to the fused formula as a bounded correction of a hardware
profile.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.cost import calibration as cal
from autopar.cost.activations import part_activation_bytes
from autopar.spec.families import KIND_PARTS
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan


@dataclass(frozen=True, slots=True, kw_only=True)
class StateBytes:
    """Bytes per parameter that a stack keeps between steps."""

    name: str  # which stack habit this is
    weight: float  # the weight as the model holds it
    grad: float  # its gradient
    optimizer: float  # optimizer state (master copy, moments)


MEGATRON_STATE = StateBytes(name="megatron-mixed", weight=cal.WEIGHT_BYTES, grad=cal.GRAD_BYTES, optimizer=cal.OPTIMIZER_BYTES)
FSDP2_STATE = StateBytes(name="fsdp2-bf16-params-fp32-reduce", weight=4, grad=4, optimizer=8)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationSaves:
    """What a stack's dense block saves for backward (see the module docstring)."""

    name: str  # fused | eager-torch
    eager: bool  # count tensor by tensor as eager PyTorch saves them


FUSED = ActivationSaves(name="fused", eager=False)
EAGER_TORCH = ActivationSaves(name="eager-torch", eager=True)
SAVES = {s.name: s for s in (FUSED, EAGER_TORCH)}


def dense_block_activation_bytes(model: ModelSpec, saves: ActivationSaves, *, tokens: float, tp: int, sp: bool, cp: int = 1) -> float:
    """Bytes one dense (attention + MLP) block keeps for backward on one rank, no recompute.

    `tokens` are this rank's (after the CP split). Under all-gather CP eager attention keeps the
    gathered K and V, cp times its own (the fused formula counts them as a transient instead).
    """
    if not saves.eager:  # cost/memory.py's block_activation_bytes with no recompute
        plan = Plan(dp=1, tp=tp, pp=1, sp=sp, recompute="none")
        return sum(part_activation_bytes(model, p, tokens=tokens, plan=plan) for p in KIND_PARTS["dense"])
    return eager_block_bytes(model, tokens=tokens, tp=tp, sp=sp, cp=cp)


def eager_block_bytes(model: ModelSpec, *, tokens: float, tp: int, sp: bool, cp: int = 1) -> float:
    """EAGER_TORCH's bytes for one dense block (see the module docstring)."""
    h, t = model.hidden_size, tp
    shard = t if sp and t > 1 else 1
    norm = tokens * (4 * h + 4 + 2 * h) / shard
    gemm_input = 2 * tokens * h  # DTensor keeps the gathered input of a column-parallel GEMM
    attn = 2 * tokens * (2 * model.q_width + 2 * model.kv_width * cp) / t + 4 * tokens * model.num_attention_heads / t
    per_f = 8 if model.ffn_activation == "swiglu" else 4
    mlp = per_f * tokens * model.ffn_hidden_size / t
    return 2 * (norm + gemm_input) + attn + mlp
