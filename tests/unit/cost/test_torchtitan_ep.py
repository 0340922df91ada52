"""torchtitan 0.3.0 runs expert parallelism under FSDP2 (issue 27): the EP group is carved out of
dp_shard x cp x tp, experts are whole under EP and FSDP-sharded over efsdp = dp_shard * cp * tp / ep,
the other parameters over fsdp = dp_shard * cp (torchtitan/distributed/parallel_dims.py build_mesh,
models/qwen3/parallelize.py apply_fsdp_to_decoder)."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.memory import memory_breakdown
from autopar.cost.states import routed_expert_params
from autopar.errors import SpecError
from autopar.io.models import load_model
from autopar.io.stacks import load_stack
from autopar.search.space import enumerate_skeletons
from autopar.spec.job import Job
from autopar.spec.plan import Plan, validate

runner = CliRunner()
GIB = 2**30
TITAN = load_stack("torchtitan")
QWEN = load_model("qwen3-30b-a3b")  # 48 layers, 128 experts of 768, top 8, hidden 2048
JOB = Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096)


def test_the_stack_runs_ep_with_whole_experts() -> None:
    assert TITAN.refusal(Plan(dp=8, tp=2, pp=1, ep=8, etp=1, zero=3)) is None
    assert TITAN.refusal(Plan(dp=8, tp=2, pp=1, ep=8, etp=2, zero=3)) == (
        "stack torchtitan keeps experts whole under EP (etp 1), not etp 2 (ep=8)"
    )


def test_the_ep_group_lies_within_dp_shard_cp_tp() -> None:
    validate(Plan(dp=8, tp=2, pp=1, ep=16, zero=3), QWEN, JOB, stack=TITAN)  # 16 divides 8 x 1 x 2
    with pytest.raises(SpecError, match=r"ep \(16\) must divide dp\*cp\*tp \(4\*1\*2\)"):
        validate(Plan(dp=4, tp=2, pp=2, ep=16, zero=3), QWEN, JOB, stack=TITAN)


def test_the_search_keeps_torchtitans_expert_layout() -> None:
    plans = list(enumerate_skeletons(QWEN, JOB, {}, stack=TITAN))
    assert any(p.ep > 1 for p in plans)
    assert all(p.etp == (1 if p.ep > 1 else p.tp) for p in plans)


def test_expert_state_is_sharded_over_all_ranks_whatever_ep() -> None:
    """Per rank the experts' fp32 master weights are 4 B x routed / (ep x efsdp) = 4 B x routed / (dp x cp x tp):
    ep 8 and ep 16 on dp8 tp2 hold the same expert bytes; ZeRO-3, no PP (torchtitan.yaml fsdp_master)."""
    routed = 48 * routed_expert_params(QWEN, "moe")
    assert routed_expert_params(QWEN, "moe") == 128 * 3 * 2048 * 768  # gate, up, down of each expert
    w8, w16 = (memory_breakdown(QWEN, JOB, Plan(dp=8, tp=2, pp=1, ep=e, zero=3), stack=TITAN).weights for e in (8, 16))
    assert w8 == pytest.approx(w16)
    dense = QWEN.total_params() - routed
    assert w16 == pytest.approx(4 * routed / 16 + 4 * _tp_split(dense) / 8, rel=1e-3)


def _tp_split(dense: float) -> float:
    """Dense parameters of one TP-2 rank: the matrices halved, the norms (2 per layer and the final one) whole."""
    h = QWEN.hidden_size
    norms = 48 * 2 * h + h
    return (dense - norms) / 2 + norms


def test_zero3_gathers_a_layers_own_experts_only() -> None:
    """The gathered layer and the prefetched one: the dense matrices over tp and 128 / 16 = 8 whole experts,
    bf16; with the CUDA context and NCCL (2 GiB) and the FSDP root unit (embedding and output, over tp)."""
    plan = Plan(dp=8, tp=2, pp=1, ep=16, zero=3)
    routed = 128 * 3 * 2048 * 768
    layer = QWEN.kind_params("moe")
    gathered = (layer - routed) / 2 + routed / 16
    root = (QWEN.embedding_params() + QWEN.output_params()) / 2
    assert memory_breakdown(QWEN, JOB, plan, stack=TITAN).buffers == pytest.approx(2 * GIB + 2 * gathered * 2 + root * 2)


def test_estimate_emits_torchtitans_ep_launch_that_it_parses() -> None:
    pytest.importorskip("torchtitan", reason="torchtitan is not installed (pip install -e '.[frameworks]')")
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    from tests.support.triton_stub import triton_if_missing

    args = [
        "estimate",
        "qwen3-30b-a3b",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "16",
        "--stack",
        "torchtitan",
        "--tp",
        "2",
        "--ep",
        "8",
        "--seq-len",
        "4096",
        "--global-batch",
        "64",
        "--emit",
        "torchtitan",
        "--json",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (doc["ep"], doc["etp"], doc["zero"], doc["fits"]) == (8, 1, 3, True)
    words = shlex.split(doc["launch"])
    with triton_if_missing():
        config = ConfigManager().parse_args(words[words.index("torchtitan.train") + 1 :])
        dims = ParallelDims.from_config(config.parallelism, 16)
    assert (dims.dp_shard, dims.tp, dims.ep) == (8, 2, 8)
    assert dims.dp_shard * dims.cp * dims.tp // dims.ep == 2  # efsdp: the experts' FSDP group
