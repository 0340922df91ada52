"""A hardware profile YAML, built-in (datasheet) or measured, and a profile variant."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Strict

from autopar.io.schema.fields import (
    BusBw,
    CurveX,
    Dtype,
    Efficiency,
    Factor,
    Group,
    Hbm,
    Latency,
    Memory,
    NodeSize,
    Power,
    Slowdown,
    Text,
    Texts,
    Tflops,
    Version,
    _Strict,
)
from autopar.spec import limits as lim
from autopar.spec.hardware import COLLECTIVES


class FitFile(_Strict):
    group_size: Group
    latency_us: Latency
    bw_gbps: BusBw


Fits = Annotated[list[FitFile], Field(min_length=1, max_length=lim.MAX_HISTOGRAM_BINS)]
# [size, achieved / peak]: a pair read as a tuple (strict pydantic takes only tuples), each number strict
Point = Annotated[tuple[Annotated[CurveX, Strict()], Annotated[Efficiency, Strict()]], Strict(False)]
Curve = Annotated[list[Point], Field(min_length=1, max_length=lim.MAX_HISTOGRAM_BINS)]


class CollectivesFile(_Strict):
    all_reduce: Fits
    all_gather: Fits
    reduce_scatter: Fits
    all_to_all: Fits
    send_recv: Fits


assert tuple(CollectivesFile.model_fields) == COLLECTIVES


class GpuFile(_Strict):
    name: Text
    memory_gib: Memory
    hbm_bw_gbps: Hbm
    memory_efficiency: Efficiency
    peak_tflops: dict[Dtype, Tflops]  # must give bf16
    gemm_efficiency: dict[Dtype, Curve]  # [GEMM FLOPs, achieved/peak] pairs; must give bf16
    attention_efficiency: dict[Dtype, Curve]  # [sequence length, achieved/peak] pairs; must give bf16
    # share of the isolated-kernel tensor-core rate sustained in training; default: autopar's fallback
    sustained_tensor_efficiency: Efficiency | None = None


class NodeFile(_Strict):
    gpus_per_node: NodeSize
    gpus_per_host: NodeSize | None = None  # GPUs one host (one OS) holds, for launch lines; default: the node
    intra: CollectivesFile


class ClusterFile(_Strict):
    inter: CollectivesFile


class OverlapFile(_Strict):
    compute_slowdown: Slowdown
    comm_slowdown: Slowdown


class CorrectionFile(_Strict):
    factor: Factor  # each correction's own bounds are checked by the loader
    stack: Text
    source: Text


class ProfileFile(_Strict):
    """A hardware profile YAML, built-in (datasheet) or measured."""

    schema_version: Version
    name: Text
    description: str = ""
    source: Literal["datasheet", "measured"]
    provenance: Texts | None = None
    citations: Texts | None = None  # required when source is datasheet
    gpu: GpuFile
    node: NodeFile
    cluster: ClusterFile
    overlap: OverlapFile
    corrections: dict[str, CorrectionFile] | None = None
    raw: Any = None  # measured: the timings behind the fits, not read


class PowerFile(_Strict):
    tdp_w: Power  # rated board power
    limit_w: Power  # the cap; at most tdp_w (checked by the loader)


class VariantFile(_Strict):
    """A profile derived from another (autopar.io.profiles._variant): the merged profile is a ProfileFile."""

    schema_version: Version
    name: Text
    description: Text | None = None
    base: Text
    overrides: dict[str, Any] | None = None
    citations: Texts | None = None
    power: PowerFile | None = None
