"""Datasheet peaks of known GPUs, matched by the name torch reports.

Efficiency is achieved / peak, so a measured profile needs a peak per dtype.
For a GPU in this table the peak is the vendor's dense (no sparsity) figure;
for any other device (a CPU, an unlisted GPU) it is the best rate measured, and
the profile's provenance says so. Sparse datasheet figures are halved. Unknown
hardware is not guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.io.profiles import builtin_names


@dataclass(frozen=True, slots=True, kw_only=True)
class Datasheet:
    """One GPU model's dense peaks, with the source they come from."""

    key: str  # short id, also the prefix of built-in profile names of this GPU
    match: tuple[str, ...]  # all must appear (case-insensitive) in torch's device name
    exclude: tuple[str, ...]  # none may appear
    min_memory_gib: float  # tells 40 GB from 80 GB parts; 0 for any
    peak_tflops: tuple[tuple[str, float], ...]  # dtype -> dense TFLOP/s
    hbm_bw_gbps: float  # GB/s
    citation: str  # where the numbers come from

    def peaks(self) -> dict[str, float]:
        return dict(self.peak_tflops)


_HOPPER = (("bf16", 989.4), ("fp16", 989.4), ("fp8", 1978.9), ("tf32", 494.7), ("fp32", 66.9))
_AMPERE = (("bf16", 312.0), ("fp16", 312.0), ("tf32", 156.0), ("fp32", 19.5))

TABLE: tuple[Datasheet, ...] = (
    Datasheet(
        key="h200",
        match=("h200",),
        exclude=("nvl",),
        min_memory_gib=0,
        peak_tflops=_HOPPER,
        hbm_bw_gbps=4800,
        citation="NVIDIA H200 Tensor Core GPU datasheet (SXM; sparse figures halved), H100 whitepaper for the dense tensor rates",
    ),
    Datasheet(
        key="h100-pcie",
        match=("h100", "pcie"),
        exclude=(),
        min_memory_gib=0,
        peak_tflops=(("bf16", 756.0), ("fp16", 756.0), ("fp8", 1513.0), ("tf32", 378.0), ("fp32", 51.2)),
        hbm_bw_gbps=2000,
        citation="NVIDIA H100 Tensor Core GPU datasheet, PCIe column (sparse figures halved)",
    ),
    Datasheet(
        key="h100-sxm",
        match=("h100",),
        exclude=("pcie", "nvl"),
        min_memory_gib=0,
        peak_tflops=_HOPPER,
        hbm_bw_gbps=3350,
        citation="NVIDIA H100 Tensor Core GPU datasheet, SXM column (sparse figures halved)",
    ),
    Datasheet(
        key="a100-pcie",
        match=("a100", "pcie"),
        exclude=(),
        min_memory_gib=0,
        peak_tflops=_AMPERE,
        hbm_bw_gbps=1935,
        citation="NVIDIA A100 Tensor Core GPU datasheet, 80GB PCIe column (dense)",
    ),
    Datasheet(
        key="a100-sxm",
        match=("a100",),
        exclude=("pcie",),
        min_memory_gib=60,
        peak_tflops=_AMPERE,
        hbm_bw_gbps=2039,
        citation="NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column (dense)",
    ),
    Datasheet(
        key="a100-sxm-40gb",
        match=("a100",),
        exclude=("pcie",),
        min_memory_gib=0,
        peak_tflops=_AMPERE,
        hbm_bw_gbps=1555,
        citation="NVIDIA A100 Tensor Core GPU datasheet, 40GB SXM column (dense)",
    ),
    Datasheet(
        key="l40s",
        match=("l40s",),
        exclude=(),
        min_memory_gib=0,
        peak_tflops=(("bf16", 362.05), ("fp16", 362.05), ("fp8", 733.0), ("tf32", 183.0), ("fp32", 91.6)),
        hbm_bw_gbps=864,
        citation="NVIDIA L40S datasheet (sparse figures halved)",
    ),
    Datasheet(
        key="b200",
        match=("b200",),
        exclude=(),
        min_memory_gib=0,
        peak_tflops=(("bf16", 2250.0), ("fp16", 2250.0), ("fp8", 4500.0), ("tf32", 1125.0), ("fp32", 75.0)),
        hbm_bw_gbps=8000,
        citation="NVIDIA HGX B200 datasheet, per GPU (sparse figures halved)",
    ),
    Datasheet(
        key="mi300x",
        match=("mi300x",),
        exclude=(),
        min_memory_gib=0,
        peak_tflops=(("bf16", 1307.4), ("fp16", 1307.4), ("fp8", 2614.9), ("tf32", 653.7), ("fp32", 163.4)),
        hbm_bw_gbps=5300,
        citation="AMD Instinct MI300X datasheet (dense)",
    ),
)


def lookup(device_name: str, memory_gib: float) -> Datasheet | None:
    """The datasheet entry for a device name as torch reports it, or None."""
    name = device_name.lower()
    for sheet in TABLE:
        named = all(m in name for m in sheet.match) and not any(x in name for x in sheet.exclude)
        if named and memory_gib >= sheet.min_memory_gib:
            return sheet
    return None


def builtin_for(sheet: Datasheet | None) -> str | None:
    """A built-in profile of the same GPU (exact key first, then by prefix), or None."""
    if sheet is None:
        return None
    names = builtin_names()
    if sheet.key in names:
        return sheet.key
    same = [n for n in names if n.startswith(sheet.key)]
    return same[0] if same else None
