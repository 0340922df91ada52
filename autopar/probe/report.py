"""What `autopar profile` prints: a summary of the profile it wrote, and with
``--compare NAME`` the measured numbers beside another profile's, with ratios.

Both work on parsed ``HardwareProfile`` values (the file just written, read
back), so they show what ``suggest`` will see, and need no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from autopar.spec.hardware import COLLECTIVES, HardwareProfile, fit_for


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One compared quantity: larger is better for all of them."""

    label: str  # what is compared, at which size
    measured: float  # value in the measured profile
    reference: float  # value in the reference profile
    unit: str  # TFLOP/s, GB/s, GiB

    @property
    def ratio(self) -> float:
        return self.measured / self.reference if self.reference else float("inf")


def gemm_plateau(p: HardwareProfile, dtype: str, flops: float | None = None) -> float:
    """Achieved GEMM FLOP/s at ``flops`` (default: the largest measured size)."""
    x = flops if flops is not None else p.gemm_eff[dtype].xs[-1]
    return p.peak(dtype) * p.gemm_efficiency(dtype, x)


def attention_rate(p: HardwareProfile, dtype: str, seq_len: float | None = None) -> float:
    x = seq_len if seq_len is not None else p.attn_eff[dtype].xs[-1]
    return p.peak(dtype) * p.attention_efficiency(dtype, x)


def _tier(p: HardwareProfile, tier: str) -> dict[str, tuple]:
    return p.intra if tier == "intra" else p.inter


def compare_rows(measured: HardwareProfile, reference: HardwareProfile) -> list[Row]:
    """Measured against reference, at the measured profile's sizes and group sizes."""
    rows = []
    for dtype, curve in measured.gemm_eff.items():
        if dtype in reference.peak_flops and dtype in measured.peak_flops:
            x = curve.xs[-1]
            m, r = gemm_plateau(measured, dtype, x), gemm_plateau(reference, dtype, x)
            rows.append(Row(label=f"GEMM {dtype} at {x:.3g} FLOP", measured=m / 1e12, reference=r / 1e12, unit="TFLOP/s"))
    for dtype, curve in measured.attn_eff.items():
        if dtype in reference.peak_flops:
            s = curve.xs[-1]
            m, r = attention_rate(measured, dtype, s), attention_rate(reference, dtype, s)
            rows.append(Row(label=f"attention {dtype} seq {s:.0f}", measured=m / 1e12, reference=r / 1e12, unit="TFLOP/s"))
    rows.append(
        Row(
            label="HBM bandwidth (achieved)",
            measured=measured.hbm_bytes_per_s * measured.memory_efficiency / 1e9,
            reference=reference.hbm_bytes_per_s * reference.memory_efficiency / 1e9,
            unit="GB/s",
        )
    )
    rows.append(Row(label="device memory", measured=measured.memory_bytes / 2**30, reference=reference.memory_bytes / 2**30, unit="GiB"))
    for tier in ("intra", "inter"):
        copied = " (fallback)" if tier in measured.provenance or "collectives" in measured.provenance else ""
        for coll in COLLECTIVES:
            fit = _tier(measured, tier)[coll][-1]
            ref = fit_for(_tier(reference, tier)[coll], fit.group_size)
            at = f"n={fit.group_size}" + (f" (ref n={ref.group_size})" if ref.group_size != fit.group_size else "")
            rows.append(
                Row(
                    label=f"{coll} {tier} {at} bus bw{copied}",
                    measured=fit.bw_bytes_per_s / 1e9,
                    reference=ref.bw_bytes_per_s / 1e9,
                    unit="GB/s",
                )
            )
    return rows


def _ratio_cell(ratio: float) -> str:
    colour = "red" if ratio < 0.8 else "yellow" if ratio < 0.95 else "green"
    return f"[{colour}]{ratio:.2f}[/]"


def print_compare(console: Console, measured: HardwareProfile, reference: HardwareProfile) -> None:
    table = Table(title=f"measured ({measured.name}) vs {reference.name} ({reference.source})")
    for col, just in (("quantity", "left"), ("measured", "right"), (reference.name, "right"), ("unit", "left"), ("ratio", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for row in compare_rows(measured, reference):
        table.add_row(row.label, f"{row.measured:,.1f}", f"{row.reference:,.1f}", row.unit, _ratio_cell(row.ratio))
    console.print(table)


def print_summary(console: Console, p: HardwareProfile, path: str) -> None:
    compute = Table(title=f"{p.gpu_name}: compute and memory")
    for col in ("quantity", "achieved", "peak", "efficiency"):
        compute.add_column(col, justify="left" if col == "quantity" else "right")
    rows = [(f"GEMM {d} (largest)", d, gemm_plateau(p, d)) for d in p.gemm_eff]
    rows += [(f"attention {d} seq {p.attn_eff[d].xs[-1]:.0f}", d, attention_rate(p, d)) for d in p.attn_eff]
    for label, dtype, rate in rows:
        peak = p.peak(dtype)
        compute.add_row(label, f"{rate / 1e12:,.1f} TFLOP/s", f"{peak / 1e12:,.1f}", f"{rate / peak:.2f}")
    hbm = p.hbm_bytes_per_s * p.memory_efficiency
    compute.add_row("memory copy", f"{hbm / 1e9:,.0f} GB/s", f"{p.hbm_bytes_per_s / 1e9:,.0f}", f"{p.memory_efficiency:.2f}")
    compute.add_row("device memory", f"{p.memory_bytes / 2**30:,.1f} GiB", "", "")
    console.print(compute)
    comm = Table(title="collectives: t = latency + factor x bytes / bus bw")
    for col in ("tier", "collective", "group", "latency us", "bus GB/s"):
        comm.add_column(col, justify="left" if col in ("tier", "collective") else "right")
    for tier in ("intra", "inter"):
        note = " (fallback)" if tier in p.provenance or "collectives" in p.provenance else ""
        for coll in COLLECTIVES:
            for fit in _tier(p, tier)[coll]:
                comm.add_row(tier + note, coll, str(fit.group_size), f"{fit.latency_s * 1e6:,.1f}", f"{fit.bw_bytes_per_s / 1e9:,.2f}")
    console.print(comm)
    console.print(f"overlap slowdown: compute x{p.compute_slowdown:.2f}, communication x{p.comm_slowdown:.2f}")
    console.print(f"wrote {path}")
