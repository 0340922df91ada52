"""The rank grid: where each parallel group's ranks sit, and how many share a node.

Global rank r of a job with degrees tp, cp, dp, pp is laid out as Megatron-LM
does it (megatron/core/parallel_state.py, order "tp-cp-ep-dp-pp"): tp varies
fastest, then cp, then dp, then pp::

    r = t + tp * (c + cp * (d + dp * p))

So an axis's ranks are spaced by the product of the sizes inside it (its
*stride*): tp 1, cp tp, dp tp*cp, pp tp*cp*dp. The expert-parallel group of an
MoE layer is carved out of the cp x dp ranks, innermost first, so it has
stride tp; the expert data-parallel group (ranks holding the same experts)
strides over ep * etp ranks. Every group's placement on nodes follows from its
size and stride alone (``span``), and nothing else in autopar computes a
stride: the cost model asks this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

ORDER = ("tp", "cp", "dp", "pp")  # innermost (fastest-varying rank index) first


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """A process group's placement: how many ranks, and how many of them share a node."""

    size: int  # ranks in the group
    per_node: int  # ranks of the group on one node (== size when it fits in a node)

    @property
    def intra(self) -> bool:
        """All of the group's ranks are on one node."""
        return self.per_node >= self.size

    @property
    def nodes(self) -> int:
        """Nodes the group spans."""
        return -(-self.size // self.per_node)


def span(*, size: int, stride: int, gpus_per_node: int, ranks: int = 0) -> Group:
    """Placement of `size` ranks spaced `stride` apart: r, r+stride, r+2*stride, ...

    A node of g GPUs holds g/stride of them when stride < g (contiguous blocks of
    nodes), else one per node. That holds when the group's block of size*stride
    ranks and the node tile each other (8-GPU nodes, power-of-two degrees); where
    they do not (a GB200 NVL72 domain of 72 GPUs, groups of 32 or 64 ranks), some
    groups straddle a domain boundary, and the group is placed as the worst of
    them: its fewest ranks on one node (the slowest group paces the collective)
    among the job's `ranks` (0: any number of ranks).
    """
    g, block = gpus_per_node, size * stride
    if stride > g:
        return Group(size=size, per_node=1)
    if g % block == 0 or (block % g == 0 and g % stride == 0):
        return Group(size=size, per_node=max(1, min(size, g // stride)))
    return Group(size=size, per_node=_fewest_on_a_node(size, stride, g, ranks))


@lru_cache(maxsize=4096)
def _fewest_on_a_node(size: int, stride: int, g: int, ranks: int) -> int:
    """Over every group of the first `ranks` ranks (blocks of size*stride ranks, each with stride
    offsets), the fewest of its ranks that one node of g GPUs holds; size when every group lies inside
    one node. The placement repeats every lcm(size*stride, g) ranks, which bounds `ranks` (0: all)."""
    block = size * stride
    period = math.lcm(block, g)
    fewest = size
    for start in range(0, min(period, ranks) if ranks else period, block):
        for t in range(stride):
            first, last = start + t, start + t + (size - 1) * stride
            if first // g == last // g:
                continue
            for node in range(first // g, last // g + 1):
                lo, hi = max(first, node * g), min(last, (node + 1) * g - 1)  # the node's ranks of the group
                fewest = min(fewest, (hi - first) // stride - (lo - first + stride - 1) // stride + 1)
    return max(1, fewest)


def pair(*, stride: int, gpus_per_node: int) -> Group:
    """Two neighbours `stride` ranks apart (a pipeline or ring send/recv): on one node when most are.

    Rank r's neighbour r + stride is on its node for g - stride of every g ranks,
    so the cost model takes the common case: one node when 2 * stride <= g (with
    power-of-two strides on 8-GPU nodes, stride < g).
    """
    return Group(size=2, per_node=2 if 2 * stride <= gpus_per_node else 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class RankGrid:
    """Degrees of one plan on nodes of `gpus_per_node` GPUs, in Megatron's rank order."""

    gpus_per_node: int  # GPUs per node
    tp: int = 1  # tensor-parallel degree (innermost)
    cp: int = 1  # context-parallel degree
    dp: int = 1  # data-parallel degree (an axis's placement depends only on the axes inside it)
    pp: int = 1  # pipeline stages (outermost)
    ep: int = 1  # expert-parallel degree, within the cp x dp ranks
    etp: int = 1  # expert tensor-parallel degree (1 or tp)
    ep_over_tp: bool = False  # the EP group runs over consecutive ranks, TP included (Megatron with etp 1)

    def stride(self, axis: str) -> int:
        """Rank distance between neighbours along `axis` (tp, cp, dp, pp, ep or edp)."""
        if axis == "ep":
            return 1 if self.ep_over_tp and self.etp == 1 else self.tp
        if axis == "edp":
            return self.ep * self.etp
        out = 1
        for inner in ORDER[: ORDER.index(axis)]:
            out *= getattr(self, inner)
        return out

    def size(self, axis: str) -> int:
        """Ranks in one group of `axis`. dpcp: the dense-gradient group (dp x cp, stride tp);
        edp: the ranks that hold the same experts (tp x cp x dp / (ep x etp))."""
        if axis == "dpcp":
            return self.dp * self.cp
        if axis == "edp":
            return max(1, self.tp * self.cp * self.dp // (self.ep * self.etp))
        return int(getattr(self, axis))

    def group(self, axis: str) -> Group:
        """Node placement of one group along `axis` (dpcp strides like cp: tp)."""
        stride = self.tp if axis == "dpcp" else self.stride(axis)
        return span(size=self.size(axis), stride=stride, gpus_per_node=self.gpus_per_node, ranks=self.tp * self.cp * self.dp * self.pp)

    def neighbours(self, axis: str) -> Group:
        """Placement of a send/recv between neighbours along `axis`.

        pp: adjacent stages, on one node when the stride is below the node size
        (the common boundary; see ``pair``). cp: the ring steps all together, so
        the slowest hop paces it: on one node only when the whole group is.
        """
        if axis == "cp":
            return Group(size=2, per_node=2 if self.group("cp").intra else 1)
        return pair(stride=self.stride(axis), gpus_per_node=self.gpus_per_node)

    def rank(self, *, t: int = 0, c: int = 0, d: int = 0, p: int = 0) -> int:
        """Global rank of grid coordinates (t, c, d, p)."""
        return t + self.tp * (c + self.cp * (d + self.dp * p))
