"""Plain values the ranks produce: picklable, torch-free, SI units.

The workers fill these in; ``writer`` turns them into a profile. Keeping them
apart from torch lets the writer and the tests build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# FlashAttention convention (Dao, FlashAttention-2, benchmarks/benchmark_flash_attention.py):
# forward = 4 * seqlen^2 * head_dim * heads * batch, halved when causal; backward = 2.5 x forward.
ATTN_BWD_OVER_FWD = 2.5


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmPoint:
    """One timed (M x K) @ (K x N) matmul."""

    dtype: str  # bf16 | fp16 | fp8 | tf32 | fp32
    m: int  # rows of the output
    n: int  # columns of the output
    k: int  # reduction dimension
    seconds: float  # median time of one call

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class AttnPoint:
    """One timed causal scaled_dot_product_attention forward + backward."""

    dtype: str  # bf16 | fp16
    seq_len: int  # tokens per sequence
    head_dim: int  # per-head dimension
    heads: int  # attention heads
    batch: int  # sequences
    seconds: float  # median time of forward + backward

    @property
    def flops(self) -> float:
        fwd = 4.0 * self.seq_len**2 * self.head_dim * self.heads * self.batch / 2
        return fwd * (1 + ATTN_BWD_OVER_FWD)

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class CollPoint:
    """One timed collective at one message size (the slowest group's median)."""

    tier: str  # intra (consecutive ranks in a node) | inter (one rank per node)
    collective: str  # all_reduce | all_gather | reduce_scatter | all_to_all | send_recv
    group_size: int  # ranks in each group
    nbytes: int  # message size as nccl-tests counts it (the larger buffer)
    seconds: float  # median time of one call


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlapResult:
    """A GEMM loop and an all-reduce loop, each timed alone and run together."""

    compute_alone_s: float  # GEMM loop alone
    compute_overlapped_s: float  # GEMM loop while the all-reduce loop runs
    comm_alone_s: float  # all-reduce loop alone
    comm_overlapped_s: float  # all-reduce loop while the GEMM loop runs
    method: str  # how they were run concurrently (CUDA streams, a thread)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceInfo:
    """The device as seen by one rank, with the software stack."""

    kind: str  # cuda | cpu
    name: str  # torch's device name (or the CPU model)
    memory_bytes: float  # device memory (CPU: RAM / processes)
    copy_bytes_per_s: float  # measured copy bandwidth: 2 x buffer / time (read + write)
    driver: str  # NVIDIA driver version, or "n/a"
    cuda: str  # CUDA runtime torch was built with, or "n/a"
    torch: str  # torch.__version__
    nccl: str  # NCCL version, or "n/a"


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeResult:
    """Everything one rank measured on its own device."""

    device: DeviceInfo  # the device and versions
    gemm: tuple[GemmPoint, ...]  # the GEMM sweep
    attention: tuple[AttnPoint, ...]  # the attention sweep
    notes: tuple[str, ...] = ()  # dtypes skipped and why


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """Where this rank sits: ranks are numbered node by node."""

    rank: int  # global rank
    world_size: int  # all ranks
    local_rank: int  # rank within the node
    local_world_size: int  # ranks per node
    launcher: str  # torchrun | spawn | single

    @property
    def nodes(self) -> int:
        return self.world_size // self.local_world_size

    @property
    def node(self) -> int:
        return self.rank // self.local_world_size


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurements:
    """What rank 0 holds at the end: the input to ``writer.build_profile``."""

    topology: Topology  # rank 0's view of the job
    compute: ComputeResult  # combined over ranks (median per point)
    collectives: tuple[CollPoint, ...]  # empty with one process
    overlap: OverlapResult | None  # None with one process
    duration_s: float  # wall time of the measurements
    quick: bool  # the --quick flag
    notes: tuple[str, ...] = field(default_factory=tuple)  # anything a reader of the profile should know
