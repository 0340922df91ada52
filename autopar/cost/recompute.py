"""Selective recompute policies: what a layer still keeps when parts of it are recomputed.

torchtitan's per-op SAC (op_sac_bytes) saves every other matmul's output, not
what Korthikanti et al.'s accounting in memory.py keeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopar.cost import calibration as cal
from autopar.spec.model import ModelSpec

if TYPE_CHECKING:  # memory.py imports this module
    from autopar.cost.memory import ActPlan
    from autopar.spec.plan import Plan


def op_sac_bytes(model: ModelSpec, parts: tuple[str, ...], *, tokens: float, plan: Plan | ActPlan) -> float | None:
    """Bytes a per-op selective AC policy keeps for one block of attention and/or MLP sub-layers; None
    for other layers (MLA, MoE, Mamba: their per-part accounting stands).

    torchtitan's "op" policy (torchtitan/parallelisms/parallelize_llama.py, _save_list and
    _get_custom_policy at 9dec370) counts the aten.mm calls of one block's forward and saves the
    output of the odd-numbered ones (1st, 3rd, ...), every SDPA output and, under TP, every
    reduce-scatter output; all else (norms, rope, SwiGLU, residual adds) is recomputed from the
    block's input, which the checkpoint keeps. The block runs wq, wk, wv, wo, then w1, w3, w2
    (SwiGLU: w2(silu(w1 x) * w3 x)) or fc1, fc2; per rank a column-parallel output is width/tp and a
    row-parallel one is the whole h (a partial sum, before its reduce-scatter to h/tp under SP).
    """
    if "mamba" in parts or "moe" in parts or ("attn" in parts and model.mla is not None):
        return None
    h, t, b = model.hidden_size, plan.tp, cal.ACT_BYTES
    sp = t if plan.sp and t > 1 else 1
    widths: list[float] = []
    kept = h / sp  # the block input
    if "attn" in parts:
        widths += [model.q_width / t, model.kv_width / t, model.kv_width / t, h]
        kept += model.q_width / t  # the SDPA output (its fp32 logsumexp is a/t floats: left out)
    if "mlp" in parts:
        f = model.ffn_hidden_size / t
        widths += [f, f, h] if model.ffn_activation == "swiglu" else [f, h]
    kept += sum(widths[0::2])  # the odd-numbered matmuls
    if sp > 1:
        kept += len([p for p in parts if p in ("attn", "mlp")]) * h / sp  # the reduce-scatter outputs
    return tokens * b * kept
