"""--emit on suggest and estimate (autopar.advise.launch): option checks, node layout, the printed, saved
and JSON forms, and one-line errors."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from autopar.advise import launch
from autopar.cli import app
from autopar.emit.slurm import SlurmOptions
from autopar.errors import SpecError
from autopar.spec.job import Job

runner = CliRunner()
SUGGEST_2N = ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "16", "--top", "3"]
ESTIMATE_70B = [
    "estimate",
    "llama3-70b",
    "--hardware",
    "h100-sxm",
    "--gpus",
    "64",
    "--tp",
    "8",
    "--pp",
    "4",
    "--vpp",
    "5",
    "--recompute",
    "selective",
    "--no-explain",
]
SUGGEST_8B = ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "3"]


def words(command: str) -> list[str]:
    """argv of a printed (possibly multi-line) command, without leading NAME=value words."""
    out = shlex.split(command.replace("\\\n", ""))
    while "=" in out[0] and not out[0].startswith("-"):
        out.pop(0)
    return out


def value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def one_line_error(result: Any, message: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("kind", "out", "config", "message"),
    [
        (None, Path("x.sh"), None, "`emit_out` needs `emit="),
        (None, None, "llama3_70b", "`torchtitan_config` needs `emit="),
        ("megatron", None, "llama3_70b", "`torchtitan_config` needs `emit=torchtitan`"),
        ("nemo", None, None, "`emit` must be one of megatron, torchtitan, slurm, slurm-torchtitan, deepspeed, megatron-bridge, got 'nemo'"),
        ("torchtitan", None, "llama3 70b", "expected NAME or MODULE:NAME"),
        ("torchtitan", None, "llama3:", "expected NAME or MODULE:NAME"),
    ],
)
def test_request_refuses_inconsistent_options(kind: str | None, out: Path | None, config: str | None, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        launch.request(kind, out=out, torchtitan_config=config)


def test_request_reads_extra_words_and_slurm_options() -> None:
    assert launch.request(None, out=None, torchtitan_config=None) is None
    req = launch.request("megatron", out=None, torchtitan_config=None, extra="--log-interval 1 --save '/ck pt'")
    assert req is not None and req.extra == ("--log-interval", "1", "--save", "/ck pt")
    with pytest.raises(SpecError, match="`emit_extra`: No closing quotation"):
        launch.request("megatron", out=None, torchtitan_config=None, extra="--save '/x")
    with pytest.raises(SpecError, match="`slurm_\\*` options need `emit=slurm`"):
        launch.request("megatron", out=None, torchtitan_config=None, slurm=SlurmOptions(qos="high"))
    with pytest.raises(SpecError, match=r"`emit_extra` needs `emit=megatron\|torchtitan\|"):
        launch.request(None, out=None, torchtitan_config=None, extra="--x")


@pytest.mark.parametrize(
    ("time", "ok"),
    [
        ("90", True),
        ("90:30", True),
        ("04:00:00", True),
        ("2-12", True),
        ("2-12:30", True),
        ("2-12:30:00", True),
        ("UNLIMITED", True),
        ("infinite", True),
        ("4h", False),
        ("1:2:3:4", False),
        ("2-", False),
        ("", False),
    ],
)
def test_request_checks_slurm_time_as_sbatch_reads_it(time: str, ok: bool) -> None:
    """sbatch(1) --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
    days-hours:minutes:seconds; INFINITE/UNLIMITED (slurm src/common/parse_time.c)."""

    def ask() -> object:
        return launch.request("slurm", out=None, torchtitan_config=None, slurm=SlurmOptions(time=time))

    if ok:
        assert ask() is not None
    else:
        with pytest.raises(SpecError, match="`slurm_time`"):
            ask()


@pytest.mark.parametrize(
    ("gpus", "per_node", "per_host", "layout"),
    [
        (64, 8, 8, (8, 8)),
        (8, 8, 8, (1, 8)),
        (4, 8, 8, (1, 4)),
        (16, 4, 4, (4, 4)),
        (16, 72, 4, (4, 4)),
        (4, 72, 4, (1, 4)),
        (144, 72, 4, (36, 4)),
    ],
)
def test_node_layout(gpus: int, per_node: int, per_host: int, layout: tuple[int, int]) -> None:
    # a GB200 NVL72 node (72 GPUs on NVLink) is 18 hosts of 4: torchrun runs once per host
    job = Job(gpus=gpus, gpus_per_node=per_node, global_batch=64, seq_len=2048)
    assert launch.node_layout(job, per_host) == layout


def test_job_name_is_a_safe_sbatch_value() -> None:
    assert launch.job_name("llama3.1-405b") == "autopar-llama3.1-405b"
    assert launch.job_name("my model; rm -rf") == "autopar-my-model--rm--rf"


def test_suggest_emit_megatron_prints_the_recommended_plan() -> None:
    doc = json.loads(runner.invoke(app, [*SUGGEST_2N, "--json"]).stdout)
    r = runner.invoke(app, [*SUGGEST_2N, "--emit", "megatron"])
    assert r.exit_code == 0
    table, command = r.stdout.split("launch: Megatron-LM torchrun command (2 nodes x 8 GPUs)")
    assert "recommended:" in table
    argv = words(command.split("first node's address\n", 1)[1])
    assert argv[0] == "torchrun" and value(argv, "--nnodes") == "2" and value(argv, "--nproc-per-node") == "8"
    assert value(argv, "--rdzv-endpoint") == "$MASTER_ADDR:29500"
    for flag, key in (
        ("--tensor-model-parallel-size", "tp"),
        ("--pipeline-model-parallel-size", "pp"),
        ("--context-parallel-size", "cp"),
        ("--micro-batch-size", "mbs"),
        ("--global-batch-size", "global_batch"),
    ):
        assert value(argv, flag) == str(doc[key]), flag


def test_suggest_json_puts_the_one_line_command_under_launch() -> None:
    r = runner.invoke(app, [*SUGGEST_2N, "--json", "--emit", "megatron"])
    doc = json.loads(r.stdout)
    assert doc["launch_kind"] == "megatron" and "\n" not in doc["launch"]
    argv = words(doc["launch"])
    assert value(argv, "--tensor-model-parallel-size") == str(doc["tp"])
    assert value(argv, "--num-layers") == "32"


def test_torchrun_parses_the_emitted_launcher() -> None:
    run = pytest.importorskip("torch.distributed.run")
    doc = json.loads(runner.invoke(app, [*SUGGEST_8B, "--json", "--emit", "torchtitan", "--torchtitan-config", "llama3_8b"]).stdout)
    args = run.get_args_parser().parse_args(words(doc["launch"])[1:])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_endpoint) == ("1", "8", "localhost:29500")
    assert args.module and args.training_script == "torchtitan.train"
    assert args.training_script_args[:4] == ["--module", "llama3", "--config", "llama3_8b"]
    assert args.training_script_args[-1] == f"activation-checkpoint:{doc['recompute']}"


def test_torchtitan_config_defaults_from_the_preset() -> None:
    doc = json.loads(runner.invoke(app, [*SUGGEST_8B, "--json", "--emit", "torchtitan"]).stdout)
    assert words(doc["launch"])[words(doc["launch"]).index("--module") :][:4] == ["--module", "llama3", "--config", "llama3_8b"]


def test_torchtitan_without_a_known_config_is_one_line_exit_2() -> None:
    r = runner.invoke(app, ["suggest", "gpt3-175b", "--gpus", "64", "--emit", "torchtitan"])
    one_line_error(r, "torchtitan has no known config for gpt3-175b: give --torchtitan-config")


QWEN25_7B = {  # Qwen/Qwen2.5-7B config.json (the fields autopar reads)
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-06,
    "use_sliding_window": False,
    "torch_dtype": "bfloat16",
}


def test_torchtitan_config_of_another_shape_is_refused(tmp_path: Path) -> None:
    # issue 25: qwen3:qwen3_8b on Qwen2.5-7B was emitted silently; torchtitan builds the model the name says
    path = tmp_path / "qwen2.5-7b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(QWEN25_7B))
    base = ["suggest", str(path), "--gpus", "8", "--top", "1", "--emit", "torchtitan", "--torchtitan-config"]
    one_line_error(
        runner.invoke(app, [*base, "qwen3:qwen3_8b"]),
        "--torchtitan-config qwen3:qwen3_8b: torchtitan 0.3.0 has no config qwen3_8b in qwen3 (it has qwen3_0_6b, ",
    )
    one_line_error(
        runner.invoke(app, [*base, "qwen3:qwen3_14b"]),
        "--torchtitan-config qwen3:qwen3_14b builds torchtitan's 40 layers, hidden 5120, vocabulary 151,936, "
        "14.8B parameters; qwen2.5-7b has 28 layers, hidden 3584, vocabulary 152,064, 7.6B (torchtitan has "
        "no config of its shape)",
    )
    r = runner.invoke(
        app, ["suggest", "qwen3-14b", "--gpus", "8", "--top", "1", "--emit", "torchtitan", "--torchtitan-config", "qwen3:qwen3_32b"]
    )
    one_line_error(r, "qwen3-14b has 40 layers, hidden 5120, vocabulary 151,936, 14.8B; qwen3:qwen3_14b has qwen3-14b's shape")
    r = runner.invoke(
        app, ["suggest", "qwen3-14b", "--gpus", "8", "--top", "1", "--emit", "torchtitan", "--torchtitan-config", "qwen3:qwen3_14b"]
    )
    assert r.exit_code == 0 and "--module qwen3 --config qwen3_14b" in " ".join(r.stdout.replace("\\\n", " ").split())


def test_spec_error_from_emit_is_one_line_exit_2() -> None:
    r = runner.invoke(app, [*ESTIMATE_70B, "--zero", "3", "--dtype", "fp16", "--emit", "torchtitan", "--torchtitan-config", "llama3_70b"])
    one_line_error(r, "torchtitan 0.3.0 cannot run this plan: its command line sets bf16 mixed precision only")


def test_estimate_names_the_nearest_plan_torchtitan_runs() -> None:
    """Ring CP is not torchtitan's (PyTorch's context_parallel all-gathers K/V): the same plan with all-gather CP
    is the nearest it runs."""
    r = runner.invoke(
        app,
        [
            "estimate",
            "llama3.1-70b",
            "--gpus",
            "64",
            "--tp",
            "8",
            "--pp",
            "2",
            "--cp",
            "2",
            "--cp-comm",
            "ring",
            "--seq-len",
            "32768",
            "--zero",
            "3",
            "--no-explain",
            "--emit",
            "torchtitan",
            "--stack",
            "megatron",
        ],
    )
    one_line_error(
        r,
        "its context parallelism all-gathers K/V (no overlapped ring); the nearest plan it can "
        "run: --tp 8 --pp 2 --vpp 1 --cp 2 --cp-comm allgather",
    )


def test_a_launch_on_another_framework_than_the_stack_says_so() -> None:
    doc = json.loads(runner.invoke(app, [*SUGGEST_8B, "--json", "--stack", "torchtitan", "--emit", "megatron"]).stdout)
    assert any(n.startswith("costed for stack torchtitan, launched on Megatron-LM") for n in doc["launch_notes"])
    doc = json.loads(runner.invoke(app, [*SUGGEST_8B, "--json", "--emit", "torchtitan"]).stdout)
    assert not any(n.startswith("costed for stack") for n in doc["launch_notes"])  # --emit torchtitan: its stack


def test_suggest_emit_torchtitan_launches_the_best_plan_it_can_run() -> None:
    """llama3.1-405b on 128 GPUs: the best plan interleaves 126 layers in 16 x 4 chunks with ring CP 2, which
    torchtitan runs neither way (its CP all-gathers K/V; no layers-per-stage value cuts 64 stages: ceil(126 / n)
    is 126, 63, 42, ...); the launch is the best ranked plan it runs, and a note names the plan skipped."""
    from autopar.advise import train as advise
    from autopar.emit import torchtitan

    ctx = advise.context(
        "llama3.1-405b", hardware=None, gpus=128, nodes=None, global_batch=None, seq_len=None, dtype="bf16", seq_len_dist=None
    )
    ranked = [r.plan for r in advise.suggest(ctx).result.ranked]
    reason = torchtitan.unsupported(ctx.model, ranked[0], ctx.job)
    assert (ranked[0].pp, ranked[0].vpp, ranked[0].cp, ranked[0].cp_comm) == (16, 4, 2, "ring")
    assert reason == "its context parallelism all-gathers K/V (no overlapped ring)"
    assert torchtitan.unsupported(ctx.model, replace(ranked[0], cp_comm="allgather"), ctx.job) == (
        "no layers-per-stage value cuts 126 layers into pp x vpp = 64 stages"
    )
    got = launch.prepare(launch.request("torchtitan", out=None, torchtitan_config=None), ctx, ranked)
    assert got is not None
    want = next(i for i, p in enumerate(ranked) if torchtitan.unsupported(ctx.model, p, ctx.job) is None)
    assert got.plan == ranked[want] and want > 0
    assert got.notes[0] == (
        f"the best plan ({ranked[0].label()}) cannot run on torchtitan 0.3.0: {reason}; launching "
        f"plan #{want + 1} ({ranked[want].label()}), the best it can run"
    )
    assert got.notes[1].startswith("costed for stack megatron, launched on torchtitan")
    r = runner.invoke(app, ["suggest", "llama3.1-405b", "--gpus", "128", "--emit", "torchtitan"])
    assert r.exit_code == 0 and "launch: torchtitan torchrun command (16 nodes x 8 GPUs)" in r.stdout
    assert "stack: torchtitan" in r.stdout or "torchtitan" in r.stdout.split("launch:")[0]


def test_choose_names_the_plan_it_skips() -> None:
    from autopar.advise import train as advise
    from autopar.spec.plan import Plan

    ctx = advise.context(
        "qwen3-30b-a3b", hardware=None, gpus=16, nodes=None, global_batch=64, seq_len=4096, dtype="bf16", seq_len_dist=None
    )
    bad, good = Plan(dp=8, tp=2, pp=1, ep=8, etp=2), Plan(dp=8, tp=2, pp=1, ep=8, etp=1)
    req = launch.request("torchtitan", out=None, torchtitan_config=None)
    assert req is not None
    plan, notes = launch.choose(req, ctx, [bad, good])
    assert plan == good and "launching plan #2 (dp8 tp2 pp1), the best it can run" in notes[0]
    with pytest.raises(SpecError, match="the nearest plan it can run: `tp=2` `pp=1` `vpp=1` `cp=1` `cp_comm=ring` `ep=8` `etp=1`"):
        launch.choose(req, ctx, [bad])


def test_estimate_emit_uses_the_given_plan() -> None:
    r = runner.invoke(app, [*ESTIMATE_70B, "--emit", "megatron"])
    assert r.exit_code == 0
    argv = words(r.stdout.split("first node's address\n", 1)[1])
    assert value(argv, "--tensor-model-parallel-size") == "8"
    assert value(argv, "--num-virtual-stages-per-pipeline-rank") == "5"
    assert value(argv, "--recompute-granularity") == "selective"
    doc = json.loads(runner.invoke(app, [*ESTIMATE_70B, "--json", "--emit", "megatron"]).stdout)
    assert words(doc["launch"]) == argv


def test_slurm_script_goes_to_a_file_atomically(tmp_path: Path) -> None:
    target = tmp_path / "train.sbatch"
    target.write_text("old contents\n")
    r = runner.invoke(app, [*SUGGEST_2N, "--emit", "slurm", "--emit-out", str(target)])
    assert r.exit_code == 0
    assert f"launch: Megatron-LM sbatch script (2 nodes x 8 GPUs) written to {target}" in " ".join(r.stdout.split())
    assert "#SBATCH" not in r.stdout
    script = target.read_text()
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name=autopar-llama3-8b\n#SBATCH --nodes=2\n")
    assert "srun --nodes=2 --ntasks-per-node=1 --cpus-per-task=64 bash -c " in script and "--rdzv-endpoint" in script
    assert os.listdir(tmp_path) == ["train.sbatch"]  # no temporary file left behind
    assert os.access(target, os.X_OK)
    doc = json.loads(runner.invoke(app, [*SUGGEST_2N, "--json", "--emit", "slurm", "--emit-out", str(target)]).stdout)
    assert doc["launch"] == target.read_text() and doc["launch_file"] == str(target)


def test_emit_out_command_is_a_bash_script(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    r = runner.invoke(app, [*SUGGEST_8B, "--emit", "torchtitan", "--torchtitan-config", "llama3_8b", "--emit-out", str(target)])
    assert r.exit_code == 0
    text = target.read_text()
    assert text.startswith("#!/bin/bash\n# torchtitan (one node, 8 GPUs); written by autopar\nset -euo pipefail\n")
    assert words(text.split("set -euo pipefail\n", 1)[1])[:3] == ["torchrun", "--nnodes", "1"]


def test_emit_out_to_a_missing_folder_is_one_line_exit_2(tmp_path: Path) -> None:
    r = runner.invoke(app, [*SUGGEST_8B, "--emit", "megatron", "--emit-out", str(tmp_path / "no" / "x.sh")])
    one_line_error(r, "--emit-out")
    assert "cannot write" in r.stderr


def test_megatron_launches_ep_over_tp_plans() -> None:
    """The megatron stack lays EP over DP x CP x TP with etp 1 (Megatron-Core's expert layout); the launch
    validates under the same rules instead of refusing what the search ranked."""
    r = runner.invoke(
        app,
        [
            "estimate",
            "deepseek-v3",
            "--gpus",
            "256",
            "--tp",
            "2",
            "--pp",
            "16",
            "--cp",
            "2",
            "--ep",
            "16",
            "--etp",
            "1",
            "--no-explain",
            "--json",
            "--emit",
            "megatron",
        ],
    )
    assert r.exit_code == 0, r.output
    argv = words(json.loads(r.stdout)["launch"])
    assert value(argv, "--expert-model-parallel-size") == "16" and value(argv, "--expert-tensor-parallel-size") == "1"
    assert value(argv, "--context-parallel-size") == "2"  # dp = 256 / (2 * 16 * 2) = 4: ep 16 spans dp x cp x tp


def test_slurm_cpus_per_task_option(tmp_path: Path) -> None:
    r = runner.invoke(app, [*SUGGEST_2N, "--emit", "slurm", "--slurm-cpus-per-task", "96", "--json"])
    assert r.exit_code == 0, r.output
    script = json.loads(r.stdout)["launch"]
    assert "#SBATCH --cpus-per-task=96\n" in script and "srun --nodes=2 --ntasks-per-node=1 --cpus-per-task=96 " in script
    r = runner.invoke(app, [*SUGGEST_2N, "--emit", "megatron", "--slurm-cpus-per-task", "96"])
    assert r.exit_code == 2 and "--slurm-* options need --emit slurm" in r.stderr
