"""The one pipeline model (spec/layout.py, cost/pipeline.py) and the rank grid (spec/topology.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autopar.cost.pipeline import (
    bubble_fraction,
    pipeline_time,
    schedule_time,
    varlen_time,
)
from autopar.render.schedule import timeline
from autopar.spec.layout import stage_layers
from autopar.spec.topology import Group, RankGrid, span
from autopar.varlen.pipeline import row_times


def test_stage_layers_follow_megatron_interleaving() -> None:
    # 10 layers in 4 chunks: 3, 3, 2, 2 in model order; rank r holds chunks r, r + pp
    assert stage_layers(10, 4) == ((3,), (3,), (2,), (2,))
    assert stage_layers(10, 2, 2) == ((3, 2), (3, 2))
    assert stage_layers(126, 16) == ((8,),) * 14 + ((7,), (7,))  # Llama 3.1 405B on 16 stages


def test_schedule_time_closed_forms_are_cases_of_the_general_one() -> None:
    rng = np.random.default_rng(0)
    stages = rng.uniform(1, 2, size=4)
    t = np.repeat(stages[:, None], 12, axis=1)  # fixed length: t[i, j] = t_i
    fixed = schedule_time(list(stages), microbatches=12, vpp=2)
    assert fixed.total_s == pytest.approx(pipeline_time(t, vpp=2))
    assert fixed.total_s == pytest.approx(12 * stages.max() + (stages.sum() - stages.max()) / 2)
    s = rng.uniform(1, 2, size=12)
    t = np.repeat(s[None, :], 4, axis=0)  # equal stages: t[i, j] = s_j
    assert float(varlen_time(s, pp=4, vpp=2)) == pytest.approx(pipeline_time(t, vpp=2))
    assert float(varlen_time(s, pp=4, vpp=2)) == pytest.approx(s.sum() + 3 * s.max() / 2)
    assert float(row_times(s, 4)) == pytest.approx(s.sum() + 3 * s.max())  # the varlen simulation's entry point


@pytest.mark.parametrize(("p", "m", "v"), [(4, 8, 1), (4, 8, 2), (2, 6, 3), (8, 16, 4)])
def test_schedule_picture_matches_the_model(p: int, m: int, v: int) -> None:
    # the timeline replays Megatron's op order; with unit chunks its length is the model's
    tl = timeline(stages=p, microbatches=m, chunks=v, fwd_units=1, bwd_units=2)
    per_rank = v * 3  # all v chunks of one micro-batch, forward + backward
    model = schedule_time([per_rank] * p, microbatches=m, vpp=v)
    assert tl.total_units == pytest.approx(model.total_s)
    assert tl.bubble_fraction == pytest.approx(bubble_fraction(pp=p, microbatches=m, vpp=v))


def test_rank_grid_strides_and_spans() -> None:
    # Megatron order: tp fastest, then cp, dp, pp. tp4 cp2 dp4 pp2 on 8-GPU nodes.
    g = RankGrid(gpus_per_node=8, tp=4, cp=2, dp=4, pp=2, ep=8)
    assert [g.stride(a) for a in ("tp", "cp", "dp", "pp", "ep")] == [1, 4, 8, 32, 4]
    assert g.rank(t=1, c=1, d=2, p=1) == 1 + 4 * (1 + 2 * (2 + 4 * 1))
    assert g.group("tp") == Group(size=4, per_node=4)
    assert g.group("cp") == Group(size=2, per_node=2)  # ranks r, r+4: one node
    assert g.group("dp") == Group(size=4, per_node=1)  # stride 8: one per node
    assert g.group("dpcp") == Group(size=8, per_node=2)  # the dense-gradient group strides over tp
    assert g.group("ep") == Group(size=8, per_node=2) and g.group("ep").nodes == 4
    assert g.group("edp").size == 4  # 32 ranks per stage hold 8 expert shards: 4 copies each
    assert g.neighbours("pp") == Group(size=2, per_node=1)  # stride 32 >= 8
    assert span(size=32, stride=2, gpus_per_node=8) == Group(size=32, per_node=4)
