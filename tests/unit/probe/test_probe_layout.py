"""autopar.probe pieces that import torch but need no process group: the group
layouts of each tier, and how rank 0 combines the ranks' compute sweeps."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from autopar.probe.comm import comm_steps, group_sizes, tier_layouts
from autopar.probe.results import AttnPoint, ComputeResult, DeviceInfo, GemmPoint, Topology
from autopar.probe.worker import _combine, one_line


def topo(world: int, per_node: int) -> Topology:
    return Topology(rank=0, world_size=world, local_rank=0, local_world_size=per_node, launcher="torchrun")


@pytest.mark.parametrize(("n", "sizes"), [(1, []), (2, [2]), (6, [2, 6]), (8, [2, 4, 8]), (12, [2, 4, 12])])
def test_group_sizes(n: int, sizes: list[int]) -> None:
    assert group_sizes(n) == sizes


def test_two_nodes_of_four_intra_consecutive_inter_strided() -> None:
    layouts = {(tier, g): groups for tier, g, groups in tier_layouts(topo(8, 4))}
    assert layouts[("intra", 2)] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert layouts[("intra", 4)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert layouts[("inter", 2)] == [[0, 4], [1, 5], [2, 6], [3, 7]]  # one rank per node, every rail at once
    assert set(layouts) == {("intra", 2), ("intra", 4), ("inter", 2)}
    for groups in layouts.values():  # each layout is a partition of all ranks
        assert sorted(r for g in groups for r in g) == list(range(8))
    assert comm_steps(topo(8, 4)) == 5 + 4 + 5  # send/recv only for pairs


def test_one_node_has_no_inter_tier() -> None:
    assert {tier for tier, _, _ in tier_layouts(topo(8, 8))} == {"intra"}
    assert tier_layouts(topo(1, 1)) == []


def _result(rank_speed: float, copy: float, extra_dtype: bool = False) -> ComputeResult:
    gemm = [GemmPoint(dtype="bf16", m=s, n=s, k=s, seconds=2 * s**3 / (rank_speed * 1e12)) for s in (1024, 4096)]
    if extra_dtype:
        gemm.append(GemmPoint(dtype="fp8", m=4096, n=4096, k=4096, seconds=1e-3))
    attn = [AttnPoint(dtype="bf16", seq_len=1024, head_dim=128, heads=16, batch=16, seconds=1e-3 * 800 / rank_speed)]
    dev = DeviceInfo(kind="cuda", name="G", memory_bytes=80e9, copy_bytes_per_s=copy, driver="d", cuda="c", torch="t", nccl="n")
    return ComputeResult(device=dev, gemm=tuple(gemm), attention=tuple(attn))


def test_combine_takes_medians_and_flags_a_slow_gpu() -> None:
    results = [_result(800, 3e12, extra_dtype=True), _result(790, 2.9e12), _result(600, 3.1e12)]
    combined, spread = _combine(results)
    assert [p.dtype for p in combined.gemm] == ["bf16", "bf16", "fp8"]  # rank 0's points, by key
    assert combined.gemm[1].flops_per_s == pytest.approx(790e12)
    assert combined.device.copy_bytes_per_s == 3e12
    assert "rank 2" in spread and "slower than the median" in spread


def test_one_line_errors() -> None:
    assert one_line(RuntimeError("a\n  b\n")) == "a b"
    assert one_line(RuntimeError()) == "RuntimeError"
    assert len(one_line(RuntimeError("x" * 1000))) == 300
