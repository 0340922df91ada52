"""Per-sequence cost for the variable-length simulation, taken from the cost model.

ModelSeqCost answers the varlen package's SeqCost question: forward + backward
seconds that one rank of a CP group of size c spends on one sequence of length
L in one pipeline stage, compute plus exposed CP communication. It evaluates
the layer model (cost/compute.py) on a grid of lengths (powers of two) and CP
sizes once, then interpolates in log(length) for any array of lengths, so a
thousand simulated steps of thousands of sequences stay cheap. On the grid it
is the cost model exactly: attention quadratic in L, projections and norms
linear, GEMM efficiency falling for short sequences, CP traffic per group size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from autopar.cost.compute import LayerPlan, Shape, layer_time
from autopar.cost.pipeline import rank_kinds
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan

MIN_LEN = 64  # shortest grid length, tokens


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ModelSeqCost:
    """Interpolated stage time per (length, CP size); build with from_model()."""

    log_lengths: np.ndarray  # log of the grid lengths, ascending
    cps: tuple[int, ...]  # CP sizes of the grid, powers of two
    log_times: np.ndarray  # (len(cps), len(lengths)) log seconds per sequence on one rank of the group

    @classmethod
    def from_model(cls, model: ModelSpec, hw: HardwareProfile, plan: Plan, *, dtype: str, max_len: int,
                   max_cp: int) -> ModelSeqCost:
        """Grid over lengths 64 .. max_len (powers of two) and CP sizes 1 .. max_cp for `plan`'s other degrees."""
        top = max(MIN_LEN, 2 ** math.ceil(math.log2(max(max_len, 2))))
        lengths = [2**i for i in range(int(math.log2(MIN_LEN)), int(math.log2(top)) + 1)]
        cps = tuple(2**i for i in range(int(math.log2(max(1, max_cp))) + 1))
        stage = max(rank_kinds(model.layer_kinds(), plan.pp, plan.vpp), key=lambda k: sum(k.values()))
        times = np.empty((len(cps), len(lengths)))
        for i, c in enumerate(cps):
            group_plan = LayerPlan.of(replace(plan, cp=c, mbs=1))
            for j, length in enumerate(lengths):
                shape = Shape(dtype=dtype, seq_len=max(length, 2 * c), mbs=1)
                total = sum(n * layer_time(model, hw, shape, group_plan, kind).total for kind, n in stage.items())
                times[i, j] = total * min(1.0, length / shape.seq_len)
        return cls(log_lengths=np.log(np.array(lengths, dtype=float)), cps=cps, log_times=np.log(times))

    def time(self, lengths: np.ndarray, cp: np.ndarray | int) -> np.ndarray:
        """Seconds per sequence on one rank of its CP group (vectorized over lengths and cp)."""
        lengths = np.asarray(lengths, dtype=float)
        cp_arr = np.broadcast_to(np.asarray(cp), lengths.shape)
        out = np.empty(lengths.shape)
        x = np.log(np.maximum(lengths, 1.0))
        for i, c in enumerate(self.cps):
            mask = cp_arr == c
            if mask.any():
                out[mask] = np.exp(_interp(x[mask], self.log_lengths, self.log_times[i]))
        unknown = ~np.isin(cp_arr, self.cps)
        if unknown.any():
            raise ValueError(f"CP sizes {sorted(set(cp_arr[unknown].tolist()))} are not on the grid {self.cps}")
        return out


def _interp(x: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Linear in log-log inside the grid, extrapolated with the end slopes outside it."""
    inside = np.interp(x, xs, ys)
    lo = ys[0] + (x - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
    hi = ys[-1] + (x - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    return np.where(x < xs[0], lo, np.where(x > xs[-1], hi, inside))
