"""Measurements -> a hardware profile (schema 1, as ``autopar.spec.hardware`` reads it).

Peaks come from the datasheet table when the GPU is known, else from the best
rate measured (and the provenance says which). Collectives are fitted per
(collective, tier, group size). What could not be measured is filled by a
documented fallback and named in ``provenance``:

- one process: no collectives; ``intra``, ``inter`` and ``overlap`` are copied
  from the built-in profile of the same GPU, else set to placeholders (a PCIe
  Gen4 x16 link inside the node, a 100 Gb/s NIC between nodes);
- one node: no ``inter``; copied from the built-in profile of the same GPU,
  else from the measured ``intra`` fits (optimistic for a real network);
- one GPU per node: no ``intra``; copied from the measured ``inter`` fits.

The document is validated with ``hardware.parse_profile`` before it touches
the disk, and written atomically (a temporary file in the same directory, then
``os.replace``), so an interrupted run leaves an earlier profile as it was.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from autopar.errors import ProfileError
from autopar.io.files import write_atomic
from autopar.io.installed import version
from autopar.io.profiles import load_hardware, parse_profile
from autopar.probe import peaks
from autopar.probe.fit import bus_factor, efficiency_curve, fit_alpha_beta, sig
from autopar.probe.nvml import NvmlInfo
from autopar.probe.results import Measurements
from autopar.probe.yamlio import Flow, FlowMap, dump_yaml
from autopar.spec.hardware import COLLECTIVES, SCHEMA_VERSION, HardwareProfile

# (latency_us, bw_gbps) used only when nothing was measured and no built-in profile of this GPU exists
PLACEHOLDER = {"intra": (10.0, 20.0), "inter": (30.0, 10.0)}  # PCIe Gen4 x16 (~25 GB/s raw); 100 Gb/s NIC (12.5 GB/s raw)


def _fit_entry(group_size: int, latency_s: float, bw_bytes_per_s: float) -> FlowMap:
    return FlowMap(group_size=group_size, latency_us=sig(latency_s * 1e6), bw_gbps=sig(bw_bytes_per_s / 1e9))


def _from_profile(fits: dict[str, Any]) -> dict[str, list[FlowMap]]:
    return {c: [_fit_entry(f.group_size, f.latency_s, f.bw_bytes_per_s) for f in fits[c]] for c in COLLECTIVES}


def _placeholder(tier: str) -> dict[str, list[FlowMap]]:
    lat_us, bw = PLACEHOLDER[tier]
    return {c: [_fit_entry(2, lat_us * 1e-6, bw * 1e9)] for c in COLLECTIVES}


def _reference(sheet: peaks.Datasheet | None) -> HardwareProfile | None:
    name = peaks.builtin_for(sheet)
    if name is None:
        return None
    try:
        return load_hardware(name)
    except ProfileError:
        return None


def _fits(meas: Measurements, raw: dict[str, Any]) -> dict[str, dict[str, list[FlowMap]]]:
    """Fitted tiers from the raw points; the raw points and fit quality go to ``raw``."""
    grouped: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
    for p in meas.collectives:
        grouped[(p.tier, p.collective, p.group_size)].append((float(p.nbytes), p.seconds))
    tiers: dict[str, dict[str, list[FlowMap]]] = {}
    for (tier, coll, g), pts in sorted(grouped.items()):
        factor = bus_factor(coll, g)
        ab = fit_alpha_beta(pts, factor=factor)
        tiers.setdefault(tier, {}).setdefault(coll, []).append(_fit_entry(g, ab.latency_s, ab.bw_bytes_per_s))
        rows = [Flow([int(b), sig(t), sig(factor * b / t / 1e9)]) for b, t in pts]
        raw["collectives"].setdefault(tier, {}).setdefault(coll, {})[g] = rows
        quality = FlowMap(max_rel_err=sig(ab.max_rel_err, 3), **({"note": ab.note} if ab.note else {}))
        raw["fit_quality"].setdefault(tier, {}).setdefault(coll, {})[g] = quality
    return tiers


def _peaks(meas: Measurements, sheet: peaks.Datasheet | None, prov: dict[str, str]) -> dict[str, float]:
    best: dict[str, float] = {}
    for p in meas.compute.gemm:
        best[p.dtype] = max(best.get(p.dtype, 0.0), p.flops_per_s)
    if "bf16" not in best:
        raise ProfileError("no bf16 GEMM was measured; a profile needs bf16")
    known = sheet.peaks() if sheet else {}
    out = {d: known.get(d, best[d] / 1e12) for d in best}
    guessed = sorted(d for d in best if d not in known)
    if sheet is None:
        prov["peak_tflops"] = f"best measured rate per dtype (no datasheet entry for '{meas.compute.device.name}')"
    elif guessed:
        prov["peak_tflops"] = f"datasheet ({sheet.key}); best measured for {', '.join(guessed)}"
    else:
        prov["peak_tflops"] = f"datasheet ({sheet.key}), dense"
    return {d: sig(v) for d, v in out.items()}


def _curves(points: list[tuple[str, float, float]], peak_tflops: dict[str, float], prov: dict[str, str], key: str) -> dict[str, Flow]:
    out: dict[str, Flow] = {}
    for dtype in sorted({d for d, _, _ in points}, key=lambda d: (d != "bf16", d)):
        curve, clamped = efficiency_curve([(x, r) for d, x, r in points if d == dtype], peak=peak_tflops[dtype] * 1e12)
        out[dtype] = Flow(Flow(p) for p in curve)
        if clamped:
            prov[f"{key}.{dtype}"] = "measured rate exceeded the peak at some sizes; clamped to 1.0"
    return out


def _provenance(meas: Measurements, *, hostname: str, date: str, nvml: tuple[NvmlInfo | None, str] | None) -> dict[str, str]:
    """Where the timings came from: the host, the software versions, the run and what NVML said."""
    dev, topo = meas.compute.device, meas.topology
    prov: dict[str, str] = {
        "date": date,
        "hostname": hostname,
        "gpu_name": dev.name,
        "driver": dev.driver,
        "cuda": dev.cuda,
        "torch": dev.torch,
        "nccl": dev.nccl,
        "tool_version": version(),
        "device": dev.kind,
        "launcher": topo.launcher,
        "world_size": str(topo.world_size),
        "nodes": str(topo.nodes),
        "quick": str(meas.quick).lower(),
        "duration_s": f"{meas.duration_s:.1f}",
    }
    if nvml is not None:
        info, how = nvml
        prov["nvml"] = how
        if info is not None:
            prov.update(info.as_provenance())
    return prov


def _memory_bandwidth(copy_gbps: float, sheet: peaks.Datasheet | None, prov: dict[str, str]) -> tuple[float, float]:
    """(hbm_bw_gbps, memory_efficiency): the datasheet's bandwidth and the measured copy's share of it."""
    if sheet is not None:
        hbm_gbps, mem_eff = sheet.hbm_bw_gbps, min(1.0, copy_gbps / sheet.hbm_bw_gbps)
        prov["hbm_bw_gbps"] = f"datasheet ({sheet.key}); memory_efficiency = measured copy {copy_gbps:.0f} GB/s / datasheet"
    else:
        hbm_gbps, mem_eff = copy_gbps, 1.0
        prov["hbm_bw_gbps"] = "measured copy bandwidth (no datasheet entry); memory_efficiency 1.0 by construction"
    return hbm_gbps, mem_eff


def _tiers(
    meas: Measurements, reference: HardwareProfile | None, raw: dict[str, Any], prov: dict[str, str]
) -> dict[str, dict[str, list[FlowMap]]]:
    """The intra- and inter-node collective fits, each tier not measured filled by its fallback (module docstring)."""
    tiers = _fits(meas, raw)
    ref_note = f"copied from built-in profile '{reference.name}'" if reference else ""
    if not meas.collectives:
        if reference is not None:
            tiers = {"intra": _from_profile(reference.intra), "inter": _from_profile(reference.inter)}
            prov["collectives"] = f"not measured (one process); {ref_note}"
        else:
            tiers = {"intra": _placeholder("intra"), "inter": _placeholder("inter")}
            prov["collectives"] = (
                "not measured (one process) and no built-in profile of this GPU: placeholders "
                "(intra 10 us, 20 GB/s ~ PCIe Gen4 x16; inter 30 us, 10 GB/s ~ 100 Gb/s NIC); run with 2+ processes"
            )
    if "inter" not in tiers:
        if reference is not None:
            tiers["inter"] = _from_profile(reference.inter)
            prov["inter"] = f"not measured (one node); {ref_note}; run under torchrun on 2+ nodes to measure it"
        else:
            tiers["inter"] = tiers["intra"]
            prov["inter"] = "not measured (one node); copied from the measured intra fits (optimistic for a real network)"
    if "intra" not in tiers:
        tiers["intra"] = tiers["inter"]
        prov["intra"] = "not measured (one GPU per node); copied from the measured inter fits"
    return tiers


def _overlap(meas: Measurements, reference: HardwareProfile | None, raw: dict[str, Any], prov: dict[str, str]) -> tuple[float, float]:
    """(compute_slowdown, comm_slowdown) when the two overlap: measured, else the built-in profile's, else 1.0."""
    ref_note = f"copied from built-in profile '{reference.name}'" if reference else ""
    if meas.overlap is not None:
        ov = meas.overlap
        c_slow, m_slow = ov.compute_overlapped_s / ov.compute_alone_s, ov.comm_overlapped_s / ov.comm_alone_s
        prov["overlap"] = f"measured: {ov.method}; ratios compute {c_slow:.3f}, comm {m_slow:.3f} (floored at 1.0)"
        if meas.compute.device.kind == "cpu":
            prov["overlap"] += "; CPU run: those ratios measure core sharing between GEMM and gloo threads, not a GPU's; 1.0 written"
            c_slow, m_slow = 1.0, 1.0
        raw["overlap"] = FlowMap(
            compute_alone_s=sig(ov.compute_alone_s),
            compute_overlapped_s=sig(ov.compute_overlapped_s),
            comm_alone_s=sig(ov.comm_alone_s),
            comm_overlapped_s=sig(ov.comm_overlapped_s),
        )
    elif reference is not None:
        c_slow, m_slow = reference.compute_slowdown, reference.comm_slowdown
        prov["overlap"] = f"not measured (one process); {ref_note}"
    else:
        c_slow, m_slow = 1.0, 1.0
        prov["overlap"] = "not measured (one process): 1.0, i.e. no slowdown assumed"
    return c_slow, m_slow


