"""Hardware profile loaders: built-in names, profile YAML files and the profile
saved by `autopar profile`; the schema is documented in :mod:`autopar.spec.hardware`."""

from __future__ import annotations

import os
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import ProfileError
from autopar.io.strict import Fields, did_you_mean, load_mapping, named, one_line, shown
from autopar.spec import limits as lim
from autopar.spec.hardware import (
    COLLECTIVES,
    CORRECTIONS,
    DEFAULT_HARDWARE,
    DTYPES,
    SCHEMA_VERSION,
    CollectiveFit,
    Correction,
    Curve,
    HardwareProfile,
)


def builtin_names() -> list[str]:
    root = resources.files("autopar") / "data" / "profiles"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def saved_profile_path() -> Path:
    """Where `autopar profile` saves by default (honours AUTOPAR_HOME, then XDG_CONFIG_HOME)."""
    home = os.environ.get("AUTOPAR_HOME")
    if home:
        return Path(home) / "profile.yaml"
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autopar" / "profile.yaml"


def resolve_hardware(ref: str | None) -> tuple[HardwareProfile, str]:
    """The profile to use and a sentence saying why: --hardware, the saved one, or the default."""
    if ref:
        return load_hardware(ref), f"--hardware {ref}"
    saved = saved_profile_path()
    if saved.exists():
        return load_hardware(str(saved)), f"profile saved by `autopar profile` ({saved})"
    return load_hardware(DEFAULT_HARDWARE), f"built-in default {DEFAULT_HARDWARE} (no --hardware, no saved profile)"


