"""HardwareProfile: what one GPU, one node and the network can do.

Built-in profiles (``profiles/*.yaml``, source: datasheet) and measured ones
(written by ``autopar profile``, source: measured) share one schema, version 1:

```yaml
schema_version: 1
name: h100-sxm
description: DGX H100, 8x NDR 400 Gb/s
source: datasheet                 # datasheet | measured
provenance: {}                    # measured: date, hostname, gpu_name, driver, torch, nccl, tool_version
citations:                        # dotted field path (or prefix) -> source; every number is covered
  gpu.peak_tflops: NVIDIA H100 datasheet ...
gpu:
  name: NVIDIA H100 SXM5 80GB
  memory_gib: 79.6                # usable device memory, GiB
  hbm_bw_gbps: 3350               # GB/s
  memory_efficiency: 0.85         # fraction of hbm_bw reached by streaming kernels
  peak_tflops: {bf16: 989.4, fp8: 1978.9, fp32: 66.9}   # dense, no sparsity
  gemm_efficiency:                # per dtype: [GEMM FLOPs, achieved/peak], log-interpolated
    bf16: [[1.0e9, 0.10], [1.0e12, 0.80]]
  attention_efficiency:           # per dtype: [seq_len, achieved/peak] of causal flash attention fwd+bwd
    bf16: [[1024, 0.45], [8192, 0.60]]
node:
  gpus_per_node: 8
  intra:                          # within a node; bus bandwidth as nccl-tests defines it
    all_reduce: [{group_size: 8, latency_us: 25, bw_gbps: 360}]
    all_gather: [...]
    reduce_scatter: [...]
    all_to_all: [...]
    send_recv: [...]
cluster:
  inter:                          # across nodes, one rank per node (one NIC rail each)
    all_reduce: [{group_size: 16, latency_us: 60, bw_gbps: 45}]
    ...
overlap:
  compute_slowdown: 1.08          # compute runs this much slower while a collective overlaps it
  comm_slowdown: 1.10             # and the collective this much slower
raw:                              # measured only: the timings behind the fits (not read by the cost model)
  columns: {...}                  # the column names of each table below
  gemm: {bf16: [[m, n, k, seconds, tflops], ...]}
  attention: [[dtype, seq_len, head_dim, heads, batch, seconds, tflops], ...]
  collectives: {intra: {all_reduce: {8: [[bytes, seconds, bus_gbps], ...]}}, inter: {...}}
  fit_quality: {...}              # worst relative residual of each alpha-beta fit
  overlap: {...}                  # the concurrent GEMM + all-reduce measurement
  copy_gbps: 2900.0               # the HBM copy measurement
```

A measured profile's provenance also says where each number came from when it
was not measured on this run: `peak_tflops` (datasheet table or best measured),
`hbm_bw_gbps`, `collectives`, `intra`, `inter` (e.g. copied from the built-in
profile of the same GPU on a single node), `overlap`, and free-form `notes`.
"""

from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import ProfileError
from autopar.spec_io import Fields, did_you_mean, load_mapping

SCHEMA_VERSION = 1
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
DTYPES = ("bf16", "fp16", "fp8", "fp32", "tf32")
DEFAULT_HARDWARE = "h100-sxm"  # used when neither --hardware nor a saved profile exists


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveFit:
    """t = latency + algorithm_factor * bytes / bandwidth, for one group size."""

    group_size: int  # ranks in the group the fit was measured on
    latency_s: float  # alpha, seconds
    bw_bytes_per_s: float  # beta^-1: bus bandwidth, bytes/s


