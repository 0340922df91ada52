"""Hardware profile loaders: built-in names, profile YAML files and the profile
saved by `autopar profile`; the schema is documented in :mod:`autopar.spec.hardware`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import ProfileError
from autopar.io.cache import builtin
from autopar.io.files import exists, xdg_folder
from autopar.io.reading import did_you_mean, load_mapping, named, shown
from autopar.spec.hardware import (
    COLLECTIVES,
    CORRECTIONS,
    DEFAULT_HARDWARE,
    SCHEMA_VERSION,
    CollectiveFit,
    Correction,
    Curve,
    HardwareProfile,
)


def builtin_names() -> list[str]:
    root = resources.files("autopar") / "data" / "profiles"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def config_dir() -> Path | None:
    """autopar's folder, the one place for it: $AUTOPAR_HOME, else $XDG_CONFIG_HOME/autopar, else
    ~/.config/autopar; None when there is no home (io/files.py xdg_folder)."""
    return xdg_folder("AUTOPAR_HOME", "XDG_CONFIG_HOME", ".config")


def saved_profile() -> Path | None:
    """The profile saved by `autopar profile`, if there is one (no home: none)."""
    folder = config_dir()
    path = None if folder is None else folder / "profile.yaml"
    return path if path is not None and path.exists() else None


def saved_profile_path(*, instead: str = "") -> Path:
    """Where `autopar profile` saves by default; with no home, an error saying how to name one (and `instead`,
    what else the command takes)."""
    folder = config_dir()
    if folder is None:
        raise ProfileError(
            f"no folder for the saved profile: HOME is not set and uid {os.getuid()} has no passwd "
            f"entry; set AUTOPAR_HOME or XDG_CONFIG_HOME to a folder{instead}"
        )
    return folder / "profile.yaml"


def resolve_hardware(ref: str | None) -> tuple[HardwareProfile, str]:
    """The profile to use and a sentence saying why: --hardware, the saved one, or the default."""
    if ref is not None:
        if not ref.strip():
            raise ProfileError("`hardware` is empty: give a built-in name (see `autopar hardware`) or a profile .yaml")
        return load_hardware(ref), f"--hardware {ref}"
    saved = saved_profile()
    if saved is not None:
        return load_hardware(str(saved)), f"profile saved by `autopar profile` ({saved})"
    return load_hardware(DEFAULT_HARDWARE), f"built-in default {DEFAULT_HARDWARE} (no --hardware, no saved profile)"


def load_hardware(ref: str) -> HardwareProfile:
    """A built-in profile name or a path to a profile YAML."""
    path = Path(ref)
    if path.suffix.lower() in (".yaml", ".yml") or exists(path):
        return _parse(load_mapping(path, err=ProfileError), where=named(path), folder=path.parent)
    names = builtin_names()
    if ref not in names:
        raise ProfileError(
            f"unknown hardware '{named(ref)}'{did_you_mean(ref, names)}: give a built-in name (see `autopar hardware`) or a profile .yaml"
        )
    return builtin("hardware", ref, HardwareProfile, lambda: _builtin_profile(ref))


def _builtin_profile(name: str) -> HardwareProfile:
    """A built-in profile read from its file (io/cache.py keeps the value between runs)."""
    with resources.as_file(resources.files("autopar") / "data" / "profiles" / f"{name}.yaml") as p:
        return _parse(load_mapping(p, err=ProfileError), where=named(p), folder=None)


def _parse(data: dict[str, Any], *, where: str, folder: Path | None) -> HardwareProfile:
    if "base" not in data:
        return parse_profile(data, where=where)
    return _variant(data, where=where, folder=folder)


def _variant(data: dict[str, Any], *, where: str, folder: Path | None) -> HardwareProfile:
    """A profile derived from another: `base` (a built-in name or a profile file beside this one),
    `overrides` (a partial profile merged over the base: memory size, HBM, NIC fits...) and an
    optional `power` cap.

    A power cap lowers the tensor-core clock: dynamic power goes as f x V^2 and DVFS moves
    V with f, so P ~ f^3 (Weste & Harris, CMOS VLSI Design, sec. 5.2), and a GPU that draws
    its full budget in training runs at (limit / tdp)^(1/3) of the clock it reaches at its
    rated board power; the peak FLOP/s scale with it, HBM and links do not.
    """
    from autopar.io.schema import VariantFile, validate  # pydantic: only once a file is read

    v = validate(VariantFile, data, where=where, err=ProfileError)
    ref = v.base
    base_path = folder / ref if folder is not None and exists(folder / ref) else None
    if base_path is not None:
        base = load_mapping(base_path, err=ProfileError)
    elif ref in builtin_names():
        with resources.as_file(resources.files("autopar") / "data" / "profiles" / f"{ref}.yaml") as p:
            base = load_mapping(p, err=ProfileError)
    else:
        raise ProfileError(f"{where}: base: unknown base profile {shown(ref)}{did_you_mean(ref, builtin_names())}")
    if "base" in base:
        raise ProfileError(f"{where}: base: {shown(ref)} is itself a variant; derive from a full profile")
    overrides = data.get("overrides") or {}
    merged = _merge(base, overrides)
    merged["schema_version"] = v.schema_version
    merged["name"] = v.name
    given = overrides.get("gpu")
    # not the base's GPU: unless the variant names it, say which variant it is
    if not (isinstance(given, dict) and "name" in given) and isinstance(merged.get("gpu"), dict):
        merged["gpu"] = {**merged["gpu"], "name": f"{merged['gpu'].get('name', ref)} ({merged['name']})"}
    merged["description"] = v.description or f"{base.get('description', ref)} (variant)"
    merged["citations"] = {**(merged.get("citations") or {}), **(v.citations or {})}
    ratio = 1.0
    if v.power is not None:
        tdp, limit = v.power.tdp_w, v.power.limit_w
        if limit > tdp:
            raise ProfileError(f"{where}: power.limit_w: power limit ({limit:g} W) above the rated board power ({tdp:g} W)")
        ratio = (limit / tdp) ** (1 / 3)  # limit_w and tdp_w are in [MIN_POWER_W, MAX_POWER_W]: ratio >= 0.02
    profile = parse_profile(merged, where=where)
    peaks = {dtype: flops * ratio for dtype, flops in profile.peak_flops.items()}
    return replace(profile, peak_flops=peaks)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base`: mappings recursively, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def parse_profile(data: dict[str, Any], *, where: str) -> HardwareProfile:
    """A profile mapping (autopar.io.schema.ProfileFile) as a HardwareProfile; one line naming the field if not."""
    from autopar.io.schema import ProfileFile, validate  # pydantic: only once a file is read

    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise ProfileError(
            f"{where}: schema_version: profile is from a newer autopar (schema {version}, this one reads {SCHEMA_VERSION}); upgrade autopar"
        )

    def fail(field: str, msg: str) -> ProfileError:
        return ProfileError(f"{where}: {field}: {msg}")

    named_corrections = data.get("corrections")
    for name in named_corrections if isinstance(named_corrections, dict) else ():
        if name not in CORRECTIONS:  # before the bodies: a misspelt name is the likelier mistake
            raise fail(
                "corrections",
                f"unknown correction {shown(name)}{did_you_mean(str(name), list(CORRECTIONS))}; known: {', '.join(CORRECTIONS)}",
            )
    p = validate(ProfileFile, data, where=where, err=ProfileError)

    if "bf16" not in p.gpu.peak_tflops:
        raise fail("gpu.peak_tflops", "must give bf16")
    if p.source == "datasheet" and p.citations is None:
        raise fail("citations", "missing required field")
    if p.node.gpus_per_host is not None and p.node.gpus_per_node % p.node.gpus_per_host:
        raise fail("node.gpus_per_host", f"must divide gpus_per_node ({p.node.gpus_per_node}), got {p.node.gpus_per_host}")
    return HardwareProfile(
        name=p.name,
        description=p.description,
        source=p.source,
        gpu_name=p.gpu.name,
        memory_bytes=p.gpu.memory_gib * 2**30,
        hbm_bytes_per_s=p.gpu.hbm_bw_gbps * 1e9,
        memory_efficiency=p.gpu.memory_efficiency,
        peak_flops={str(k): v * 1e12 for k, v in p.gpu.peak_tflops.items()},
        gemm_eff=_curves(p.gpu.gemm_efficiency, "gpu.gemm_efficiency", fail),
        attn_eff=_curves(p.gpu.attention_efficiency, "gpu.attention_efficiency", fail),
        sustained_tensor_efficiency=p.gpu.sustained_tensor_efficiency,
        gpus_per_node=p.node.gpus_per_node,
        gpus_per_host=p.node.gpus_per_host,
        intra=_collectives(p.node.intra),
        inter=_collectives(p.cluster.inter),
        compute_slowdown=p.overlap.compute_slowdown,
        comm_slowdown=p.overlap.comm_slowdown,
        provenance=dict(p.provenance or {}),
        citations=dict(p.citations or {}),
        path=where,
        corrections=_corrections(p.corrections or {}, fail),
    )


def _corrections(raw: dict[str, Any], fail: Callable[[str, str], ProfileError]) -> tuple[Correction, ...]:
    """The optional ``corrections`` section: name -> {factor, stack, source}, each factor within its bounds."""
    out = []
    for name, body in raw.items():
        low, high = CORRECTIONS[name]
        if not low <= body.factor <= high:
            raise fail(f"corrections.{name}.factor", f"must lie in [{low}, {high}], got {body.factor}")
        out.append(Correction(name=str(name), factor=body.factor, stack=body.stack, source=body.source))
    return tuple(out)


def _curves(raw: Mapping[Any, list[tuple[float, float]]], key: str, fail: Callable[[str, str], ProfileError]) -> dict[str, Curve]:
    """Each dtype's [size, efficiency] points (each number bounded by the schema), sorted by size."""
    if "bf16" not in raw:
        raise fail(key, "must give a bf16 curve")
    out = {}
    for dtype, points in raw.items():
        pairs = sorted(points)
        if len({x for x, _ in pairs}) != len(pairs):
            raise fail(f"{key}.{dtype}", "sizes must be distinct")
        out[str(dtype)] = Curve(xs=tuple(x for x, _ in pairs), ys=tuple(y for _, y in pairs))
    return out


def _collectives(raw: Any) -> dict[str, tuple[CollectiveFit, ...]]:
    out = {}
    for coll in COLLECTIVES:
        fits = [
            CollectiveFit(group_size=f.group_size, latency_s=f.latency_us * 1e-6, bw_bytes_per_s=f.bw_gbps * 1e9)
            for f in getattr(raw, coll)
        ]
        out[coll] = tuple(sorted(fits, key=lambda c: c.group_size))
    return out
