"""Tests for autopar.emit.targets: launch commands for Megatron-LM, torchtitan and SLURM.

Golden files live in tests/golden/emit/. After a deliberate change to the emitted text, rewrite
them with

    AUTOPAR_REGEN_GOLDEN=1 python3 -m pytest -q tests/test_emit.py

and review the diff before committing.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from autopar.emit import targets as emit
from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan

GOLDEN = Path(__file__).parent / "golden" / "emit"
REGEN = os.environ.get("AUTOPAR_REGEN_GOLDEN") == "1"


def spec(**overrides: object) -> ModelSpec:
    """A Llama-3-70B-shaped spec (arXiv 2407.21783, table 3), fields overridable."""
    fields: dict = dict(name="llama3-70b", layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                        head_dim=128, ffn_hidden_size=28672, ffn_activation="swiglu", vocab_size=128256,
                        seq_len=8192, max_seq_len=8192, tie_embeddings=False)
    fields.update(overrides)
    return ModelSpec(**fields)


GPT2 = spec(name="gpt2-medium", layers=24, hidden_size=1024, num_attention_heads=16, num_kv_heads=16, head_dim=64,
            ffn_hidden_size=4096, ffn_activation="gelu", vocab_size=50257, seq_len=1024, max_seq_len=1024,
            tie_embeddings=True)


@dataclass(frozen=True)
class Case:
    name: str
    model: ModelSpec
    plan: Plan
    job: Job
    nnodes: int
    nproc: int


CASES = [
    Case("llama3_70b_64gpu", spec(), Plan(dp=2, tp=8, pp=4, vpp=5, recompute="selective", zero=1),
         Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192), 8, 8),
    Case("llama3_70b_fsdp_full", spec(), Plan(dp=8, tp=8, pp=1, recompute="full", zero=3),
         Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192), 8, 8),
    Case("llama3_70b_cp_ddp", spec(), Plan(dp=4, tp=4, pp=2, cp=2, mbs=2, zero=0, sp=False),
         Job(gpus=64, gpus_per_node=8, global_batch=256, seq_len=16384), 8, 8),
    Case("llama3_70b_zero2", spec(), Plan(dp=4, tp=8, pp=2, zero=2),
         Job(gpus=64, gpus_per_node=8, global_batch=256, seq_len=8192), 8, 8),
    Case("uneven_first_last", spec(name="llama3-405b-like", layers=127), Plan(dp=1, tp=8, pp=16, recompute="full"),
         Job(gpus=128, gpus_per_node=8, global_batch=64, seq_len=8192), 16, 8),
    Case("uneven_layout", spec(name="tiny", layers=9, hidden_size=1024, num_attention_heads=8, num_kv_heads=8,
                               ffn_hidden_size=4096), Plan(dp=1, tp=1, pp=6),
         Job(gpus=6, gpus_per_node=8, global_batch=12, seq_len=2048), 1, 6),
    Case("gpt2_fp16", GPT2, Plan(dp=4, tp=2, pp=1, zero=0),
         Job(gpus=8, gpus_per_node=8, global_batch=64, seq_len=1024, dtype="fp16"), 1, 8),
    Case("relu2_head_dim", spec(name="wide-heads", layers=28, hidden_size=3072, num_attention_heads=32, num_kv_heads=8,
                                head_dim=128, ffn_activation="relu2"), Plan(dp=4, tp=4, pp=1),
         Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096), 2, 8),
]
TITAN_CASES = [c for c in CASES if c.job.dtype == "bf16"]


def megatron(case: Case, **kw: object) -> str:
    return emit.megatron_command(case.model, case.plan, case.job, nnodes=case.nnodes, nproc_per_node=case.nproc, **kw)


def titan(case: Case, **kw: object) -> str:
    return emit.torchtitan_command(case.model, case.plan, case.job, config="llama3_70b",
                                   nnodes=case.nnodes, nproc_per_node=case.nproc, **kw)


def launcher_words(cmd: str) -> list[str]:
    """The words after ``torchrun``, dropping leading NAME=value environment assignments."""
    words = shlex.split(cmd.replace("\\\n", ""))
    while "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)
    assert words[0] == "torchrun"
    return words[1:]


def flags(words: list[str]) -> set[str]:
    return {w for w in words if w.startswith("--")}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with AUTOPAR_REGEN_GOLDEN=1"
    assert text == path.read_text()


# --- golden files --------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_megatron_golden(case: Case) -> None:
    check_golden(f"megatron_{case.name}.sh", megatron(case, multiline=True) + "\n")


@pytest.mark.parametrize("case", TITAN_CASES, ids=lambda c: c.name)
def test_torchtitan_golden(case: Case) -> None:
    check_golden(f"torchtitan_{case.name}.sh", titan(case, multiline=True) + "\n")


def test_slurm_golden() -> None:
    case = CASES[0]
    script = emit.slurm_script(megatron(case), nnodes=8, nproc_per_node=8, job_name="llama3-70b",
                               partition="batch", time="04:00:00")
    check_golden("slurm_llama3_70b_64gpu.sbatch", script)


# --- flag sets pinned against the frameworks ---------------------------------------------


# Checked against NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553 (its real argparse parser).
FROZEN_MEGATRON = {
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
    "--expert-model-parallel-size", "--num-virtual-stages-per-pipeline-rank",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--sequence-parallel", "--micro-batch-size", "--global-batch-size",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "--ckpt-format",
    "--overlap-grad-reduce", "--overlap-param-gather",
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention",
    "--num-query-groups", "--kv-channels", "--seq-length", "--max-position-embeddings", "--swiglu", "--squared-relu",
    "--no-bias-gelu-fusion", "--untie-embeddings-and-output-weights", "--padded-vocab-size",
    "--bf16", "--fp16", "--fp8-format",
    "--mock-data", "--data-path", "--tokenizer-type", "--tokenizer-model", "--vocab-size", "--train-iters", "--lr",
}

# Checked against pytorch/torchtitan b5bcd76c66d0acb1a08b176d9639425bc55e0b2a
# (tests/unit_tests/test_no_new_cli_options.py and ConfigManager.parse_args).
FROZEN_TORCHTITAN = {
    "--module", "--config",
    "--parallelism.data_parallel_replicate_degree", "--parallelism.data_parallel_shard_degree",
    "--parallelism.fsdp_reshard_after_forward", "--parallelism.tensor_parallel_degree",
    "--parallelism.enable_sequence_parallel", "--parallelism.no_enable_sequence_parallel",
    "--parallelism.pipeline_parallel_degree", "--parallelism.pipeline_parallel_schedule",
    "--parallelism.pipeline_parallel_layers_per_stage", "--parallelism.pipeline_parallel_first_stage_less_layers",
    "--parallelism.pipeline_parallel_last_stage_less_layers", "--parallelism.num_pp_microbatches",
    "--parallelism.context_parallel_degree", "--parallelism.expert_parallel_degree",
    "--training.num_tokens_per_microbatch_per_dp_rank", "--training.num_tokens_per_train_step",
    "--training.max_context_length", "--training.mixed_precision_param", "--training.disable_cuda_graphs",
}


def test_flag_sets_are_frozen() -> None:
    assert set(emit.MEGATRON_FLAGS) == FROZEN_MEGATRON
    assert set(emit.TORCHTITAN_FLAGS) == FROZEN_TORCHTITAN


def _fp8_job() -> Job:
    job = Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192)
    object.__setattr__(job, "dtype", "fp8")  # Job does not accept fp8 yet; the mapping is ready for it
    return job


def test_megatron_emits_exactly_the_pinned_flags() -> None:
    emitted: set[str] = set()
    for case in CASES:
        emitted |= flags(launcher_words(megatron(case)))
    emitted |= flags(launcher_words(megatron(CASES[0], data_path="/d/x", tokenizer_model="/t")))
    emitted |= flags(" ".join(emit.megatron_parallel_items(spec(), Plan(dp=1, tp=8, pp=8, ep=8), CASES[0].job)).split())
    emitted |= flags(" ".join(emit.megatron_model_items(spec(), CASES[0].plan, _fp8_job())).split())
    torchrun = {"--nnodes", "--nproc-per-node", "--rdzv-backend", "--rdzv-endpoint"}
    assert emitted - torchrun == set(emit.MEGATRON_FLAGS)


def test_torchtitan_emits_exactly_the_pinned_flags() -> None:
    emitted: set[str] = {"--module", "--config"}
    for case in TITAN_CASES:
        emitted |= flags(launcher_words(titan(case)))
    emitted |= flags(" ".join(emit.torchtitan_items(spec(), Plan(dp=1, tp=8, pp=8, ep=8), CASES[0].job)).split())
    assert emitted - {"--nnodes", "--nproc-per-node", "--rdzv-backend", "--rdzv-endpoint"} == set(emit.TORCHTITAN_FLAGS)


# --- torchrun reads the launcher part -------------------------------------------------------


@pytest.mark.parametrize("multiline", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_torchrun_parses_megatron(case: Case, multiline: bool) -> None:
    run = pytest.importorskip("torch.distributed.run")
    args = run.get_args_parser().parse_args(launcher_words(megatron(case, multiline=multiline)))
    assert (args.nnodes, args.nproc_per_node) == (str(case.nnodes), str(case.nproc))
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == ("c10d", "$MASTER_ADDR:29500", "none")
    assert (args.training_script, args.module) == ("pretrain_gpt.py", False)
    assert args.training_script_args[:2] == ["--tensor-model-parallel-size", str(case.plan.tp)]


@pytest.mark.parametrize("case", TITAN_CASES, ids=lambda c: c.name)
def test_torchrun_parses_torchtitan(case: Case) -> None:
    run = pytest.importorskip("torch.distributed.run")
    cmd = titan(case, rdzv_endpoint="head-0:29400", rdzv_id="$SLURM_JOB_ID")
    args = run.get_args_parser().parse_args(launcher_words(cmd))
    assert (args.nnodes, args.nproc_per_node) == (str(case.nnodes), str(case.nproc))
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == ("c10d", "head-0:29400", "$SLURM_JOB_ID")
    assert (args.training_script, args.module) == ("torchtitan.train", True)
    assert args.training_script_args[:4] == ["--module", "llama3", "--config", "llama3_70b"]
    assert args.training_script_args[-1] == emit.TORCHTITAN_AC_SUBCOMMANDS[case.plan.recompute]


# --- semantics of the mapping ----------------------------------------------------------------


@pytest.mark.parametrize(("zero", "want", "absent"), [
    (0, ["--overlap-grad-reduce"], ["--use-distributed-optimizer", "--overlap-param-gather"]),
    (1, ["--use-distributed-optimizer", "--overlap-param-gather"], ["--use-megatron-fsdp"]),
    (2, ["--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads", "--ckpt-format fsdp_dtensor"], []),
    (3, ["--data-parallel-sharding-strategy optim_grads_params"], []),
])
def test_megatron_zero_stages(zero: int, want: list[str], absent: list[str]) -> None:
    items = emit.megatron_parallel_items(spec(), Plan(dp=8, tp=8, pp=1, zero=zero), CASES[0].job)
    assert all(w in items for w in want) and not any(a in items for a in absent)


@pytest.mark.parametrize(("zero", "pp", "replicate", "shard", "reshard"), [
    (0, 1, 8, 1, None), (1, 1, 1, 8, "never"), (2, 1, 1, 8, "never"), (3, 1, 1, 8, None), (3, 2, 1, 8, "always"),
])
def test_torchtitan_zero_stages(zero: int, pp: int, replicate: int, shard: int, reshard: str | None) -> None:
    items = emit.torchtitan_items(spec(), Plan(dp=8, tp=8, pp=pp, zero=zero), CASES[0].job)
    assert f"--parallelism.data_parallel_replicate_degree {replicate}" in items
    assert f"--parallelism.data_parallel_shard_degree {shard}" in items
    assert (f"--parallelism.fsdp_reshard_after_forward {reshard}" in items) == (reshard is not None)


def test_megatron_env() -> None:
    assert megatron(CASES[0]).startswith("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ")
    assert megatron(CASES[1]).startswith("CUDA_DEVICE_MAX_CONNECTIONS=8 torchrun ")  # Megatron-FSDP: must not be 1
    assert megatron(CASES[5]).startswith("torchrun ")  # tp = cp = 1


@pytest.mark.parametrize(("layers", "pp", "split"), [
    (80, 4, None), (126, 16, None), (10, 4, None), (7, 2, (4, 3)), (81, 8, (11, 10)), (9, 6, None), (9, 4, (3, 2)),
])
def test_uneven_pipeline_split(layers: int, pp: int, split: tuple[int, int] | None) -> None:
    assert emit.uneven_pipeline_split(layers, pp) == split


def stage_layers(layers: int, pp: int) -> list[int]:
    """Layers per stage as Megatron will build them from what emit chose."""
    split = emit.uneven_pipeline_split(layers, pp)
    if split is None:
        return [int(stage[2:]) for stage in emit.pipeline_layout(layers, pp)[1:-1].split("|")]
    middle = (layers - sum(split)) // (pp - 2) if pp > 2 else 0
    return [split[0], *[middle] * (pp - 2), split[1]]


def test_launched_pipeline_layout_is_the_estimated_one() -> None:
    from autopar.cost.pipeline import stage_layers as estimated

    for layers in range(2, 130):
        for pp in (p for p in range(2, layers + 1) if layers % p):
            stages = stage_layers(layers, pp)
            assert stages == [sum(chunks) for chunks in estimated(layers, pp)], (layers, pp, stages)


def test_pipeline_layout_example() -> None:
    assert emit.pipeline_layout(9, 6) == "Et*2|t*2|t*2|t*1|t*1|t*1L"
    assert "--pipeline-model-parallel-layout 'Et*2|t*2|t*2|t*1|t*1|t*1L'" in megatron(CASES[5])


# --- quoting: nothing a user types can break or extend the command -----------------------------

NASTY = ["/opt/my megatron/pretrain_gpt.py", "x; touch /tmp/pwned", "$(reboot)", "`id`", "a'b\"c", "line\nbreak"]


@pytest.mark.parametrize("value", NASTY)
def test_values_stay_single_words(value: str) -> None:
    cmd = megatron(CASES[0], script=value, data_path=value, tokenizer_model=value, extra_args=["--x", value],
                   rdzv_endpoint=value, rdzv_id=value)
    words = launcher_words(cmd)
    assert words.count(value) == 6
    assert words[-2:] == ["--x", value]


def test_env_reference_expands_but_nothing_else_does() -> None:
    assert emit.quote("$MASTER_ADDR:29500") == '"$MASTER_ADDR:29500"'
    assert emit.quote("${HEAD}") == '"${HEAD}"'
    for value in ("$(whoami):1", "$A;b", "$A $B", "$A:1:2"):
        assert emit.quote(value) == shlex.quote(value)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_real_shell_sees_the_intended_argv() -> None:
    cmd = megatron(CASES[0], script=NASTY[1], data_path=NASTY[2], extra_args=[NASTY[3]])
    probe = cmd.replace("torchrun", "printf '%s\\0'", 1)  # print argv instead of launching
    out = subprocess.run(["bash", "-c", probe], capture_output=True, check=True, text=True,
                         env={"MASTER_ADDR": "10.0.0.1", "PATH": os.environ["PATH"]}).stdout
    argv = out.split("\0")[:-1]
    assert "10.0.0.1:29500" in argv and NASTY[1] in argv and NASTY[2] in argv and argv[-1] == NASTY[3]


def test_slurm_runs_the_same_command_on_every_node() -> None:
    cmd = megatron(CASES[0], script=NASTY[1])
    script = emit.slurm_script(cmd, nnodes=8, nproc_per_node=8, job_name="j")
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert shlex.split(srun) == ["srun", "--nodes=8", "--ntasks-per-node=1", "bash", "-c", cmd]
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in script
    if shutil.which("bash"):
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)


@pytest.mark.parametrize(("field", "value"), [
    ("job_name", "x; rm -rf ~"), ("job_name", "a\n#SBATCH --nodes=99"), ("partition", "gpu batch"), ("time", "$(id)"),
])
def test_slurm_refuses_unsafe_directive_values(field: str, value: str) -> None:
    kw = {"job_name": "ok", field: value}
    with pytest.raises(SpecError, match="SLURM"):
        emit.slurm_script("true", nnodes=1, nproc_per_node=8, **kw)


# --- plans a framework cannot run -------------------------------------------------------------


def test_errors_are_one_line_spec_errors() -> None:
    case = CASES[0]
    bad = [
        lambda: emit.megatron_command(case.model, case.plan, case.job, nnodes=4, nproc_per_node=8),
        lambda: emit.megatron_command(case.model, Plan(dp=1, tp=8, pp=8, ep=2), case.job, nnodes=8, nproc_per_node=8),
        lambda: titan(CASES[6]),  # fp16: torchtitan's CLI has bf16 mixed precision only
        lambda: emit.torchtitan_command(spec(), Plan(dp=4, tp=4, pp=1), Job(gpus=16, gpus_per_node=8, global_batch=16,
                                        seq_len=1002), config="c", nnodes=2, nproc_per_node=8),
        lambda: emit.slurm_script("true", nnodes=0, nproc_per_node=8, job_name="j"),
    ]
    for call in bad:
        with pytest.raises(SpecError) as err:
            call()
        assert "\n" not in str(err.value)


def test_interleaving_over_uneven_chunks_is_an_explicit_layout() -> None:
    from autopar.emit.targets import megatron_pipeline_items

    assert megatron_pipeline_items(80, 4, 5) == ["--num-virtual-stages-per-pipeline-rank 5"]
    # Llama 3.1 405B: 126 layers in 16 x 2 chunks -> 30 chunks of 4 and 2 of 3, in model order
    (item,) = megatron_pipeline_items(126, 16, 2)
    flag, layout = shlex.split(item)  # quoted: | and * are shell metacharacters
    assert flag == "--pipeline-model-parallel-layout"
    assert layout == "E" + "|".join(["t*4"] * 30 + ["t*3"] * 2) + "L"
