"""GB200 NVL72 jobs take whole 4-GPU hosts (compute trays), not whole 72-GPU racks (issue 27), and a group
that straddles an NVLink domain is costed as the worst-placed of its kind."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.comm import collective_time
from autopar.errors import SpecError
from autopar.io.profiles import load_hardware
from autopar.spec.job import Job
from autopar.spec.topology import Group, RankGrid, pair, span

runner = CliRunner()


def test_a_job_takes_whole_hosts_of_the_nvlink_domain() -> None:
    Job(gpus=256, gpus_per_node=72, gpus_per_host=4, global_batch=512, seq_len=8192)  # 64 trays, 3.6 racks
    Job(gpus=2, gpus_per_node=72, gpus_per_host=4, global_batch=512, seq_len=8192)  # part of one tray
    with pytest.raises(SpecError) as exc:
        Job(gpus=250, gpus_per_node=72, gpus_per_host=4, global_batch=512, seq_len=8192)
    assert str(exc.value) == (
        "`gpus` (250) must be a multiple of 4, the GPUs of one host (a job takes whole hosts of the 72-GPU NVLink domain): 248 or 252"
    )
    with pytest.raises(SpecError, match=r"`gpus` \(250\) must be a multiple of the node size \(8 GPUs per node\)"):
        Job(gpus=250, gpus_per_node=8, global_batch=512, seq_len=8192)  # no host smaller than the node


def test_cli_runs_256_gb200_and_refuses_250_in_one_line() -> None:
    res = runner.invoke(app, ["suggest", "llama3-70b", "--hardware", "gb200", "--gpus", "256", "--json", "--top", "1"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["gpus"] == 256 and doc["gpus_per_node"] == 72 and doc["fits"] is True
    bad = runner.invoke(app, ["estimate", "llama3-70b", "--hardware", "gb200", "--gpus", "250", "--tp", "2"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        "autopar: error: --gpus (250) must be a multiple of 4, the GPUs of one host (a job takes whole hosts of the "
        "72-GPU NVLink domain): 248 or 252"
    ]


@pytest.mark.parametrize(
    ("size", "stride", "ranks", "per_node"),
    [
        (8, 1, 256, 8),  # TP 8: 72 = 9 x 8, every group inside a domain
        (4, 8, 256, 1),  # ranks 64 | 72, 80, 88: the group at 64 has one rank in the first domain
        (64, 4, 256, 10),  # one group: 18 + 18 + 18 in the three full racks, 10 in the fourth (ranks 216..252)
        (16, 8, 256, 2),  # the second group: 128, 136 in domain 1, 9 in domain 2, 5 in domain 3
        (18, 4, 144, 18),  # 72 = 18 x 4: whole domains
        (9, 8, 144, 9),
    ],
)
def test_a_group_that_straddles_the_domain_takes_its_worst_placement(size: int, stride: int, ranks: int, per_node: int) -> None:
    assert span(size=size, stride=stride, gpus_per_node=72, ranks=ranks) == Group(size=size, per_node=per_node)


def _fewest_brute(size: int, stride: int, g: int, ranks: int) -> int:
    fewest = size
    for start in range(0, ranks, size * stride):
        for t in range(stride):
            nodes = [(start + t + j * stride) // g for j in range(size)]
            if len(set(nodes)) > 1:
                fewest = min(fewest, min(nodes.count(n) for n in set(nodes)))
    return fewest


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 40), stride=st.integers(1, 72), g=st.sampled_from([4, 8, 72]), groups=st.integers(1, 12))
def test_the_placement_is_the_brute_force_count(size: int, stride: int, g: int, groups: int) -> None:
    ranks = size * stride * groups
    got = span(size=size, stride=stride, gpus_per_node=g, ranks=ranks).per_node
    assert got == (1 if stride > g else max(1, _fewest_brute(size, stride, g, ranks)))


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from([1, 2, 4, 8, 16, 32, 64]), stride=st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_power_of_two_groups_on_8_gpu_nodes_keep_their_placement(size: int, stride: int) -> None:
    old = max(1, min(size, 8 // stride)) if stride <= 8 else 1  # the rule before issue 27
    assert span(size=size, stride=stride, gpus_per_node=8, ranks=4096).per_node == old


def test_neighbours_share_a_node_when_most_of_them_do() -> None:
    assert pair(stride=4, gpus_per_node=8).intra and not pair(stride=8, gpus_per_node=8).intra
    assert pair(stride=32, gpus_per_node=72).intra  # r and r + 32 share a rack for 40 of every 72 ranks
    assert not pair(stride=48, gpus_per_node=72).intra  # for 24 of 72


def test_collectives_inside_the_domain_use_nvlink_and_the_rest_the_network() -> None:
    hw = load_hardware("gb200")
    grid = RankGrid(gpus_per_node=72, tp=4, dp=64)  # 256 GPUs
    tp, dp = grid.group("tp"), grid.group("dp")
    assert tp == Group(size=4, per_node=4) and dp == Group(size=64, per_node=10)
    gib = 2**30
    intra = min(hw.intra["all_gather"], key=lambda c: abs(c.group_size - 4))
    assert collective_time(hw, "all_gather", gib, tp) == pytest.approx(intra.latency_s + 3 / 4 * gib / intra.bw_bytes_per_s)
    # the DP ring leaves each rack through the rack holding the fewest of its ranks (10): 10 rails, not 18
    eighteen = collective_time(hw, "reduce_scatter", gib, Group(size=64, per_node=18))
    assert collective_time(hw, "reduce_scatter", gib, dp) > eighteen
