"""The kernels of one micro-batch as a stack runs them: GEMMs, memory-bound work, FP8 casts, recompute policy.

Hardware curves give what a kernel reaches alone; the stack says which kernels
run (FA2 or FA3-class attention, fused or eager elementwise ops, separate FP8
casts) and what selective recompute redoes. cost/compute.py builds layers from these.
"""

from __future__ import annotations

from autopar.cost import calibration as cal
from autopar.cost.flops import Gemm
from autopar.cost.shape import Shape
from autopar.spec.hardware import HardwareProfile

GEMM_CACHE = 1 << 16  # gemm_time's entries before it starts over (serving and variable lengths price many sizes)
_GEMMS: dict[tuple[int, str, float, bool], tuple[HardwareProfile, float]] = {}


def sustained(hw: HardwareProfile, *, serving: bool = False) -> float:
    """The share of the profile's isolated-kernel tensor-core rate (GEMM and attention curves) a training
    run (or, `serving`, an engine) sustains on this GPU: the profile's own value (gpu.sustained_tensor_efficiency,
    per GPU), else cost/calibration.py's for a profile that gives none."""
    own = hw.sustained_tensor_efficiency
    if own is not None:
        return own
    return cal.SERVING_SUSTAINED_TENSOR_EFFICIENCY if serving else cal.SUSTAINED_TENSOR_EFFICIENCY


def gemm_time(hw: HardwareProfile, dtype: str, flops: float, *, serving: bool = False) -> float:
    """Seconds of a GEMM of `flops` on `hw`'s curve. Kept per (profile, dtype, size, serving): a MoE search
    prices ~10^4 GEMMs of ~10^2 sizes. An entry holds its profile, so the profile's id names it while cached."""
    key = (id(hw), dtype, flops, serving)
    hit = _GEMMS.get(key)
    if hit is not None and hit[0] is hw:
        return hit[1]
    value = hw.gemm_flops_per_efficiency(dtype, flops) / (hw.peak(dtype) * sustained(hw, serving=serving))
    if len(_GEMMS) >= GEMM_CACHE:
        _GEMMS.clear()
    _GEMMS[key] = (hw, value)
    return value


def gemm_time_floor(hw: HardwareProfile, dtype: str, flops: float) -> float:
    """A lower bound of the GEMM time of `flops` however they are split: at the curve's best efficiency
    (gemm_time never runs faster; a curve's points below 1 FLOP would extrapolate above its best)."""
    curve = hw.gemm_eff.get(dtype) or hw.gemm_eff["bf16"]
    best = max(curve.ys) * max(1.0, 1.0 / curve.xs[0])
    return flops / best / (hw.peak(dtype) * sustained(hw))


def gemms_time(hw: HardwareProfile, dtype: str, gemms: tuple[Gemm, ...], *, serving: bool = False) -> float:
    return sum(gemm_time(hw, dtype, g.flops, serving=serving) * g.count for g in gemms)


def memory_time(hw: HardwareProfile, nbytes: float) -> float:
    return nbytes / (hw.hbm_bytes_per_s * hw.memory_efficiency)


# GPUs whose profile attention curve is a Hopper-class kernel (FA3 or cuDNN with wgmma/TMA);
# FlashAttention-2 has no such path there (Shah et al. 2024, sec. 1), so a stack's FA2
# ratio applies to them only. A100/L40S profiles already carry FA2 curves.
_HOPPER_OR_LATER = ("H100", "H200", "H800", "H20", "GH200", "B100", "B200", "GB200", "B300")


def hopper_or_later(hw: HardwareProfile) -> bool:
    name = hw.gpu_name.upper()
    return any(tag in name for tag in _HOPPER_OR_LATER)


def elementwise_time(hw: HardwareProfile, shape: Shape, nbytes: float) -> float:
    """Memory-bound norm/rope/activation/residual work, as many HBM passes as the stack makes."""
    return memory_time(hw, shape.stack.elementwise_passes * nbytes)


def fp8_cast_time(hw: HardwareProfile, shape: Shape, gemms: tuple[Gemm, ...]) -> float:
    """Forward + backward FP8 scaling and casting of GEMM inputs the stack does not fuse.

    Forward casts each GEMM's input (m x k), backward its output gradient (m x n);
    torchao's tensorwise recipe casts each plainly and transposed (torchao float8
    README), at the stack's fp8_cast_bytes per element.
    """
    if shape.dtype != "fp8" or not shape.stack.fp8_cast_bytes:
        return 0.0
    elems = sum(g.m * (g.k + g.n) * g.count for g in gemms)
    return memory_time(hw, shape.stack.fp8_cast_bytes * elems)


def op_sac(shape: Shape, gemm_fwd: float, elementwise_fwd: float) -> float | None:
    """Per-op selective AC (torchtitan's "op" policy) recomputes every second matmul and all
    elementwise ops; it keeps the attention kernel's output (torchtitan
    parallelize_llama _save_list). None when the stack's selective is Megatron's."""
    return 0.5 * gemm_fwd + elementwise_fwd if shape.stack.selective == "op" else None
