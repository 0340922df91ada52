"""The DeepSpeed launch (``--emit deepspeed``), checked by DeepSpeed's own code.

DeepSpeed 0.19.8 (the ``frameworks`` extra; a CPU install, DS_BUILD_OPS=0) reads the emitted
``ds_config.json`` with ``DeepSpeedConfig`` (its pydantic models and the batch identity
train_batch_size = micro-batch x accumulation x data-parallel ranks), the launch line with its
launcher's ``parse_args`` and the script's words with ``deepspeed.add_config_arguments``. Without
DeepSpeed those tests skip and say why; the contract tests (CLI, JSON, files) always run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autopar.emit import deepspeed as ds
from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from tests.unit.emit.test_emit import spec

JOB8 = Job(gpus=8, gpus_per_node=8, global_batch=512, seq_len=8192)
# (plan, job, hand-derived (train_batch, micro, accumulation, stage, autotp)): accumulation = batch / (dp x mbs)
CASES = [
    (Plan(dp=8, tp=1, pp=1, zero=3), JOB8, (512, 1, 64, 3, 0)),
    (Plan(dp=4, tp=2, pp=1, mbs=2, zero=1, sp=False), JOB8, (512, 2, 64, 1, 2)),
    (Plan(dp=2, tp=1, pp=4, mbs=4, zero=1), JOB8, (512, 4, 64, 1, 0)),
    (
        Plan(dp=16, tp=1, pp=1, mbs=2, zero=2, recompute="full"),
        Job(gpus=16, gpus_per_node=8, global_batch=256, seq_len=4096, dtype="fp16"),
        (256, 2, 8, 2, 0),
    ),
    (Plan(dp=8, tp=1, pp=1, zero=0), Job(gpus=8, gpus_per_node=8, global_batch=64, seq_len=2048), (64, 1, 8, 0, 0)),
]


def model() -> ModelSpec:
    return spec(name="llama3-8b", layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8, ffn_hidden_size=14336)


class _DataParallel:
    """The model-parallel unit DeepSpeedConfig asks for the data-parallel world size."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


@pytest.fixture(scope="module")
def deepspeed_config() -> type:
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (DS_BUILD_OPS=0 pip install -e '.[frameworks]')")
    from deepspeed.runtime import config

    return config.DeepSpeedConfig