def load_hardware(ref: str) -> HardwareProfile:
    """A built-in profile name or a path to a profile YAML."""
    path = Path(ref)
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return _parse(load_mapping(path, err=ProfileError), where=named(path), folder=path.parent)
    names = builtin_names()
    if ref not in names:
        raise ProfileError(
            f"unknown hardware '{named(ref)}'{did_you_mean(ref, names)}: give a built-in name (see `autopar hardware`) or a profile .yaml"
        )
    with resources.as_file(resources.files("autopar") / "data" / "profiles" / f"{ref}.yaml") as p:
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
    f = Fields(data, f"{where}: ", err=ProfileError)
    ref = f.text("base")
    base_path = folder / ref if folder is not None and (folder / ref).exists() else None
    if base_path is not None:
        base = load_mapping(base_path, err=ProfileError)
    elif ref in builtin_names():
        with resources.as_file(resources.files("autopar") / "data" / "profiles" / f"{ref}.yaml") as p:
            base = load_mapping(p, err=ProfileError)
    else:
        raise f.fail("base", f"unknown base profile '{ref}'{did_you_mean(ref, builtin_names())}")
    if "base" in base:
        raise f.fail("base", f"'{ref}' is itself a variant; derive from a full profile")
    merged = _merge(base, f.mapping("overrides", required=False) or {})
    merged["schema_version"] = f.integer("schema_version")
    merged["name"] = f.text("name")
    merged["description"] = f.text("description") if f.has("description") else f"{base.get('description', ref)} (variant)"
    f.ignore("description")
    merged["citations"] = {**(merged.get("citations") or {}), **(f.mapping("citations", required=False) or {})}
    power = Fields(f.mapping("power", required=False) or {}, f.prefix("power"), err=ProfileError)
    ratio = 1.0
    if power.has("limit_w"):
        tdp, limit = power.number("tdp_w"), power.number("limit_w")
        if limit > tdp:
            raise power.fail("limit_w", f"power limit ({limit:g} W) above the rated board power ({tdp:g} W)")
        ratio = (limit / tdp) ** (1 / 3)
    power.finish()
    f.finish()
    profile = parse_profile(merged, where=where)
    peaks = {k: v * ratio for k, v in profile.peak_flops.items()}
    return replace(profile, peak_flops=peaks)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base`: mappings recursively, anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def parse_profile(data: dict[str, Any], *, where: str) -> HardwareProfile:
    top = Fields(data, f"{where}: ", err=ProfileError)
    version = top.integer("schema_version")
    if version > SCHEMA_VERSION:
        raise top.fail(
            "schema_version", f"profile is from a newer autopar (schema {version}, this one reads {SCHEMA_VERSION}); upgrade autopar"
        )
    source = top.text("source", choices=("datasheet", "measured"))
    gpu, node, cluster, overlap = (
        Fields(top.mapping(k) or {}, top.prefix(k), err=ProfileError) for k in ("gpu", "node", "cluster", "overlap")
    )
    peaks = _float_map(gpu, "peak_tflops", scale=1e12)
    if "bf16" not in peaks:
        raise gpu.fail("peak_tflops", "must give bf16")
    profile = HardwareProfile(
        name=top.text("name"),
        description=top.text("description", ""),
        source=source,
        gpu_name=gpu.text("name"),
        memory_bytes=gpu.number("memory_gib", maximum=lim.MAX_MEMORY_GIB) * 2**30,
        hbm_bytes_per_s=gpu.number("hbm_bw_gbps", maximum=lim.MAX_HBM_GBPS) * 1e9,
        memory_efficiency=_fraction(gpu, "memory_efficiency"),
        peak_flops=peaks,
        gemm_eff=_curves(gpu, "gemm_efficiency"),
        attn_eff=_curves(gpu, "attention_efficiency"),
        gpus_per_node=node.integer("gpus_per_node", maximum=lim.MAX_GPUS_PER_NODE),
        intra=_collectives(node, "intra"),
        inter=_collectives(cluster, "inter"),
        compute_slowdown=_slowdown(overlap, "compute_slowdown"),
        comm_slowdown=_slowdown(overlap, "comm_slowdown"),
        provenance=_texts(top, "provenance", required=False),
        citations=_texts(top, "citations", required=source == "datasheet"),
        path=where,
        corrections=_corrections(top),
    )
    top.ignore("raw")
    for f in (top, gpu, node, cluster, overlap):
        f.finish()
    return profile


def _corrections(top: Fields) -> tuple[Correction, ...]:
    """The optional ``corrections`` section: name -> {factor, stack, source}, each factor within its bounds."""
    raw = top.mapping("corrections", required=False) or {}
    out = []
    for name, body in raw.items():
        if name not in CORRECTIONS:
            raise top.fail("corrections", f"unknown correction {shown(name)}{did_you_mean(str(name), list(CORRECTIONS))}; "
                           f"known: {', '.join(CORRECTIONS)}")
        if not isinstance(body, dict):
            raise top.fail("corrections", f"{name} must be a mapping with factor, stack and source")
        f = Fields(body, top.prefix("corrections") + f"{name}.", err=ProfileError)
        low, high = CORRECTIONS[name]
        factor = f.number("factor")
        if not low <= factor <= high:
            raise f.fail("factor", f"must lie in [{low}, {high}], got {factor}")
        out.append(Correction(name=str(name), factor=factor, stack=f.text("stack"), source=f.text("source")))
        f.finish()
    return tuple(out)


def _texts(f: Fields, key: str, *, required: bool) -> dict[str, str]:
    """A mapping of names to one-line texts (provenance, citations); nested values are refused."""
    out = {}
    for k, v in (f.mapping(key, required=required) or {}).items():
        if isinstance(v, dict | list):
            raise f.fail(f"{key}.{one_line(str(k), 60)}", f"expected a text, got a {type(v).__name__}")
        out[one_line(str(k), 200)] = one_line(str(v), 2000)
    return out


def _fraction(f: Fields, key: str) -> float:
    value = f.number(key)
    if value > 1:
        raise f.fail(key, f"must be a fraction in (0, 1], got {value}")
    return value


def _slowdown(f: Fields, key: str) -> float:
    value = f.number(key, maximum=lim.MAX_SLOWDOWN)
    if value < 1:
        raise f.fail(key, f"must be >= 1 (a slowdown factor), got {value}")
    return value


def _float_map(f: Fields, key: str, *, scale: float) -> dict[str, float]:
    raw = f.mapping(key) or {}
    out = {}
    for name, value in raw.items():
        if name not in DTYPES:
            raise f.fail(f"{key}.{name}", f"unknown dtype{did_you_mean(str(name), DTYPES)}")
        Fields(raw, f.prefix(key), err=f.err).number(name, maximum=lim.MAX_TFLOPS)
        out[name] = float(value) * scale
    return out


def _curves(f: Fields, key: str) -> dict[str, Curve]:
    raw = f.mapping(key) or {}
    if "bf16" not in raw:
        raise f.fail(key, "must give a bf16 curve")
    out = {}
    for dtype, points in raw.items():
        name = f"{key}.{dtype}"
        if dtype not in DTYPES:
            raise f.fail(name, f"unknown dtype{did_you_mean(str(dtype), DTYPES)}")
        if not isinstance(points, list) or not points:
            raise f.fail(name, "expected a non-empty list of [size, efficiency] pairs")
        pairs = []
        for p in points:
            ok = isinstance(p, list) and len(p) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
            if not ok or not (0 < p[0] <= lim.MAX_CURVE_X and 0 < p[1] <= 1):
                raise f.fail(name, f"bad point {shown(p)}: expected [0 < size <= {lim.MAX_CURVE_X:g}, 0 < efficiency <= 1]")
            pairs.append((float(p[0]), float(p[1])))
        pairs.sort()
        if len({x for x, _ in pairs}) != len(pairs):
            raise f.fail(name, "sizes must be distinct")
        out[str(dtype)] = Curve(xs=tuple(x for x, _ in pairs), ys=tuple(y for _, y in pairs))
    return out


def _collectives(f: Fields, key: str) -> dict[str, tuple[CollectiveFit, ...]]:
    raw = f.mapping(key) or {}
    out = {}
    for coll in COLLECTIVES:
        if coll not in raw:
            raise f.fail(f"{key}.{coll}", "missing required field")
    for coll, fits in raw.items():
        name = f"{key}.{coll}"
        if coll not in COLLECTIVES:
            raise f.fail(name, f"unknown collective{did_you_mean(str(coll), COLLECTIVES)}")
        if not isinstance(fits, list) or not fits:
            raise f.fail(name, "expected a non-empty list of {group_size, latency_us, bw_gbps}")
        parsed = []
        for i, item in enumerate(fits):
            if not isinstance(item, dict):
                raise f.fail(f"{name}[{i}]", "expected a mapping")
            g = Fields(item, f.prefix(f"{name}[{i}]"), err=ProfileError)
            parsed.append(
                CollectiveFit(
                    group_size=g.integer("group_size", minimum=2, maximum=lim.MAX_GPUS),
                    latency_s=g.number("latency_us", maximum=lim.MAX_LATENCY_US) * 1e-6,
                    bw_bytes_per_s=g.number("bw_gbps", maximum=lim.MAX_BUS_GBPS) * 1e9,
                )
            )
            g.finish()
        out[str(coll)] = tuple(sorted(parsed, key=lambda c: c.group_size))
    return out
