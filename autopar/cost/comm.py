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
    n = group.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    wire = 2 if kind == "send_recv" else n
    intra = fit_for(hw.intra[kind], min(wire, hw.gpus_per_node))
    if group.intra:
        return intra.latency_s + _FACTOR[kind](n) * nbytes / intra.bw_bytes_per_s
    nodes = max(2, n // group.per_node)
    inter = fit_for(hw.inter[kind], nodes)
    if kind != "send_recv":
        inter = _beyond_fits(hw.inter[kind], inter, nodes)
    if kind == "all_to_all":
        off_node = (n - group.per_node) / n * nbytes / inter.bw_bytes_per_s
        on_node = (group.per_node - 1) / n * nbytes / intra.bw_bytes_per_s
        return inter.latency_s + max(off_node, on_node)
    bw = min(intra.bw_bytes_per_s, group.per_node * inter.bw_bytes_per_s)
    return inter.latency_s + _FACTOR[kind](n) * nbytes / bw


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
