"""Pipeline schedules as data: the order each stage runs its forwards and backwards, and a timeline.

Two schedules, as Megatron-LM runs them (megatron/core/pipeline_parallel/schedules.py):

- 1F1B (PipeDream-Flush, Narayanan et al. 2021, sec. 2.2.1): stage i (0-based, of p) first runs
  min(p-1-i, m) warm-up forwards, then alternates one forward and one backward until every
  forward has run, then drains the remaining backwards.
- Interleaved 1F1B (sec. 2.2.2): each rank holds v model chunks, so a micro-batch passes every rank
  v times. Micro-batches go through the chunks in groups of p: virtual micro-batch k is chunk
  (k mod pv) div p of micro-batch (k div pv)*p + k mod p; backwards visit the chunks in reverse.
  Stage i runs 2(p-1-i) + (v-1)p warm-up forwards (at most mv), then 1F1B, then the drain.

The timeline replays each stage's order with fixed op durations (in abstract time units) and
the data dependencies between stages: a forward of virtual stage s = chunk*p + i needs that of
s-1, a backward of s needs that of s+1 and its own forward. Idle time between ops is the bubble.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError
from autopar.spec.layout import virtual_stage


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One forward or backward of one micro-batch through one model chunk on one stage."""

    kind: str  # "F" forward, "B" backward
    microbatch: int  # 0-based micro-batch index
    chunk: int = 0  # 0-based model chunk on this rank (always 0 without interleaving)


@dataclass(frozen=True, slots=True, kw_only=True)
class Slot:
    """An op placed in time."""

    op: Op  # what runs
    start: int  # first time unit it occupies
    end: int  # first time unit after it


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """Every stage's ops in time, and the schedule's length."""

    stages: tuple[tuple[Slot, ...], ...]  # per stage, in execution order
    total_units: int  # time units from the first forward to the last backward
    busy_units: int  # units each stage computes: m*v*(fwd + bwd)

    @property
    def bubble_fraction(self) -> float:
        """Idle share of a stage's time. For both schedules, with uniform stages, this is
        cost/pipeline.py's bubble_fraction, (p-1)/(v*m + p-1): the bubble (p-1)/(v*m) of
        Narayanan et al. relative to the busy time (tests/unit/cost/test_schedule.py replays both)."""
        return 1 - self.busy_units / self.total_units


def _check(stages: int, microbatches: int, chunks: int) -> None:
    if stages < 1 or microbatches < 1 or chunks < 1:
        raise SpecError(f"pipeline schedule needs stages, micro-batches and chunks >= 1, got {stages}, {microbatches}, {chunks}")
    if chunks > 1 and microbatches % stages:
        raise SpecError(f"interleaving needs the micro-batch count ({microbatches}) to be a multiple of pp ({stages})")


