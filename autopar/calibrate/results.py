"""What the ranks measure: plain, picklable, torch-free values (SI units, bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class RankResult:
    """One rank's meters over the measured steps."""

    rank: int  # global rank
    pp_rank: int  # pipeline rank (its stage)
    param_bytes: int  # local parameter storage (FSDP shards, TP shards)
    grad_bytes: int  # local gradients after the last backward of a step
    optimizer_bytes: int  # AdamW moments (the scalar step counters apart)
    optimizer_scalar_bytes: int  # AdamW's per-tensor step counters
    block_activation_bytes: float  # bytes saved for backward per block and micro-batch (mean over its blocks)
    blocks_metered: int  # blocks the saved-tensor meter saw on this rank
    in_flight_chunks: int  # most (chunk, micro-batch) forwards alive before their backward
    collective_bytes: dict[str, float] = field(default_factory=dict)  # per measured step, by kind
    collective_calls: dict[str, float] = field(default_factory=dict)  # per measured step, by kind
    peak_memory_bytes: float | None = None  # max_memory_allocated over the run (CUDA only)
    step_times_s: tuple[float, ...] = ()  # measured steps (warm-up excluded)
    first_loss: float | None = None  # loss of the first step (warm-up included) on this rank's tokens; None under pp


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """Every rank's result, gathered on rank 0 before the process group is torn down."""

    ranks: tuple[RankResult, ...]  # by global rank
    device: str  # cuda | cpu
    device_name: str  # GPU or CPU model
    torch_version: str  # torch.__version__
    warmup: int  # untimed steps
    steps: int  # measured steps
    load_average: tuple[float, float, float]  # os.getloadavg() at the end (1, 5, 15 min)
    duration_s: float  # whole run on rank 0
    notes: tuple[str, ...] = ()  # what the run had to work around
