"""Pipeline schedules (autopar.render.schedule) against hand-drawn orders and timelines.

Notation in this file: F2b = forward of micro-batch 2 (0-based) through model chunk b (a, b, ...
= chunk 0, 1, ...); '.' is one idle time unit.
"""

from __future__ import annotations

import itertools

import pytest

from autopar.errors import SpecError
from autopar.render.schedule import Op, Timeline, stage_order, timeline, timeline_ends


def names(ops: list[Op], chunks: int = 1) -> list[str]:
    return [f"{o.kind}{o.microbatch}" + ("abcdefgh"[o.chunk] if chunks > 1 else "") for o in ops]


def drawn(tl: Timeline, stage: int, chunks: int = 1) -> str:
    """One token per time unit: the op's name on its first unit, '..' after it, '.' when idle."""
    cells = ["."] * tl.total_units
    for slot in tl.stages[stage]:
        cells[slot.start] = names([slot.op], chunks)[0]
        for t in range(slot.start + 1, slot.end):
            cells[t] = "-"
    return " ".join(cells)


def test_1f1b_two_stages_four_microbatches_order() -> None:
    # stage 0 warms up with p-1-0 = 1 forward, stage 1 (the last) with none
    assert names(stage_order(stages=2, microbatches=4, stage=0)) == ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"]
    assert names(stage_order(stages=2, microbatches=4, stage=1)) == ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]


def test_1f1b_two_stages_timeline_hand_drawn() -> None:
    tl = timeline(stages=2, microbatches=4, fwd_units=1, bwd_units=1)
    assert drawn(tl, 0) == "F0 F1 . B0 F2 B1 F3 B2 . B3"
    assert drawn(tl, 1) == ". F0 B0 F1 B1 F2 B2 F3 B3 ."
    assert tl.total_units == (4 + 2 - 1) * 2
    tl = timeline(stages=2, microbatches=4, fwd_units=1, bwd_units=2)
    assert drawn(tl, 0) == "F0 F1 . . B0 - F2 B1 - F3 B2 - . B3 -"
    assert drawn(tl, 1) == ". F0 B0 - F1 B1 - F2 B2 - F3 B3 - . ."


def test_1f1b_warmup_depth_is_p_minus_1_minus_i() -> None:
    for i in range(4):
        ops = names(stage_order(stages=4, microbatches=8, stage=i))
        first_b = ops.index("B0")
        assert first_b == (4 - 1 - i) + 1  # warm-up forwards, then one steady forward, then B0
        assert ops.count("F0") == 1 and len(ops) == 16
    # fewer micro-batches than the warm-up depth: all forwards, then all backwards
    assert names(stage_order(stages=4, microbatches=2, stage=0)) == ["F0", "F1", "B0", "B1"]


def test_interleaved_p4_m8_v2_order_hand_drawn() -> None:
    # Narayanan et al. 2021, fig. 4: 4 devices, 8 micro-batches, 2 chunks. Stage 0 warms up with
    # 2*(4-1) + (2-1)*4 = 10 forwards: micro-batches 0-3 on chunk a, 0-3 on chunk b, 4-5 on chunk a.
    stage0 = names(stage_order(stages=4, microbatches=8, chunks=2, stage=0), 2)
    assert stage0 == [
        "F0a",
        "F1a",
        "F2a",
        "F3a",
        "F0b",
        "F1b",
        "F2b",
        "F3b",
        "F4a",
        "F5a",
        "F6a",
        "B0b",
        "F7a",
        "B1b",
        "F4b",
        "B2b",
        "F5b",
        "B3b",
        "F6b",
        "B0a",
        "F7b",
        "B1a",
        "B2a",
        "B3a",
        "B4b",
        "B5b",
        "B6b",
        "B7b",
        "B4a",
        "B5a",
        "B6a",
        "B7a",
    ]
    # the last stage warms up with (2-1)*4 = 4 forwards, then alternates
    stage3 = names(stage_order(stages=4, microbatches=8, chunks=2, stage=3), 2)
    assert stage3 == [
        "F0a",
        "F1a",
        "F2a",
        "F3a",
        "F0b",
        "B0b",
        "F1b",
        "B1b",
        "F2b",
        "B2b",
        "F3b",
        "B3b",
        "F4a",
        "B0a",
        "F5a",
        "B1a",
        "F6a",
        "B2a",
        "F7a",
        "B3a",
        "F4b",
        "B4b",
        "F5b",
        "B5b",
        "F6b",
        "B6b",
        "F7b",
        "B7b",
        "B4a",
        "B5a",
        "B6a",
        "B7a",
    ]


