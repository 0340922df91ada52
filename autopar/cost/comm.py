"""Collective times from the profile's fitted alpha-beta curves.

Bus-bandwidth convention of nccl-tests (doc/PERFORMANCE.md): for n ranks and S
bytes per rank,
  all-reduce                          t = a + 2(n-1)/n * S / B
  all-gather, reduce-scatter, all-to-all  t = a + (n-1)/n * S / B
  send/recv                           t = a + S / B
where S is the full buffer (the gathered output, the reduced input).

Tiers: a group inside one node uses the node's fits. A group that spans nodes
with k members on each node is limited by the network: NCCL runs k rings at
once, one per NIC rail, so the bus bandwidth is k times the one-rank-per-node
fit, capped by the intra-node fabric (which still carries every byte).
All-to-all is different: every rank sends the (n-k)/n of its buffer that lives
on other nodes through its own NIC (all the node's NICs are busy with its other
ranks), while the on-node share moves over NVLink at the same time, so its time
is the off-node share at one rail's bandwidth.

Where a group's ranks sit (its size and ranks per node) comes from the rank
grid, spec/topology.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.spec.hardware import CollectiveFit, HardwareProfile, fit_for
from autopar.spec.topology import Group

_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}


def collective_time(hw: HardwareProfile, kind: str, nbytes: float, group: Group) -> float:
    """Seconds for one collective of `kind` over `nbytes` on `group`; 0 for a group of one."""
    if group.size <= 1 or nbytes <= 0:
        return 0.0
    return collective_line(hw, kind, group).time(nbytes)


@dataclass(frozen=True, slots=True)
class Line:
    """One collective's time as a function of its bytes on one profile and group:
    latency + max(share x S / bw, on_share x S / on_bw), the second term for an all-to-all across
    nodes only (its on-node share over NVLink); on_bw 0 where there is none."""

    size: int  # ranks in the group
    latency_s: float
    share: float  # the bus factor, or the off-node share of an all-to-all
    bw: float  # bytes/s the share moves at
    on_share: float = 0.0
    on_bw: float = 0.0

    def time(self, nbytes: float) -> float:
        """Seconds for `nbytes` (collective_time's terms, in its order); 0 for a group of one."""
        if self.size <= 1 or nbytes <= 0:
            return 0.0
        t = self.share * nbytes / self.bw
        if self.on_bw:
            t = max(t, self.on_share * nbytes / self.on_bw)
        return self.latency_s + t


# Lines kept per (profile, kind, group): what fit a group reads (a search over the fits) depends on none of the
# bytes. An entry holds its profile, so the profile's id names it while cached.
LINE_CACHE = 1 << 14
_LINES: dict[tuple[int, str, int, int], tuple[HardwareProfile, Line]] = {}


def collective_line(hw: HardwareProfile, kind: str, group: Group) -> Line:
    """The fits `kind` on `group` reads (module docstring): intra-node, or the network's with k rails."""
    key = (id(hw), kind, group.size, group.per_node)
    hit = _LINES.get(key)
    if hit is not None and hit[0] is hw:
        return hit[1]
    line = _line(hw, kind, group)
    if len(_LINES) >= LINE_CACHE:
        _LINES.clear()
    _LINES[key] = (hw, line)
    return line


def _line(hw: HardwareProfile, kind: str, group: Group) -> Line:
    n = group.size
    if n <= 1:
        return Line(size=n, latency_s=0.0, share=0.0, bw=1.0)
    wire = 2 if kind == "send_recv" else n
    intra = fit_for(hw.intra[kind], min(wire, hw.gpus_per_node))
    if group.intra:
        return Line(size=n, latency_s=intra.latency_s, share=_FACTOR[kind](n), bw=intra.bw_bytes_per_s)
    nodes = max(2, n // group.per_node)
    inter = fit_for(hw.inter[kind], nodes)
    if kind != "send_recv":
        inter = _beyond_fits(hw.inter[kind], inter, nodes)
    if kind == "all_to_all":
        return Line(
            size=n,
            latency_s=inter.latency_s,
            share=(n - group.per_node) / n,
            bw=inter.bw_bytes_per_s,
            on_share=(group.per_node - 1) / n,
            on_bw=intra.bw_bytes_per_s,
        )
    bw = min(intra.bw_bytes_per_s, group.per_node * inter.bw_bytes_per_s)
    return Line(size=n, latency_s=inter.latency_s, share=_FACTOR[kind](n), bw=bw)


def _beyond_fits(fits: tuple[CollectiveFit, ...], fit: CollectiveFit, nodes: int) -> CollectiveFit:
    """Past the largest fitted ring, latency keeps growing with the ring: NCCL's ring
    all-gather/reduce-scatter/all-reduce take a step per member (NVIDIA/nccl
    src/graph/tuning.cc: ring latency = base + (n-1) x per-hop), and all-to-all one
    message per peer. The extra latency per member is the slope between the profile's
    two largest fits, so a 1,024-node ring is not charged a 64-node ring's latency."""
    if len(fits) < 2 or fit is not fits[-1] or nodes <= fit.group_size:
        return fit
    prev = fits[-2]
    slope = max(0.0, (fit.latency_s - prev.latency_s) / (fit.group_size - prev.group_size))
    return CollectiveFit(group_size=nodes, latency_s=fit.latency_s + slope * (nodes - fit.group_size), bw_bytes_per_s=fit.bw_bytes_per_s)
