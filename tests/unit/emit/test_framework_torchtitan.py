"""The torchtitan launch, checked by torchtitan's own code (0.3.0, the ``frameworks`` extra).

Its ``ConfigManager`` parses the emitted words (after ``-m torchtitan.train``) exactly as
``torchtitan.train`` does; ``ParallelDims`` validates the degrees at the job's world size; its
pipeline code cuts the model into the stages the estimate costed; and the config's model, built on
the meta device, has autopar's parameter count within 0.5%.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from autopar.emit import torchtitan as tt
from autopar.io.models import load_model
from autopar.spec.job import Job
from autopar.spec.plan import Plan
from tests.support.triton_stub import triton_if_missing

pytest.importorskip("torchtitan", reason="torchtitan is not installed (pip install -e '.[frameworks]')")


@pytest.fixture(autouse=True)
def _triton() -> Any:
    with triton_if_missing():
        yield


CASES = [
    ("llama3.1-8b", Plan(dp=4, tp=2, pp=1, recompute="selective"), Job(gpus=8, gpus_per_node=8, global_batch=32, seq_len=8192)),
    ("llama3.1-70b", Plan(dp=2, tp=8, pp=4, vpp=5, zero=3, recompute="full"), Job(gpus=64, gpus_per_node=8, global_batch=64, seq_len=8192)),
    (
        "llama3-70b",
        Plan(dp=4, tp=4, pp=3, cp=2, cp_comm="allgather", zero=0, mbs=2),
        Job(gpus=96, gpus_per_node=8, global_batch=64, seq_len=8192),
    ),
    ("qwen3-30b-a3b", Plan(dp=8, tp=2, pp=1, ep=8, etp=1), Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096)),
    ("deepseek-v3", Plan(dp=16, tp=2, pp=8, ep=16, etp=1, vpp=2, zero=2), Job(gpus=256, gpus_per_node=8, global_batch=512, seq_len=4096)),
]
IDS = [f"{n}-{p.label().replace(' ', '-')}" for n, p, _ in CASES]


def parse(name: str, plan: Plan, job: Job) -> tuple[Any, list[str]]:
    from torchtitan.config.manager import ConfigManager

    model = load_model(name)
    line = tt.torchtitan_command(
        model, plan, job, nnodes=max(1, job.gpus // job.gpus_per_node), nproc_per_node=min(job.gpus, job.gpus_per_node)
    )
    words = shlex.split(line)
    words = words[words.index("torchtitan.train") + 1 :]
    return ConfigManager().parse_args(words), words


@pytest.mark.parametrize(("name", "plan", "job"), CASES, ids=IDS)
def test_torchtitan_parses_and_validates_the_launch(name: str, plan: Plan, job: Job) -> None:
    from torchtitan.distributed.parallel_dims import ParallelDims

    config, _ = parse(name, plan, job)
    dims = ParallelDims.from_config(config.parallelism, job.gpus)  # its own check of the degrees
    assert dims.dp_replicate * dims.dp_shard == plan.dp and (dims.tp, dims.pp, dims.cp, dims.ep) == (plan.tp, plan.pp, plan.cp, plan.ep)
    # the EP group lies within dp_shard x cp x tp (torchtitan's efsdp = dp_shard * cp * tp / ep)
    assert (dims.dp_shard * dims.cp * dims.tp) % dims.ep == 0
    assert config.training.seq_len == job.seq_len and config.training.global_batch_size == job.global_batch
    ac = type(config.activation_checkpoint).__qualname__
    assert ac == {"none": "NoneType", "selective": "SelectiveAC.Config", "full": "FullAC.Config"}[plan.recompute]
    per_step = config.training.local_batch_size * plan.dp
    if plan.pp > 1:  # the whole batch in one pass of micro-batches of mbs
        assert per_step == job.global_batch and config.parallelism.pipeline_parallel_microbatch_size == plan.mbs
    else:  # gradient accumulation up to the global batch
        assert config.training.local_batch_size == plan.mbs


@pytest.mark.parametrize(
    ("name", "plan", "job"), [c for c in CASES if c[1].pp > 1], ids=[i for i, c in zip(IDS, CASES, strict=True) if c[1].pp > 1]
)
def test_torchtitan_cuts_the_stages_the_estimate_costed(name: str, plan: Plan, job: Job) -> None:
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part, _get_pipeline_metadata

    config, _ = parse(name, plan, job)
    dims = ParallelDims.from_config(config.parallelism, job.gpus)
    stages, layers, first, last = _get_pipeline_metadata(dims, config.parallelism, config.model_spec.model)
    parts = _generate_llm_fqn_per_model_part(stages, layers, first, last)
    counts = [sum(1 for m in part if m.startswith("layers.")) for part in parts]
    assert counts == tt.stage_counts(load_model(name), plan)


@pytest.mark.parametrize("name", sorted({n for n, _, _ in CASES}))
def test_torchtitan_config_builds_autopars_model(name: str) -> None:
    import torch

    plan, job = next((p, j) for n, p, j in CASES if n == name)
    config, _ = parse(name, plan, job)
    with torch.device("meta"):
        built = sum(p.numel() for p in config.model_spec.model.build().parameters())
    ours = load_model(name).total_params()
    assert abs(built - ours) / ours < 0.005, (built, ours)


def test_plans_torchtitan_refuses_are_refused_by_autopar_first() -> None:
    model = load_model("qwen3-30b-a3b")
    job = Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096)
    assert "all-gathers" in (tt.unsupported(model, Plan(dp=4, tp=2, pp=1, cp=2, cp_comm="ring", ep=8), job) or "")
    assert "etp" in (tt.unsupported(model, Plan(dp=8, tp=2, pp=1, ep=8, etp=2), job) or "")
    assert (
        "mamba"
        in (
            tt.unsupported(load_model("nemotron-h-8b"), Plan(dp=8, tp=1, pp=1), Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=8192))
            or ""
        ).lower()
    )


@pytest.mark.parametrize(("module", "config"), sorted(tt.TITAN_SHAPES))
def test_torchtitan_config_shapes_are_torchtitans(module: str, config: str) -> None:
    """TITAN_SHAPES (what --torchtitan-config is checked against) is what each config function builds."""
    import importlib

    import torch

    registry = importlib.import_module(f"torchtitan.models.{module}.config_registry")
    try:
        model = getattr(registry, config)().model_spec.model
        with torch.device("meta"):
            params = sum(p.numel() for p in model.build().parameters())
    except (ImportError, RuntimeError, AssertionError) as exc:  # float8 / nvfp4 need torchao; the EP variants CUDA
        pytest.skip(f"{config}: {exc}")
    assert (len(model.layers), model.dim, model.vocab_size, params) == tt.TITAN_SHAPES[module, config]


@pytest.mark.parametrize("module", sorted({m for m, _ in tt.TITAN_SHAPES}))
def test_torchtitan_config_table_lists_every_config(module: str) -> None:
    import importlib
    import inspect

    registry = importlib.import_module(f"torchtitan.models.{module}.config_registry")
    names = {
        n
        for n, f in inspect.getmembers(registry, inspect.isfunction)
        if f.__module__ == registry.__name__ and not n.startswith("_") and "debug" not in n and "model_registry(" in inspect.getsource(f)
    }
    assert names - {n for m, n in tt.TITAN_SHAPES if m == module} <= {"qwen3_moe_deepep"}  # a debug model's flavor
