"""HardwareProfile: what one GPU, one node and the network can do.

Built-in profiles (``data/profiles/*.yaml``, read by :mod:`autopar.io.profiles`, source: datasheet) and measured ones
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
  # gpus_per_host: 4              # optional: GPUs one host (OS) holds when fewer than the node (GB200 NVL72)
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
from dataclasses import dataclass, field

from autopar.errors import ProfileError

SCHEMA_VERSION = 1
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
DTYPES = ("bf16", "fp16", "fp8", "fp4", "fp32", "tf32")  # fp4: NVFP4 dense (Blackwell)
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
        return self._at(x, bisect.bisect_right(self.xs, x), _table(self)[0])

    def _at(self, x: float, i: int, logs: tuple[float, ...]) -> float:
        """The efficiency at x, i = bisect_right(xs, x), logs = the log of each size."""
        xs, ys = self.xs, self.ys
        if x <= xs[0]:
            # below the smallest measured size, efficiency falls in proportion to size
            return ys[0] * max(x, 1.0) / xs[0]
        if x >= xs[-1]:
            return ys[-1]
        y0, y1 = ys[i - 1], ys[i]
        w = (math.log(x) - logs[i - 1]) / (logs[i] - logs[i - 1])
        return y0 + w * (y1 - y0)

    def size_per_efficiency(self, x: float) -> float:
        """x / efficiency(x), never below size_per_efficiency_floor(x): the time at peak rate is then
        non-decreasing in the work."""
        logs, floors = _table(self)
        i = bisect.bisect_right(self.xs, x)
        return max(x / self._at(x, i, logs), floors[i])

    def size_per_efficiency_floor(self, x: float) -> float:
        """The largest size / efficiency over the measured sizes up to x (0 below the first).

        A kernel's time is size / (peak x efficiency). Where the measured efficiency rises
        faster than the size between two points (small GEMMs are latency-bound: their time
        hardly grows), the interpolated time would fall as the work grows; this floor keeps
        the time of a bigger GEMM at or above that of every measured smaller one.
        """
        return _table(self)[1][bisect.bisect_right(self.xs, x)]


# What a curve's evaluations read of its points alone, kept per curve (a serving sweep evaluates ~10^5 sizes):
# the log of each size, and the floor above at each count of sizes (floors[i]: the largest size / efficiency
# of the first i, 0 for none). An entry holds its curve, so the curve's id names it while cached.
_TABLES: dict[int, tuple[Curve, tuple[float, ...], tuple[float, ...]]] = {}


def _table(curve: Curve) -> tuple[tuple[float, ...], tuple[float, ...]]:
    hit = _TABLES.get(id(curve))
    if hit is not None and hit[0] is curve:
        return hit[1], hit[2]
    logs = tuple(math.log(x) for x in curve.xs)
    ratios = [curve.xs[k] / curve.ys[k] for k in range(len(curve.xs))]
    floors = tuple(max(ratios[:i], default=0.0) for i in range(len(ratios) + 1))
    if len(_TABLES) >= 1 << 12:
        _TABLES.clear()
    _TABLES[id(curve)] = (curve, logs, floors)
    return logs, floors


# Corrections `autopar calibrate --save` may write into a profile: name -> (lowest, highest) factor.
# activation_bytes_per_block: bytes a block saves for backward on this node's stack, measured with
# saved_tensors_hooks, over the fused formula of cost/memory.py (eager PyTorch: 1.44-1.56x).
CORRECTIONS = {"activation_bytes_per_block": (0.5, 3.0)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Correction:
    """A bounded factor measured by `autopar calibrate --save` on this node and stack."""

    name: str  # a key of CORRECTIONS
    factor: float  # measured / the cost model's formula, within CORRECTIONS[name]
    stack: str  # what ran, e.g. eager-torch (FSDP2, DTensor TP)
    source: str  # the run: model, plan, date, torch version

    def describe(self) -> str:
        return f"{self.name.replace('_', ' ')} x{self.factor:.3g} ({self.stack}; {self.source})"


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
    # share of the curves' isolated-kernel tensor-core rate a training run sustains on this GPU (power-capped
    # clocks, launch gaps); None: the cost model's fallback (cost/kernels.py sustained)
    sustained_tensor_efficiency: float | None = None
    gpus_per_node: int  # GPUs sharing the fast intra-node fabric
    gpus_per_host: int | None = None  # GPUs one host (one OS) holds, when fewer than the node (GB200 NVL72: 4)
    intra: dict[str, tuple[CollectiveFit, ...]]  # per collective, fits by group size, inside a node
    inter: dict[str, tuple[CollectiveFit, ...]]  # per collective, fits by group size, one rank per node
    compute_slowdown: float  # compute time multiplier while overlapped with communication
    comm_slowdown: float  # communication time multiplier while overlapped with compute
    provenance: dict[str, str] = field(default_factory=dict)  # measured: date, host, versions
    citations: dict[str, str] = field(default_factory=dict)  # field path -> source
    path: str = ""  # file it was read from
    corrections: tuple[Correction, ...] = ()  # measured by `autopar calibrate --save`; the cost model applies them

    @property
    def host_gpus(self) -> int:
        """GPUs one launch line's host holds: the node unless the profile says otherwise. Only launch
        lines use it (CUDA_VISIBLE_DEVICES numbers one host's GPUs); the cost model keeps the node."""
        return self.gpus_per_host or self.gpus_per_node

    def correction(self, name: str) -> float:
        """The factor of correction `name`, 1.0 when the profile has none."""
        return next((c.factor for c in self.corrections if c.name == name), 1.0)

    def peak(self, dtype: str) -> float:
        if dtype not in self.peak_flops:
            raise ProfileError(f"{self.name}: profile has no peak_tflops for dtype {dtype!r}")
        return self.peak_flops[dtype]

    def mfu_basis(self, dtype: str) -> str:
        """The dtype whose dense peak MFU is stated against: the one a job's GEMMs run at (fp8 for an fp8 job,
        H20: twice bf16's), or bf16 where that peak is not higher; so model FLOPs over it cannot pass 100%."""
        return dtype if self.peak_flops.get(dtype, 0.0) > self.peak_flops["bf16"] else "bf16"

    def mfu_peak(self, dtype: str) -> float:
        """MFU's denominator per GPU (mfu_basis)."""
        return self.peak_flops[self.mfu_basis(dtype)]

    def _gemm_curve(self, dtype: str) -> Curve:
        """The dtype's measured GEMM curve; fp4 without one takes fp8's (the same kernels' shape), then bf16's."""
        return self.gemm_eff.get(dtype) or (self.gemm_eff.get("fp8") if dtype == "fp4" else None) or self.gemm_eff["bf16"]

    def gemm_efficiency(self, dtype: str, flops: float) -> float:
        return self._gemm_curve(dtype)(flops)

    def gemm_flops_per_efficiency(self, dtype: str, flops: float) -> float:
        """flops / efficiency(flops), never below that of a smaller measured GEMM: the
        time at peak rate is then non-decreasing in the work (see Curve.size_per_efficiency_floor)."""
        return self._gemm_curve(dtype).size_per_efficiency(flops)

    def attention_efficiency(self, dtype: str, seq_len: float) -> float:
        curve = self.attn_eff.get(dtype) or self.attn_eff["bf16"]
        return curve(seq_len)


def fit_for(fits: tuple[CollectiveFit, ...], group_size: int) -> CollectiveFit:
    """The fit measured at the group size nearest (in log scale) to the one asked for."""
    return min(fits, key=lambda c: (abs(math.log(c.group_size / group_size)), c.group_size))
