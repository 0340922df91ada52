"""The shape of one rank's work: what every sub-layer's time reads (cost/compute.py and cost/kernels.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from autopar.spec.stack import NEUTRAL, StackProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """What one rank computes for one micro-batch: the inputs every sub-layer needs."""

    dtype: str  # GEMM dtype (bf16 | fp16 | fp8)
    seq_len: int  # tokens per sequence
    mbs: int  # sequences per micro-batch
    # the framework that runs it (kernels, fusion, overlaps); one per Memo, so not part of the cache key
    stack: StackProfile = field(default=NEUTRAL, compare=False)

    def tokens(self, d: Dims) -> int:
        """Tokens on one rank after the CP split."""
        return self.mbs * self.seq_len // d.cp


class Dims(NamedTuple):
    """What every sub-layer reads of a plan."""

    tp: int  # tensor-parallel degree
    cp: int  # context-parallel degree
    sp: bool  # sequence parallelism in effect (asked for, and tp > 1)
    recompute: str  # none | selective | full
    modules: tuple[str, ...] = ()  # under selective: Megatron's recomputed modules (Plan.recompute_modules)