def test_interleaved_timeline_start_hand_drawn() -> None:
    tl = timeline(stages=4, microbatches=8, chunks=2, fwd_units=1, bwd_units=1)
    # each stage starts one unit after the previous; chunk b of micro-batch 0 reaches stage 0 after
    # passing all four stages on chunk a (t = 4), when stage 0 has just finished F3a
    assert drawn(tl, 0, 2).split()[:8] == ["F0a", "F1a", "F2a", "F3a", "F0b", "F1b", "F2b", "F3b"]
    assert drawn(tl, 3, 2).split()[:5] == [".", ".", ".", "F0a", "F1a"]
    # (v*m + p - 1) chunk-sized units of forward + backward: the interleaved bubble (p-1)/(v*m)
    assert tl.total_units == (2 * 8 + 4 - 1) * 2
    assert tl.bubble_fraction == pytest.approx(3 / (16 + 3))


@pytest.mark.parametrize(("p", "m", "v", "b"), [(1, 3, 1, 2), (3, 5, 1, 2), (4, 8, 2, 3), (2, 6, 3, 2), (8, 16, 4, 2)])
def test_timeline_respects_dependencies_and_never_overlaps(p: int, m: int, v: int, b: int) -> None:
    tl = timeline(stages=p, microbatches=m, chunks=v, fwd_units=1, bwd_units=b)
    end = {}
    for i, row in enumerate(tl.stages):
        assert len(row) == 2 * m * v
        for prev, cur in itertools.pairwise(row):
            assert prev.end <= cur.start
        for slot in row:
            end[(slot.op.kind, slot.op.microbatch, slot.op.chunk * p + i)] = (slot.start, slot.end)
    last = p * v - 1
    for (kind, mb, s), (start, _) in end.items():
        if kind == "F" and s > 0:
            assert start >= end[("F", mb, s - 1)][1]
        if kind == "B":
            assert start >= end[("F", mb, s)][1]
            if s < last:
                assert start >= end[("B", mb, s + 1)][1]
    assert tl.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1))


@pytest.mark.parametrize(("p", "m", "v", "b"), [(4, 96, 1, 2), (4, 64, 2, 2), (2, 200, 5, 3), (8, 128, 2, 2)])
def test_timeline_ends_match_the_full_schedule(p: int, m: int, v: int, b: int) -> None:
    head, tail = 12, 15
    full = timeline(stages=p, microbatches=m, chunks=v, bwd_units=b)
    short, skipped = timeline_ends(stages=p, microbatches=m, chunks=v, bwd_units=b, head_units=head, tail_units=tail)
    assert skipped > 0 and skipped % p == 0
    for i in range(p):
        assert [s for s in full.stages[i] if s.start < head] == [s for s in short.stages[i] if s.start < head]
        want = [(s.op, s.start - full.total_units) for s in full.stages[i] if s.end > full.total_units - tail]
        got = [(s.op, s.start - short.total_units) for s in short.stages[i] if s.end > short.total_units - tail]
        assert want == got
    assert short.stages[0][-1].op == Op(kind="B", microbatch=m - 1, chunk=0)


def test_timeline_ends_short_run_is_the_full_schedule() -> None:
    tl, skipped = timeline_ends(stages=2, microbatches=4, head_units=10, tail_units=10)
    assert skipped == 0 and tl == timeline(stages=2, microbatches=4)


def test_bad_schedules_are_refused() -> None:
    with pytest.raises(SpecError, match="multiple of pp"):
        stage_order(stages=4, microbatches=6, chunks=2, stage=0)
    with pytest.raises(SpecError, match="outside"):
        stage_order(stages=2, microbatches=4, stage=2)
    with pytest.raises(SpecError, match=">= 1"):
        timeline(stages=0, microbatches=4)
