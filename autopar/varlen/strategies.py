"""The strategies by name: what each models, where it comes from, what it costs to run.

Each entry says which system the strategy models, the overheads charged to it,
and whether Megatron-LM (the pinned version) can launch it.

Overheads (charged in ``simulate.py``):

- ``comm_bytes``: GPU memory held by the extra NCCL communicators the
  strategy creates, taken out of the token room. ByteScale reports 5-10 GB
  per GPU for HDP's dynamic groups (Ge et al. 2025, sec. 7): ``hdp`` is
  charged the midpoint, 7.5 GB. Megatron's dynamic CP builds one group per
  power-of-two size up to the pool (log2 sizes), each charged
  ``NCCL_COMM_BYTES`` (NCCL's default 4 MiB buffer per protocol, channel and
  peer: about 3 protocols x 16 channels x 2 peers x 4 MiB = 384 MiB, rounded
  to 0.5 GB with its proxies and work FIFOs; an assumption, not a
  measurement).
- ``plan_s_per_seq``: the per-step scheduling that is not overlapped. Megatron
  schedules in the training loop (Python greedy over the step's sequences);
  ``PLAN_S_PER_SEQ`` = 5 us per sequence is an assumed rate for that loop.
  ByteScale plans in its data servers ahead of the step (sec. 7) and WLB-LLM
  packs in the data loader (sec. 6): overlapped, not charged.
- re-sharding: pool strategies move every sequence to the ranks the plan
  gives it, not the ones its loader read it on: ``RESHARD_BYTES_PER_TOKEN``
  (token id and position id, int32 each) per token of the step, spread over
  the pool's NICs, not overlapped.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
NCCL_COMM_BYTES = 0.5 * GB  # one extra NCCL communicator's buffers on one GPU (assumed, see the module doc)
HDP_COMM_BYTES = 7.5 * GB  # ByteScale, sec. 7: 5-10 GB of NCCL buffers per GPU for HDP's groups
PLAN_S_PER_SEQ = 5e-6  # Megatron's in-loop scheduler, seconds per sequence (assumed)
RESHARD_BYTES_PER_TOKEN = 8  # token id + position id, int32 each


@dataclass(frozen=True, slots=True, kw_only=True)
class Strategy:
    name: str
    label: str  # table heading
    models: str  # the system it models, with its citation
    leaves_out: str  # what it does not model
    fixed_cp: bool  # runs on the fixed plan's CP groups (no re-sharding, no new communicators)
    megatron_flag: str  # the flag that launches it under the pinned Megatron-LM ('' = none)
    launchable: bool  # the pinned Megatron-LM can run it as modelled


STRATEGY_INFO = {
    s.name: s
    for s in (
        Strategy(
            name="naive",
            label="naive",
            fixed_cp=True,
            megatron_flag="",
            launchable=True,
            models="fixed CP, next-fit packing to the window in sampled order (WLB-LLM's Plain-4D, ByteScale's static mesh)",
            leaves_out="CP imbalance of per-sequence sharding (every strategy shards per document)",
        ),
        Strategy(
            name="balanced",
            label="balanced",
            fixed_cp=True,
            megatron_flag="",
            launchable=False,
            models="fixed CP, LPT by cost into window-sized micro-batches (WLB-LLM sec. 7, fixed-length packing)",
            leaves_out="nothing else; needs a cost-aware sampler Megatron-LM does not ship",
        ),
        Strategy(
            name="wlb",
            label="WLB-LLM",
            fixed_cp=True,
            megatron_flag="",
            launchable=False,
            models="WLB-LLM (Wang et al., OSDI'25): variable-length packing past the window up to "
            "memory, outliers delayed until each micro-batch of a step gets one",
            leaves_out="multi-level queues (one level here), adaptive CP sharding choice",
        ),
        Strategy(
            name="megatron_dynamic_cp",
            label="Megatron DCP",
            fixed_cp=False,
            megatron_flag="--hybrid-context-parallel",
            launchable=True,
            models="Megatron-LM dynamic/hybrid CP: power-of-two groups by memory, cost-balanced, "
            "the same micro-batch count on every DP rank",
            leaves_out="its 5% stopping rule (plain LPT here)",
        ),
        Strategy(
            name="hdp_no_balance",
            label="HDP w/o bal",
            fixed_cp=False,
            megatron_flag="",
            launchable=False,
            models="ByteScale HDP (Ge et al. 2025) without its balance scheduler: any group size, tokens dealt in order",
            leaves_out="selective offloading (groups are sized by GPU memory only)",
        ),
        Strategy(
            name="hdp",
            label="HDP",
            fixed_cp=False,
            megatron_flag="",
            launchable=False,
            models="ByteScale HDP with its balance scheduler: any group size, cost-balanced, micro-batch counts free per rank",
            leaves_out="selective offloading; its exact heuristics (LPT here)",
        ),
    )
}
STRATEGIES = tuple(STRATEGY_INFO)