def _virtual(k: int, *, stages: int, chunks: int, forward: bool) -> tuple[int, int]:
    """(micro-batch, chunk) of virtual micro-batch k in Megatron's interleaved order."""
    in_group = k % (stages * chunks)
    chunk = in_group // stages
    if not forward:
        chunk = chunks - 1 - chunk
    return (k // (stages * chunks)) * stages + k % stages, chunk


def stage_order(*, stages: int, microbatches: int, chunks: int = 1, stage: int) -> list[Op]:
    """The ops stage `stage` runs, in order (Megatron's 1F1B, or interleaved when chunks > 1)."""
    _check(stages, microbatches, chunks)
    if not 0 <= stage < stages:
        raise SpecError(f"stage {stage} is outside 0..{stages - 1}")
    total = microbatches * chunks
    depth = stages - 1 - stage if chunks == 1 else 2 * (stages - 1 - stage) + (chunks - 1) * stages
    warmup = min(depth, total)

    def fwd(k: int) -> Op:
        mb, c = _virtual(k, stages=stages, chunks=chunks, forward=True)
        return Op(kind="F", microbatch=mb, chunk=c)

    def bwd(k: int) -> Op:
        mb, c = _virtual(k, stages=stages, chunks=chunks, forward=False)
        return Op(kind="B", microbatch=mb, chunk=c)

    ops = [fwd(k) for k in range(warmup)]
    steady = total - warmup
    for k in range(steady):
        ops += [fwd(warmup + k), bwd(k)]
    ops += [bwd(k) for k in range(steady, total)]
    return ops


def timeline(*, stages: int, microbatches: int, chunks: int = 1, fwd_units: int = 1, bwd_units: int = 2) -> Timeline:
    """Replay every stage's order with the given op durations; each op starts when both its stage
    is free and its input (the neighbour stage's output) is ready."""
    _check(stages, microbatches, chunks)
    if fwd_units < 1 or bwd_units < 1:
        raise SpecError(f"op durations must be >= 1 unit, got {fwd_units} and {bwd_units}")
    orders = [stage_order(stages=stages, microbatches=microbatches, chunks=chunks, stage=i) for i in range(stages)]
    last_virtual = stages * chunks - 1
    done: dict[tuple[str, int, int], int] = {}  # (kind, micro-batch, virtual stage) -> end time
    placed: list[list[Slot]] = [[] for _ in range(stages)]
    free = [0] * stages
    nxt = [0] * stages
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for i in range(stages):
            while nxt[i] < len(orders[i]):
                op = orders[i][nxt[i]]
                s = virtual_stage(rank=i, chunk=op.chunk, pp=stages)
                if op.kind == "F":
                    needs = [("F", op.microbatch, s - 1)] if s > 0 else []
                else:
                    needs = [("F", op.microbatch, s)] + ([("B", op.microbatch, s + 1)] if s < last_virtual else [])
                if any(n not in done for n in needs):
                    break
                start = max([free[i], *(done[n] for n in needs)])
                end = start + (fwd_units if op.kind == "F" else bwd_units)
                placed[i].append(Slot(op=op, start=start, end=end))
                done[(op.kind, op.microbatch, s)] = end
                free[i] = end
                nxt[i] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # cannot happen for the orders above; guards a future schedule
            raise SpecError(f"pipeline schedule deadlocks (p={stages}, m={microbatches}, v={chunks})")
    busy = microbatches * chunks * (fwd_units + bwd_units)
    return Timeline(stages=tuple(tuple(s) for s in placed), total_units=max(free), busy_units=busy)


def timeline_ends(
    *,
    stages: int,
    microbatches: int,
    chunks: int = 1,
    fwd_units: int = 1,
    bwd_units: int = 2,
    head_units: int,
    tail_units: int,
) -> tuple[Timeline, int]:
    """A timeline whose first `head_units` and last `tail_units` are those of the full schedule,
    and how many micro-batches were left out of its middle (0: this is the full schedule).

    For a long run (thousands of ops per stage) only the ends are worth drawing, and the middle
    is steady 1F1B. This replays m' micro-batches, a multiple of p (so interleaving groups stay
    whole), enough that no micro-batch seen in the head is also seen in the tail, and numbers
    the later ones as the last micro-batches of the full run. The steady state repeats the same
    pattern every micro-batch group, so the tail's ops and their spacing are the full run's.
    """
    _check(stages, microbatches, chunks)
    # head ops have micro-batch < head + p; tail ops > m' - tail - 4p (warm-up depth < 3p, groups of p)
    ops_bound = head_units + tail_units + 5 * stages
    keep = (-(-ops_bound // stages) + 1) * stages
    if microbatches <= keep:
        return timeline(stages=stages, microbatches=microbatches, chunks=chunks, fwd_units=fwd_units, bwd_units=bwd_units), 0
    short = timeline(stages=stages, microbatches=keep, chunks=chunks, fwd_units=fwd_units, bwd_units=bwd_units)
    skipped = microbatches - keep
    split = head_units + stages  # every micro-batch in the head is below this, every one in the tail above

    def renumber(slot: Slot) -> Slot:
        if slot.op.microbatch < split:
            return slot
        op = Op(kind=slot.op.kind, microbatch=slot.op.microbatch + skipped, chunk=slot.op.chunk)
        return Slot(op=op, start=slot.start, end=slot.end)

    stages_out = tuple(tuple(renumber(s) for s in row) for row in short.stages)
    return Timeline(stages=stages_out, total_units=short.total_units, busy_units=short.busy_units), skipped