@dataclass(frozen=True, slots=True, kw_only=True)
class Curve:
    """Efficiency (0..1] against a size, interpolated linearly in log(size)."""

    xs: tuple[float, ...]  # sizes, ascending
    ys: tuple[float, ...]  # efficiencies at those sizes

    def __call__(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        if x <= xs[0]:
            # below the smallest measured size, efficiency falls in proportion to size
            return ys[0] * max(x, 1.0) / xs[0]
        if x >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, x)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        w = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
        return y0 + w * (y1 - y0)


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareProfile:
    """One GPU type in one cluster design; all values in SI units."""

    name: str  # profile name
    description: str  # one line for humans
    source: str  # datasheet | measured
    gpu_name: str  # marketing name of the GPU
    memory_bytes: float  # usable device memory
    hbm_bytes_per_s: float  # peak HBM bandwidth
    memory_efficiency: float  # fraction of HBM bandwidth that streaming kernels reach
    peak_flops: dict[str, float]  # dense peak FLOP/s per dtype
    gemm_eff: dict[str, Curve]  # per dtype: GEMM FLOPs -> achieved/peak
    attn_eff: dict[str, Curve]  # per dtype: sequence length -> achieved/peak (flash attention fwd+bwd)
    gpus_per_node: int  # GPUs sharing the fast intra-node fabric
    intra: dict[str, tuple[CollectiveFit, ...]]  # per collective, fits by group size, inside a node
    inter: dict[str, tuple[CollectiveFit, ...]]  # per collective, fits by group size, one rank per node
    compute_slowdown: float  # compute time multiplier while overlapped with communication
    comm_slowdown: float  # communication time multiplier while overlapped with compute
    provenance: dict[str, str] = field(default_factory=dict)  # measured: date, host, versions
    citations: dict[str, str] = field(default_factory=dict)  # field path -> source
    path: str = ""  # file it was read from

    def peak(self, dtype: str) -> float:
        if dtype not in self.peak_flops:
            raise ProfileError(f"{self.name}: profile has no peak_tflops for dtype {dtype!r}")
        return self.peak_flops[dtype]

    def gemm_efficiency(self, dtype: str, flops: float) -> float:
        curve = self.gemm_eff.get(dtype) or self.gemm_eff["bf16"]
        return curve(flops)

    def attention_efficiency(self, dtype: str, seq_len: float) -> float:
        curve = self.attn_eff.get(dtype) or self.attn_eff["bf16"]
        return curve(seq_len)


# --- loading -------------------------------------------------------------------


def builtin_names() -> list[str]:
    root = resources.files("autopar") / "profiles"
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
        return parse_profile(load_mapping(path, err=ProfileError), where=str(path))
    names = builtin_names()
    if ref not in names:
        raise ProfileError(
            f"unknown hardware '{ref}'{did_you_mean(ref, names)}: give a built-in name (see `autopar hardware`) or a profile .yaml"
        )
    with resources.as_file(resources.files("autopar") / "profiles" / f"{ref}.yaml") as p:
        return parse_profile(load_mapping(p, err=ProfileError), where=str(p))


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
        memory_bytes=gpu.number("memory_gib") * 2**30,
        hbm_bytes_per_s=gpu.number("hbm_bw_gbps") * 1e9,
        memory_efficiency=_fraction(gpu, "memory_efficiency"),
        peak_flops=peaks,
        gemm_eff=_curves(gpu, "gemm_efficiency"),
        attn_eff=_curves(gpu, "attention_efficiency"),
        gpus_per_node=node.integer("gpus_per_node"),
        intra=_collectives(node, "intra"),
        inter=_collectives(cluster, "inter"),
        compute_slowdown=_slowdown(overlap, "compute_slowdown"),
        comm_slowdown=_slowdown(overlap, "comm_slowdown"),
        provenance={str(k): str(v) for k, v in (top.mapping("provenance", required=False) or {}).items()},
        citations={str(k): str(v) for k, v in (top.mapping("citations", required=source == "datasheet") or {}).items()},
        path=where,
    )
    top.ignore("raw")
    for f in (top, gpu, node, cluster, overlap):
        f.finish()
    return profile


def _fraction(f: Fields, key: str) -> float:
    value = f.number(key)
    if value > 1:
        raise f.fail(key, f"must be a fraction in (0, 1], got {value}")
    return value


def _slowdown(f: Fields, key: str) -> float:
    value = f.number(key)
    if value < 1:
        raise f.fail(key, f"must be >= 1 (a slowdown factor), got {value}")
    return value


def _float_map(f: Fields, key: str, *, scale: float) -> dict[str, float]:
    raw = f.mapping(key) or {}
    out = {}
    for name, value in raw.items():
        if name not in DTYPES:
            raise f.fail(f"{key}.{name}", f"unknown dtype{did_you_mean(str(name), DTYPES)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise f.fail(f"{key}.{name}", f"must be a positive number, got {value!r}")
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
            if not ok or not (p[0] > 0 and 0 < p[1] <= 1):
                raise f.fail(name, f"bad point {p!r}: expected [size > 0, 0 < efficiency <= 1]")
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
                    group_size=g.integer("group_size", minimum=2),
                    latency_s=g.number("latency_us") * 1e-6,
                    bw_bytes_per_s=g.number("bw_gbps") * 1e9,
                )
            )
            g.finish()
        out[str(coll)] = tuple(sorted(parsed, key=lambda c: c.group_size))
    return out


def fit_for(fits: tuple[CollectiveFit, ...], group_size: int) -> CollectiveFit:
    """The fit measured at the group size nearest (in log scale) to the one asked for."""
    return min(fits, key=lambda c: (abs(math.log(c.group_size / group_size)), c.group_size))
