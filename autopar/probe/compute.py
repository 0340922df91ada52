"""What one device can compute: GEMMs, causal attention, memory copies.

- GEMM: square M = N = K over a sweep of sizes and every dtype the device runs
  (fp8 through ``torch._scaled_mm`` on compute capability 8.9+; tf32 is fp32
  with TF32 tensor cores allowed, fp32 with them forbidden).
- Attention: ``scaled_dot_product_attention(is_causal=True)`` forward and
  backward; FLOPs by the FlashAttention convention (see ``results.AttnPoint``).
- Memory: ``copy_`` of a large buffer; it reads and writes it, so 2 x bytes moved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from autopar.probe import runtime
from autopar.probe.results import AttnPoint, ComputeResult, DeviceInfo, GemmPoint
from autopar.probe.settings import Settings
from autopar.probe.timing import Timer

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}


def sync_fn(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


@contextmanager
def _tf32(allowed: bool) -> Iterator[None]:
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _gemm_op(dtype: str, size: int, device: torch.device) -> Callable[[], object]:
    """One call of a size^3 GEMM in ``dtype``, with its operands allocated once."""
    if dtype == "fp8":
        a = torch.randn(size, size, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device=device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device, dtype=torch.float32)
        bt = b.t()  # _scaled_mm wants the second operand column-major
        return lambda: torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    a = torch.randn(size, size, device=device, dtype=TORCH_DTYPES[dtype])
    b = torch.randn(size, size, device=device, dtype=TORCH_DTYPES[dtype])
    out = torch.empty(size, size, device=device, dtype=TORCH_DTYPES[dtype])
    return lambda: torch.mm(a, b, out=out)


def unsupported(dtype: str, device: torch.device) -> str:
    """Why ``dtype`` is skipped on this device, or '' if it is measured."""
    if device.type == "cpu" and dtype in ("fp8", "tf32", "fp16"):
        return f"{dtype}: not measured on CPU"
    if device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        if dtype == "fp8" and (cap < (8, 9) or not hasattr(torch, "_scaled_mm")):
            return f"fp8: needs compute capability 8.9+ and torch._scaled_mm (this GPU is {cap[0]}.{cap[1]})"
        if dtype == "bf16" and cap < (8, 0):
            return f"bf16: no bf16 tensor cores before compute capability 8.0 (this GPU is {cap[0]}.{cap[1]})"
        if dtype == "tf32" and cap < (8, 0):
            return "tf32: needs compute capability 8.0+"
    return ""


def gemm_sweep(settings: Settings, device: torch.device, timer: Timer, step: Callable[..., None]) -> tuple[list[GemmPoint], list[str]]:
    points: list[GemmPoint] = []
    notes: list[str] = []
    for dtype in settings.gemm_dtypes:
        why = unsupported(dtype, device)
        if why:
            notes.append(why)
            continue
        step(f"GEMM {dtype}")
        try:
            with _tf32(dtype == "tf32"):
                for size in settings.gemm_sizes:
                    seconds = timer.median_s(_gemm_op(dtype, size, device))
                    points.append(GemmPoint(dtype=dtype, m=size, n=size, k=size, seconds=seconds))
        except (RuntimeError, TypeError) as exc:  # an op this build or GPU lacks: skip the dtype, say why
            if dtype == "bf16":
                raise
            points = [p for p in points if p.dtype != dtype]
            notes.append(f"{dtype}: skipped ({str(exc).splitlines()[0][:120]})")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return points, notes


def attention_sweep(settings: Settings, device: torch.device, timer: Timer, step: Callable[..., None]) -> list[AttnPoint]:
    dtypes = ("bf16", "fp16") if device.type == "cuda" and not settings.quick else ("bf16",)
    points = []
    for dtype in dtypes:
        for head_dim in settings.attn_head_dims:
            step(f"attention {dtype} d={head_dim}")
            for seq in settings.attn_seq_lens:
                batch = max(1, settings.attn_tokens // seq)
                shape = (batch, settings.attn_heads, seq, head_dim)
                q, k, v = (torch.randn(shape, device=device, dtype=TORCH_DTYPES[dtype], requires_grad=True) for _ in range(3))
                grad = torch.randn(shape, device=device, dtype=TORCH_DTYPES[dtype])

                def fwd_bwd(q: Any = q, k: Any = k, v: Any = v, grad: Any = grad) -> object:
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    return torch.autograd.grad(out, (q, k, v), grad)

                seconds = timer.median_s(fwd_bwd)
                points.append(
                    AttnPoint(dtype=dtype, seq_len=seq, head_dim=head_dim, heads=settings.attn_heads, batch=batch, seconds=seconds)
                )
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return points


def copy_bandwidth(settings: Settings, device: torch.device, timer: Timer) -> float:
    """Bytes/s of a device-to-device copy (read + write counted)."""
    elems = settings.hbm_bytes // 4
    src = torch.randn(elems, device=device)
    dst = torch.empty_like(src)
    seconds = timer.median_s(lambda: dst.copy_(src))
    return 2 * elems * 4 / seconds


def device_info(device: torch.device, *, copy_bytes_per_s: float, procs_per_node: int) -> DeviceInfo:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo(
            kind="cuda",
            name=torch.cuda.get_device_name(device),
            memory_bytes=float(props.total_memory),
            copy_bytes_per_s=copy_bytes_per_s,
            driver=runtime.nvidia_driver(),
            cuda=str(torch.version.cuda or getattr(torch.version, "hip", None) or "unknown"),
            torch=str(torch.__version__),
            nccl=runtime.nccl_version(torch),
        )
    return DeviceInfo(
        kind="cpu",
        name=runtime.cpu_name(),
        memory_bytes=runtime.physical_memory_bytes() / max(1, procs_per_node),
        copy_bytes_per_s=copy_bytes_per_s,
        driver="n/a",
        cuda="n/a",
        torch=str(torch.__version__),
        nccl="n/a",
    )


def measure_device(settings: Settings, device: torch.device, *, procs_per_node: int, step: Callable[..., None]) -> ComputeResult:
    """The whole compute sweep on this rank's device."""
    timer = Timer.of(settings, sync_fn(device))
    gemm, notes = gemm_sweep(settings, device, timer, step)
    attention = attention_sweep(settings, device, timer, step)
    step("memory bandwidth")
    bw = copy_bandwidth(settings, device, timer)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    info = device_info(device, copy_bytes_per_s=bw, procs_per_node=procs_per_node)
    return ComputeResult(device=info, gemm=tuple(gemm), attention=tuple(attention), notes=tuple(notes))


def compute_steps(settings: Settings, device: torch.device) -> int:
    """How many ``step`` calls ``measure_device`` makes (for the progress bar)."""
    dtypes = [d for d in settings.gemm_dtypes if not unsupported(d, device)]
    attn_dtypes = 2 if device.type == "cuda" and not settings.quick else 1
    return len(dtypes) + attn_dtypes * len(settings.attn_head_dims) + 1
