"""benchmarks/moe_host_count.py: the host syncs and kernels of Megatron-Core's eager MoE layer, against its source.

Run in a subprocess: the script stands in for torch.cuda's streams in its own process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.core")

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"experts +(\d+): forward (\d+) kernels \((\d+) before the host sync, (\d+) after, (\d+) of them before the "
    r"first expert GEMM\), backward (\d+); host syncs forward (\d+), backward (\d+)"
)


def test_one_host_sync_per_forward_none_in_backward_and_six_kernels_per_expert() -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/moe_host_count.py", "--experts", "4", "8", "--topk", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    rows = {int(m[1]): [int(x) for x in m.groups()[1:]] for m in LINE.finditer(out)}
    assert set(rows) == {4, 8}, out
    (f4, pre4, post4, first4, b4, sf4, sb4), (f8, pre8, _, first8, b8, sf8, sb8) = rows[4], rows[8]
    # MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize (token_dispatcher.py at core_v0.16.1): one
    # d2h_event.synchronize() at cuda_sync_point in the forward; the backward reuses the host split sizes.
    assert (sf4, sb4, sf8, sb8) == (1, 0, 1, 0)
    # the router, preprocess and permutation come before the sync and do not depend on the experts
    assert pre4 == pre8 and pre4 > 0 and first4 == first8
    # SequentialMLP, gated: per local expert fc1 mm, silu, the gate's mul, the probability's mul, the cast's
    # copy_, fc2 mm in the forward (6), so 4 more experts add 24 forward kernels, all after the sync
    assert f8 - f4 == 24 and f4 == pre4 + post4
    assert b8 > b4