def _raw_timings(meas: Measurements, peak_tflops: dict[str, float], copy_gbps: float, raw: dict[str, Any]) -> None:
    """The measured GEMM, attention and copy points into ``raw``, with the names of their columns."""
    raw["gemm"] = {
        d: [Flow([p.m, p.n, p.k, sig(p.seconds), sig(p.flops_per_s / 1e12)]) for p in meas.compute.gemm if p.dtype == d]
        for d in peak_tflops
    }
    raw["attention"] = [
        Flow([p.dtype, p.seq_len, p.head_dim, p.heads, p.batch, sig(p.seconds), sig(p.flops_per_s / 1e12)]) for p in meas.compute.attention
    ]
    raw["copy_gbps"] = sig(copy_gbps)
    raw["columns"] = FlowMap(
        gemm="m, n, k, seconds, TFLOP/s",
        attention="dtype, seq_len, head_dim, heads, batch, seconds (fwd+bwd), TFLOP/s",
        collectives="bytes, seconds, bus GB/s",
    )


def build_profile(
    meas: Measurements, *, name: str, hostname: str, date: str, nvml: tuple[NvmlInfo | None, str] | None = None
) -> dict[str, Any]:
    """The profile document (plain dicts and lists) for ``meas``; ``nvml``: probe.nvml.read_nvml's answer,
    whose GPU name, memory, power limit and topology go in the provenance beside the timings."""
    dev, topo = meas.compute.device, meas.topology
    sheet = peaks.lookup(dev.name, dev.memory_bytes / 2**30) if dev.kind == "cuda" else None
    prov = _provenance(meas, hostname=hostname, date=date, nvml=nvml)
    raw: dict[str, Any] = {"collectives": {}, "fit_quality": {}}
    peak_tflops = _peaks(meas, sheet, prov)
    gemm_pts = [(p.dtype, p.flops, p.flops_per_s) for p in meas.compute.gemm]
    head_dim = meas.compute.attention[0].head_dim if meas.compute.attention else 0
    attn_pts = [(p.dtype, float(p.seq_len), p.flops_per_s) for p in meas.compute.attention if p.head_dim == head_dim]
    if not attn_pts:
        raise ProfileError("no attention timings were measured; a profile needs a bf16 attention curve")
    copy_gbps = dev.copy_bytes_per_s / 1e9
    hbm_gbps, mem_eff = _memory_bandwidth(copy_gbps, sheet, prov)
    reference = _reference(sheet)
    tiers = _tiers(meas, reference, raw, prov)
    c_slow, m_slow = _overlap(meas, reference, raw, prov)
    notes = list(meas.compute.notes) + list(meas.notes)
    if notes:
        prov["notes"] = "; ".join(notes)
    _raw_timings(meas, peak_tflops, copy_gbps, raw)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "description": f"measured by autopar profile on {hostname}: {topo.world_size} x {dev.name}"
        + f" on {topo.nodes} node(s){', quick' if meas.quick else ''}",
        "source": "measured",
        "provenance": prov,
    }
    if sheet is not None:
        doc["citations"] = {"gpu.peak_tflops": sheet.citation, "gpu.hbm_bw_gbps": sheet.citation}
    doc["gpu"] = {
        "name": dev.name,
        "memory_gib": sig(dev.memory_bytes / 2**30),
        "hbm_bw_gbps": sig(hbm_gbps),
        "memory_efficiency": sig(mem_eff, 3),
        "peak_tflops": FlowMap(peak_tflops),
        "gemm_efficiency": _curves(gemm_pts, peak_tflops, prov, "gemm_efficiency"),
        "attention_efficiency": _curves(attn_pts, peak_tflops, prov, "attention_efficiency"),
    }
    doc["node"] = {"gpus_per_node": topo.local_world_size, "intra": tiers["intra"]}
    doc["cluster"] = {"inter": tiers["inter"]}
    doc["overlap"] = {"compute_slowdown": sig(max(1.0, c_slow), 3), "comm_slowdown": sig(max(1.0, m_slow), 3)}
    doc["raw"] = raw
    return doc


def write_profile(path: Path, doc: dict[str, Any]) -> None:
    """Validate ``doc`` as a profile, then write it to ``path`` atomically."""
    parse_profile(doc, where=str(path))
    text = f"# written by autopar {version()} `autopar profile`; schema: autopar/hardware.py\n" + dump_yaml(doc)
    write_atomic(path, text, option="autopar profile `out`", err=ProfileError, make_parents=True)
