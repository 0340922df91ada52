"""Collectives over message sizes, group sizes and tiers.

Two tiers, the layouts the search uses:

- ``intra``: consecutive ranks inside a node (TP, and EP/CP within a node), in
  groups of 2, 4, ... up to the ranks per node;
- ``inter``: one rank per node, strided across nodes (DP/PP across nodes), in
  groups of 2, 4, ... up to the node count.

All groups of one size run at the same time (every node, every rail), as they
do in training, and each message size keeps the slowest group's median. Message
sizes follow nccl-tests: the size of the larger buffer (all-gather: the output,
reduce-scatter: the input). send/recv is a bidirectional exchange within pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from autopar.probe.compute import sync_fn
from autopar.probe.results import CollPoint, Topology
from autopar.probe.settings import Settings
from autopar.probe.timing import Timer
from autopar.spec.hardware import COLLECTIVES

_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def group_sizes(n: int) -> list[int]:
    """2, 4, 8, ... dividing ``n``, and ``n`` itself."""
    sizes, g = [], 2
    while g <= n:
        if n % g == 0:
            sizes.append(g)
        g *= 2
    if n >= 2 and n not in sizes:
        sizes.append(n)
    return sizes


def tier_layouts(topo: Topology) -> list[tuple[str, int, list[list[int]]]]:
    """(tier, group size, the partition of all ranks into groups of that size)."""
    per_node, nodes = topo.local_world_size, topo.nodes
    out = []
    for g in group_sizes(per_node):
        blocks = [[node * per_node + b * g + j for j in range(g)] for node in range(nodes) for b in range(per_node // g)]
        out.append(("intra", g, blocks))
    for g in group_sizes(nodes):
        strided = [[(b * g + j) * per_node + lr for j in range(g)] for lr in range(per_node) for b in range(nodes // g)]
        out.append(("inter", g, strided))
    return out


def comm_steps(topo: Topology) -> int:
    return sum(len(COLLECTIVES) if g == 2 else len(COLLECTIVES) - 1 for _, g, _ in tier_layouts(topo))


class CollectiveBench:
    """Buffers allocated once, at the largest message size, and reused."""

    def __init__(self, *, settings: Settings, device: torch.device, timeout_s: float):
        self.settings = settings
        self.device = device
        self.timeout = timedelta(seconds=timeout_s)
        self.dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        self.elem = torch.tensor([], dtype=self.dtype).element_size()
        elems = max(settings.coll_bytes) // self.elem
        self.src = torch.ones(elems, dtype=self.dtype, device=device)
        self.dst = torch.zeros(elems, dtype=self.dtype, device=device)
        self.timer = Timer.of(settings, sync_fn(device))

    def agree(self, inner: int) -> int:
        """The largest loop count any rank asked for, so that all loop alike."""
        t = torch.tensor([float(inner)], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def slowest(self, times: list[float]) -> list[float]:
        t = torch.tensor(times, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [float(x) for x in t.tolist()]

    def op(self, collective: str, elems: int, group: Any, members: list[int]) -> Callable[[], object]:
        src, dst, g = self.src, self.dst, len(members)
        if collective == "all_reduce":
            return lambda: dist.all_reduce(dst[:elems], group=group)
        if collective == "all_gather":
            return lambda: _all_gather(dst[:elems], src[: elems // g], group=group)
        if collective == "reduce_scatter":
            return lambda: _reduce_scatter(dst[: elems // g], src[:elems], group=group)
        if collective == "all_to_all":
            return lambda: dist.all_to_all_single(dst[:elems], src[:elems], group=group)
        peer = next(r for r in members if r != dist.get_rank())

        def exchange() -> object:
            ops = [dist.P2POp(dist.isend, src[:elems], peer, group), dist.P2POp(dist.irecv, dst[:elems], peer, group)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            return None

        return exchange

    def measure(self, topo: Topology, step: Callable[..., None]) -> list[CollPoint]:
        points = []
        for tier, g, partition in tier_layouts(topo):
            step(f"forming {tier} groups of {g}", advance=False)
            group, _ = dist.new_subgroups_by_enumeration(partition, timeout=self.timeout)
            members = next(p for p in partition if topo.rank in p)
            for collective in COLLECTIVES:
                if collective == "send_recv" and g != 2:
                    continue
                step(f"{collective} {tier} n={g}")
                quantum = g * self.elem
                sizes = sorted({max(quantum, b // quantum * quantum) for b in self.settings.coll_bytes})
                times = [self.timer.median_s(self.op(collective, b // self.elem, group, members), agree=self.agree) for b in sizes]
                for nbytes, seconds in zip(sizes, self.slowest(times), strict=True):
                    points.append(CollPoint(tier=tier, collective=collective, group_size=g, nbytes=nbytes, seconds=seconds))
        return points