def read_config(cls: type, doc: dict, dp: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    """DeepSpeedConfig on ``doc`` as rank 0 of a job with ``dp`` data-parallel ranks (no process group here)."""
    from deepspeed.runtime import config

    monkeypatch.setattr(config.dist, "get_rank", lambda: 0)
    return cls(doc, mpu=_DataParallel(dp))


@pytest.mark.parametrize(("plan", "job", "want"), CASES)
def test_deepspeed_reads_the_config(
    deepspeed_config: type, monkeypatch: pytest.MonkeyPatch, plan: Plan, job: Job, want: tuple[int, int, int, int, int]
) -> None:
    import torch

    doc = json.loads(ds.config_text(model(), plan, job))
    cfg = read_config(deepspeed_config, doc, plan.dp, monkeypatch)
    got = (
        cfg.train_batch_size,
        cfg.train_micro_batch_size_per_gpu,
        cfg.gradient_accumulation_steps,
        cfg.zero_optimization_stage,
        cfg.tensor_parallel_config.autotp_size,
    )
    assert got == want
    assert cfg.bfloat16_config.enabled == (job.dtype == "bf16")
    assert cfg.float16_config.enabled == (job.dtype == "fp16")
    assert cfg.zero_config.overlap_comm == (plan.zero >= 1)
    assert cfg.communication_data_type == torch.float32  # the deepspeed stack's 4-byte gradient reduce


def test_the_reduce_precision_follows_the_stack() -> None:
    from dataclasses import replace

    from autopar.io.stacks import load_stack

    plan = Plan(dp=8, tp=1, pp=1, zero=1)
    stack = load_stack("deepspeed")
    assert stack.grad_reduce_bytes == 4 and ds.ds_config(model(), plan, JOB8, stack)["communication_data_type"] == "fp32"
    halved = replace(stack, grad_reduce_bytes=2.0)
    assert ds.ds_config(model(), plan, JOB8, halved)["communication_data_type"] == "bf16"


def test_deepspeed_refuses_a_wrong_batch_so_the_check_can_fail(deepspeed_config: type, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = json.loads(ds.config_text(model(), Plan(dp=8, tp=1, pp=1, zero=3), JOB8))
    with pytest.raises(AssertionError, match="train_batch_size is not equal"):
        read_config(deepspeed_config, doc, 4, monkeypatch)  # the same file on 4 data-parallel ranks
    with pytest.raises(Exception, match="Extra inputs are not permitted"):
        read_config(deepspeed_config, {**doc, "zero_optimization": {"stage": 3, "overlap_comms": True}}, 8, monkeypatch)


@pytest.mark.parametrize("multiline", [False, True])
def test_deepspeed_launcher_parses_the_line(deepspeed_config: type, multiline: bool) -> None:
    import deepspeed
    from deepspeed.launcher import runner

    line = ds.deepspeed_command(
        model(), Plan(dp=8, tp=1, pp=1, zero=3), JOB8, nnodes=1, nproc_per_node=8, multiline=multiline, extra_args=["--lr", "3e-4"]
    )
    words = shlex.split(line.replace("\\\n", ""))  # the shell joins a backslash-newline
    assert words[0] == "deepspeed"
    args = runner.parse_args(words[1:])
    assert (args.num_gpus, args.master_port, args.user_script) == (8, 29500, "train.py")
    script = deepspeed.add_config_arguments(argparse.ArgumentParser())
    script.add_argument("--lr", type=float)
    parsed = script.parse_args(args.user_args)
    assert (parsed.deepspeed, parsed.deepspeed_config, parsed.lr) == (True, "ds_config.json", 3e-4)


def test_several_hosts_start_under_torchrun() -> None:
    run = pytest.importorskip("torch.distributed.run")
    job = Job(gpus=32, gpus_per_node=8, global_batch=512, seq_len=8192)
    line = ds.deepspeed_command(model(), Plan(dp=32, tp=1, pp=1, zero=3), job, nnodes=4, nproc_per_node=8)
    words = shlex.split(line)
    assert words[0] == "torchrun"
    args = run.get_args_parser().parse_args(words[1:])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_backend) == ("4", "8", "c10d")
    assert args.training_script == "train.py"
    assert args.training_script_args == ["--deepspeed", "--deepspeed_config", "ds_config.json"]


@pytest.mark.parametrize(
    ("plan", "job", "reason"),
    [
        (Plan(dp=2, tp=1, pp=4, zero=2), JOB8, "pipeline engine refuses ZeRO-2 and ZeRO-3 (pp 4, ZeRO-2)"),
        (Plan(dp=1, tp=2, pp=2, vpp=2, sp=False), Job(gpus=4, gpus_per_node=8, global_batch=8, seq_len=8192), "no interleaved schedule"),
        (Plan(dp=4, tp=1, pp=1, cp=2), JOB8, "no ring or all-gather context parallelism"),
        (Plan(dp=4, tp=2, pp=1), JOB8, "AutoTP has no sequence parallelism"),
        (Plan(dp=2, tp=2, pp=2, sp=False), JOB8, "not both at once"),
        (Plan(dp=8, tp=1, pp=1, recompute="selective"), JOB8, "not selected modules"),
        (Plan(dp=8, tp=1, pp=1), Job(gpus=8, gpus_per_node=8, global_batch=512, seq_len=8192, dtype="fp8"), "not fp8"),
    ],
)
def test_what_deepspeed_cannot_run_is_refused_in_one_line(plan: Plan, job: Job, reason: str) -> None:
    assert reason in (ds.unsupported(model(), plan, job) or "")
    with pytest.raises(SpecError, match=r"DeepSpeed 0\.19\.8 cannot run this plan") as err:
        ds.config_text(model(), plan, job)
    assert "\n" not in str(err.value)


# --- the CLI contract ---------------------------------------------------------------------------


def test_suggest_emit_deepspeed_json_carries_the_config() -> None:
    from typer.testing import CliRunner

    from autopar.cli import app

    res = CliRunner().invoke(app, ["suggest", "llama3-8b", "--gpus", "8", "--emit", "deepspeed", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["stack"] == "deepspeed"  # --emit deepspeed costs as the deepspeed stack
    assert doc["launch_kind"] == "deepspeed"
    assert shlex.split(doc["launch"])[:3] == ["deepspeed", "--num_gpus", "8"]
    cfg = json.loads(doc["launch_files"]["ds_config.json"])
    # the plan launched: the best, or the one a launch note names when DeepSpeed cannot run the best
    # (llama3-8b on 8 GPUs: the best recomputes selected modules, so plan #3, dp4 tp2, is launched)
    found = [re.search(r"launching plan #(\d+)", note) for note in doc["launch_notes"]]
    plan = doc["plans"][next((int(m.group(1)) for m in found if m), 1) - 1]
    assert cfg["train_batch_size"] == doc["global_batch"]
    assert cfg["gradient_accumulation_steps"] == doc["global_batch"] // (plan["dp"] * plan["mbs"])
    assert cfg["zero_optimization"]["stage"] == plan["zero"]


def test_emit_out_script_writes_the_config_then_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from autopar.cli import app

    out = tmp_path / "launch.sh"
    res = CliRunner().invoke(app, ["suggest", "llama3-8b", "--gpus", "8", "--emit", "deepspeed", "--emit-out", str(out)])
    assert res.exit_code == 0, res.output
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "deepspeed").write_text('#!/bin/sh\necho "$@" > argv.txt\n')
    (stub / "deepspeed").chmod(0o755)
    run = tmp_path / "run"
    run.mkdir()
    subprocess.run(["bash", str(out)], cwd=run, env={**os.environ, "PATH": f"{stub}:{os.environ['PATH']}"}, check=True)
    assert json.loads((run / "ds_config.json").read_text())["train_batch_size"] == 512
    assert (run / "argv.txt").read_text().split() == [
        "--num_gpus",
        "8",
        "--master_port",
        "29500",
        "train.py",
        "--deepspeed",
        "--deepspeed_config",
        "ds_config.json",
    ]


def test_estimate_refuses_a_plan_deepspeed_cannot_run_and_names_one_it_can() -> None:
    from typer.testing import CliRunner

    from autopar.cli import app

    res = CliRunner().invoke(app, ["estimate", "llama3-8b", "--gpus", "8", "--tp", "1", "--pp", "4", "--zero", "2", "--emit", "deepspeed"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "DeepSpeed 0.19.8 cannot run this plan: its pipeline engine refuses ZeRO-2" in lines[0]
    assert lines[0].endswith(
        "the nearest plan it can run: --tp 1 --pp 4 --vpp 1 --cp 1 --cp-comm ring --ep 1 --etp 1 --mbs 1 --recompute none --zero 1"
    )
