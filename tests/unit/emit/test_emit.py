"""Tests for autopar.emit: launch commands for Megatron-LM, torchtitan and SLURM.

What the frameworks make of the words is checked by their own code in test_framework_megatron.py
and test_framework_torchtitan.py; here: the launcher part, quoting, the pipeline split shared
with the estimate, the mapping of ZeRO stages, overlaps and CP, and the refusals.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass

import pytest

from autopar.emit import megatron as mg
from autopar.emit import torchtitan as tt
from autopar.emit.common import quote
from autopar.emit.slurm import SlurmOptions, slurm_script
from autopar.errors import SpecError
from autopar.spec.families import MoESpec
from autopar.spec.job import Job
from autopar.spec.layout import chunk_sizes
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan


def spec(**overrides: object) -> ModelSpec:
    """A Llama-3-70B-shaped spec (arXiv 2407.21783, table 3), fields overridable."""
    fields: dict = dict(
        name="llama3-70b",
        layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        ffn_hidden_size=28672,
        ffn_activation="swiglu",
        vocab_size=128256,
        seq_len=8192,
        max_seq_len=8192,
        tie_embeddings=False,
    )
    fields.update(overrides)
    return ModelSpec(**fields)


GPT2 = spec(
    name="gpt2-medium",
    layers=24,
    hidden_size=1024,
    num_attention_heads=16,
    num_kv_heads=16,
    head_dim=64,
    ffn_hidden_size=4096,
    ffn_activation="gelu",
    vocab_size=50257,
    seq_len=1024,
    max_seq_len=1024,
    tie_embeddings=True,
)


@dataclass(frozen=True)
class Case:
    name: str
    model: ModelSpec
    plan: Plan
    job: Job
    nnodes: int
    nproc: int


CASES = [
    Case(
        "llama3_70b_64gpu",
        spec(),
        Plan(dp=2, tp=8, pp=4, vpp=5, recompute="selective", zero=1),
        Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192),
        8,
        8,
    ),
    Case(
        "llama3_70b_fsdp_full",
        spec(),
        Plan(dp=8, tp=8, pp=1, recompute="full", zero=3),
        Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192),
        8,
        8,
    ),
    Case(
        "llama3_70b_cp_ddp",
        spec(),
        Plan(dp=4, tp=4, pp=2, cp=2, cp_comm="allgather", mbs=2, zero=0, sp=False),
        Job(gpus=64, gpus_per_node=8, global_batch=256, seq_len=16384),
        8,
        8,
    ),
    Case("llama3_70b_zero2", spec(), Plan(dp=4, tp=8, pp=2, zero=2), Job(gpus=64, gpus_per_node=8, global_batch=256, seq_len=8192), 8, 8),
    Case(
        "uneven_first_last",
        spec(name="llama3-405b-like", layers=126),
        Plan(dp=1, tp=8, pp=16, recompute="full"),
        Job(gpus=128, gpus_per_node=8, global_batch=64, seq_len=8192),
        16,
        8,
    ),
    Case(
        "uneven_layout",
        spec(name="tiny", layers=9, hidden_size=1024, num_attention_heads=8, num_kv_heads=8, ffn_hidden_size=4096),
        Plan(dp=1, tp=1, pp=6),
        Job(gpus=6, gpus_per_node=8, global_batch=12, seq_len=2048),
        1,
        6,
    ),
    Case(
        "gpt2_fp16", GPT2, Plan(dp=4, tp=2, pp=1, zero=0), Job(gpus=8, gpus_per_node=8, global_batch=64, seq_len=1024, dtype="fp16"), 1, 8
    ),
    Case(
        "relu2_head_dim",
        spec(name="wide-heads", layers=28, hidden_size=3072, num_attention_heads=32, num_kv_heads=8, head_dim=128, ffn_activation="relu2"),
        Plan(dp=4, tp=4, pp=1),
        Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096),
        2,
        8,
    ),
]
TITAN_CASES = [c for c in CASES if c.job.dtype == "bf16"]


def megatron(case: Case, **kw: object) -> str:
    return mg.megatron_command(case.model, case.plan, case.job, nnodes=case.nnodes, nproc_per_node=case.nproc, **kw)


def titan(case: Case, **kw: object) -> str:
    return tt.torchtitan_command(case.model, case.plan, case.job, config="llama3_70b", nnodes=case.nnodes, nproc_per_node=case.nproc, **kw)


def launcher_words(cmd: str) -> list[str]:
    """The words after ``torchrun``, dropping leading NAME=value environment assignments."""
    words = shlex.split(cmd.replace("\\\n", ""))
    while "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)
    assert words[0] == "torchrun"
    return words[1:]


def flags(words: list[str]) -> set[str]:
    return {w for w in words if w.startswith("--")}


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
    assert args.training_script_args[-1] == tt.AC_SUBCOMMANDS[case.plan.recompute]


# --- semantics of the mapping ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("zero", "want", "absent"),
    [
        (0, ["--overlap-grad-reduce"], ["--use-distributed-optimizer", "--overlap-param-gather"]),
        (1, ["--use-distributed-optimizer", "--overlap-param-gather"], ["--use-megatron-fsdp"]),
        (2, ["--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads", "--ckpt-format fsdp_dtensor"], []),
        (3, ["--data-parallel-sharding-strategy optim_grads_params"], []),
    ],
)
def test_megatron_zero_stages(zero: int, want: list[str], absent: list[str]) -> None:
    items = mg.parallel_items(spec(), Plan(dp=8, tp=8, pp=1, zero=zero), CASES[0].job)
    assert all(w in items for w in want) and not any(a in items for a in absent)


@pytest.mark.parametrize(
    ("zero", "pp", "replicate", "shard", "reshard"),
    [
        (0, 1, 8, 1, None),
        (1, 1, 1, 8, "never"),
        (2, 1, 1, 8, "never"),
        (3, 1, 1, 8, "always"),
        (3, 2, 1, 8, "always"),
    ],
)
def test_torchtitan_zero_stages(zero: int, pp: int, replicate: int, shard: int, reshard: str | None) -> None:
    items = tt.torchtitan_items(spec(), Plan(dp=8, tp=8, pp=pp, zero=zero), CASES[0].job)
    assert f"--parallelism.data_parallel_replicate_degree {replicate}" in items
    assert f"--parallelism.data_parallel_shard_degree {shard}" in items
    assert (f"--parallelism.fsdp_reshard_after_forward {reshard}" in items) == (reshard is not None)


def test_megatron_env() -> None:
    assert megatron(CASES[0]).startswith("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ")
    assert megatron(CASES[1]).startswith("CUDA_DEVICE_MAX_CONNECTIONS=32 torchrun ")  # Megatron-FSDP: must not be 1
    assert megatron(CASES[5]).startswith("torchrun ")  # tp = cp = 1


@pytest.mark.parametrize(
    ("layers", "pp", "vpp", "counts", "megatron"),
    [
        (32, 3, 1, [11, 11, 10], None),
        (9, 6, 1, [2, 2, 2, 1, 1, 1], None),
        (126, 16, 1, [8] * 14 + [7] * 2, [7] + [8] * 14 + [7]),
        (126, 16, 2, [4] * 30 + [3] * 2, [3] + [4] * 30 + [3]),
        (61, 8, 1, [8] * 5 + [7] * 3, None),
    ],
)
def test_stage_layout_is_the_estimates(layers: int, pp: int, vpp: int, counts: list[int], megatron: list[int] | None) -> None:
    """Hand-derived: floor(layers / chunks) each, the remainder one each to the first chunks (cost.pipeline);
    on Megatron, where L + 2 splits evenly (128 = 16 x 8 = 32 x 4), the embedding and the loss take a slot of
    the first and last chunk instead (--account-for-*-in-pipeline-split)."""
    assert mg.stage_layout(layers, pp, vpp) == (megatron or counts) == chunk_sizes(layers, pp * vpp, ends=True)
    assert tt.stage_counts(spec(layers=layers), Plan(dp=1, tp=1, pp=pp, vpp=vpp)) == counts == chunk_sizes(layers, pp * vpp)


def unroll(layout: str) -> str:
    """A layout's (X)*k runs written out, as Megatron's parse_str_to_list does before reading the chunks."""
    return re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), layout)


def test_pipeline_flags() -> None:
    assert mg.pipeline_items(spec(), Plan(dp=2, tp=8, pp=4, vpp=5)) == ["--num-virtual-stages-per-pipeline-rank 5"]
    assert mg.pipeline_items(spec(), Plan(dp=2, tp=8, pp=4)) == []
    (item,) = mg.pipeline_items(spec(layers=125), Plan(dp=1, tp=8, pp=16, vpp=2))
    flag, layout = shlex.split(item)  # quoted: | and * are shell metacharacters
    assert flag == "--pipeline-model-parallel-layout"
    assert layout == "E(t*4|)*29(t*3|)*2t*3L"  # 125 = 29 x 4 + 3 x 3; past 60 characters runs repeat
    assert unroll(layout) == "E" + "|".join(["t*4"] * 29 + ["t*3"] * 3) + "L"
    # 126 + 2 = 32 x 4: Megatron's own split of the layers, the embedding and the loss
    assert mg.pipeline_items(spec(layers=126), Plan(dp=1, tp=8, pp=16, vpp=2)) == [
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split",
        "--num-virtual-stages-per-pipeline-rank 2",
    ]
    assert "--pipeline-model-parallel-layout 'Et*2|t*2|t*2|t*1|t*1|t*1L'" in megatron(CASES[5])


@pytest.mark.parametrize(
    ("counts", "ends"),
    [
        ([4, 4, 4], (None, None)),
        ([5, 4, 4], (5, None)),
        ([5, 5, 4], (None, 4)),
        ([5, 4], (5, None)),
        ([6, 6, 5, 5], None),
        ([3, 2, 2, 2], (3, None)),
    ],
)
def test_first_last(counts: list[int], ends: tuple[int | None, int | None] | None) -> None:
    assert mg.first_last(counts) == ends


@pytest.mark.parametrize(("layers", "chunks", "per_stage"), [(80, 20, 4), (126, 32, 4), (61, 6, 11), (10, 4, 3), (5, 4, None)])
def test_torchtitan_layers_per_stage(layers: int, chunks: int, per_stage: int | None) -> None:
    """torchtitan makes ceil(layers / n) stages: 126 / 4 -> 32; no n makes 4 stages of 5 layers (5, 3, 2, 2, 1...)."""
    assert tt.layers_per_stage(layers, chunks) == per_stage


def test_cp_comm_and_overlaps_follow_the_plan() -> None:
    job = Job(gpus=64, gpus_per_node=8, global_batch=64, seq_len=32768)
    ring = mg.parallel_items(spec(), Plan(dp=4, tp=8, pp=1, cp=2), job)
    gather = mg.parallel_items(spec(), Plan(dp=4, tp=8, pp=1, cp=2, cp_comm="allgather"), job)
    assert "--cp-comm-type p2p" in ring and "--cp-comm-type all_gather" in gather
    assert "--tp-comm-overlap" in ring and "--sequence-parallel" in ring  # TP overlap under SP, as costed
    no_sp = mg.parallel_items(spec(), Plan(dp=4, tp=8, pp=1, cp=2, sp=False), job)
    assert "--tp-comm-overlap" not in no_sp


MOE = spec(
    name="moe",
    layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    ffn_hidden_size=14336,
    moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=14336),
)


def test_moe_all_to_all_overlap_where_megatron_has_it() -> None:
    """TransformerConfig at the pin: EP A2A overlap needs EP > 1, and vpp when pp > 1, and no full recompute."""
    job = Job(gpus=32, gpus_per_node=8, global_batch=64, seq_len=4096)
    inter = Plan(dp=8, tp=2, pp=2, vpp=2, ep=8)
    assert "--overlap-moe-expert-parallel-comm" in mg.parallel_items(MOE, inter, job)
    plain = Plan(dp=8, tp=2, pp=2, ep=8)
    assert "--overlap-moe-expert-parallel-comm" not in mg.parallel_items(MOE, plain, job)
    assert "may run slower than estimated" in mg.notes(MOE, plain)[0]
    assert mg.notes(MOE, inter) == []
    assert "--expert-tensor-parallel-size 1" in mg.parallel_items(MOE, plain, job)  # Megatron's default is tp


def test_overlaps_follow_the_stack() -> None:
    """The megatron stack does not assume the MoE all-to-all hidden (its recipe leaves the overlap off), so
    the launch does not turn it on and no note says it runs slower; the neutral stack assumes it hidden."""
    from autopar.io.stacks import load_stack
    from autopar.spec.stack import NEUTRAL

    job = Job(gpus=32, gpus_per_node=8, global_batch=64, seq_len=4096)
    inter, plain = Plan(dp=8, tp=2, pp=2, vpp=2, ep=8), Plan(dp=8, tp=2, pp=2, ep=8)
    megatron_stack = load_stack("megatron")
    assert not megatron_stack.ep_overlap and megatron_stack.tp_overlap > 0
    assert "--overlap-moe-expert-parallel-comm" not in mg.parallel_items(MOE, inter, job, stack=megatron_stack)
    assert "--overlap-moe-expert-parallel-comm" in mg.parallel_items(MOE, inter, job, stack=NEUTRAL)
    assert mg.notes(MOE, plain, stack=megatron_stack) == []
    assert "may run slower than estimated" in mg.notes(MOE, plain, stack=NEUTRAL)[0]
    assert "--tp-comm-overlap" in mg.parallel_items(MOE, plain, job, stack=megatron_stack)


def test_hybrid_cp_words_where_the_pin_has_them() -> None:
    """validate_args at the pin: hybrid CP needs per-token loss and the single loader, and no PP or Megatron-FSDP."""
    assert mg.megatron_hybrid_cp_args(Plan(dp=4, tp=2, pp=1, cp=2), 16384) == [
        "--hybrid-context-parallel",
        "--max-seqlen-per-dp-cp-rank",
        "16384",
        "--calculate-per-token-loss",
        "--dataloader-type",
        "single",
    ]
    with pytest.raises(SpecError, match="pipeline parallelism"):
        mg.megatron_hybrid_cp_args(Plan(dp=2, tp=2, pp=2, cp=2), 16384)
    with pytest.raises(SpecError, match="Megatron-FSDP"):
        mg.megatron_hybrid_cp_args(Plan(dp=4, tp=2, pp=1, cp=2, zero=3), 16384)


def test_launched_pipeline_layout_is_the_estimated_one() -> None:
    """Every uneven split up to 130 layers: Megatron's stages from our flags equal cost.pipeline's stages."""
    from autopar.spec.layout import stage_layers as estimated

    for layers in range(2, 131):
        for pp in (p for p in range(2, min(layers, 16) + 1) if layers % p):
            items = mg.pipeline_items(spec(layers=layers), Plan(dp=1, tp=1, pp=pp))
            if items == ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]:
                n = (layers + 2) // pp  # get_num_layers_to_build: L + 2 split evenly, one fewer at each end
                stages = [n - 1] + [n] * (pp - 2) + [n - 1]
            else:
                (item,) = items
                stages = [int(part.strip("EL").split("*")[1]) for part in unroll(shlex.split(item)[1]).split("|")]
            assert stages == [sum(chunks) for chunks in estimated(layers, pp, ends=True)], (layers, pp, stages)


def test_architecture_flags_follow_the_spec() -> None:
    job = CASES[0].job
    plan = Plan(dp=8, tp=8, pp=1)
    llama = mg.model_items(spec(rope_base=500000.0), plan, job)
    assert {
        "--normalization RMSNorm",
        "--position-embedding-type rope",
        "--rotary-base 500000",
        "--disable-bias-linear",
        "--hidden-dropout 0",
        "--attention-dropout 0",
        "--swiglu",
        "--group-query-attention",
    } <= set(llama)
    gpt3 = mg.model_items(
        spec(norm="layernorm", position_embedding="learned", linear_bias=True, dropout=True, ffn_activation="gelu", num_kv_heads=64),
        plan,
        job,
    )
    assert "--position-embedding-type learned_absolute" in gpt3 and "--normalization LayerNorm" in gpt3
    assert not {"--disable-bias-linear", "--hidden-dropout 0", "--swiglu", "--group-query-attention"} & set(gpt3)
    assert "--apply-layernorm-1p" in mg.model_items(spec(norm="layernorm1p"), plan, job)
    assert "--qk-layernorm" in mg.model_items(spec(qk_norm=True), plan, job)
    fp8 = mg.model_items(spec(), plan, Job(gpus=64, gpus_per_node=8, global_batch=512, seq_len=8192, dtype="fp8"))
    assert fp8[-3:] == ["--bf16", "--fp8-format hybrid", "--fp8-recipe tensorwise"]


def test_hybrid_goes_to_the_mamba_entry_point() -> None:
    from autopar.io.models import load_model

    model = load_model("nemotron-h-8b")
    job = Job(gpus=8, gpus_per_node=8, global_batch=16, seq_len=8192)
    words = launcher_words(mg.megatron_command(model, Plan(dp=4, tp=2, pp=1), job, nnodes=1, nproc_per_node=8))
    assert words[words.index("--rdzv-endpoint") + 2] == "pretrain_mamba.py"
    assert words[words.index("--hybrid-override-pattern") + 1] == model.mamba.layer_pattern
    assert words[words.index("--spec") + 1 : words.index("--spec") + 3] == list(mg.MAMBA_SPEC)
    assert words[words.index("--position-embedding-type") + 1] == "none"
    assert mg.unsupported(model, Plan(dp=1, tp=2, pp=2, vpp=2)) is not None  # no interleaving for hybrids at the pin


# --- quoting: nothing a user types can break or extend the command -----------------------------

NASTY = ["/opt/my megatron/pretrain_gpt.py", "x; touch /tmp/pwned", "$(reboot)", "`id`", "a'b\"c", "line\nbreak"]


@pytest.mark.parametrize("value", NASTY)
def test_values_stay_single_words(value: str) -> None:
    cmd = megatron(
        CASES[0], script=value, data_path=value, tokenizer_model=value, extra_args=["--x", value], rdzv_endpoint=value, rdzv_id=value
    )
    words = launcher_words(cmd)
    assert words.count(value) == 6
    assert words[-2:] == ["--x", value]


def test_extra_values_stay_on_their_options_line() -> None:
    """--emit-extra '--log-interval 1 --save /ckpt --no-load-optim': a multi-line command breaks before each
    option, as for its own options, and the words are the same as on one line."""
    extra = ["--log-interval", "1", "--save", "/ck pt", "--no-load-optim"]
    for build in (megatron, titan):
        lines = build(CASES[0], extra_args=extra, multiline=True).split("\n")
        assert "    --log-interval 1 \\" in lines and "    --save '/ck pt' \\" in lines
        assert any(line.startswith("    --no-load-optim") for line in lines)
        assert launcher_words(build(CASES[0], extra_args=extra, multiline=True)) == launcher_words(build(CASES[0], extra_args=extra))


def test_env_reference_expands_but_nothing_else_does() -> None:
    assert quote("$MASTER_ADDR:29500") == '"$MASTER_ADDR:29500"'
    assert quote("${HEAD}") == '"${HEAD}"'
    for value in ("$(whoami):1", "$A;b", "$A $B", "$A:1:2"):
        assert quote(value) == shlex.quote(value)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_real_shell_sees_the_intended_argv() -> None:
    cmd = megatron(CASES[0], script=NASTY[1], data_path=NASTY[2], extra_args=[NASTY[3]])
    probe = cmd.replace("torchrun", "printf '%s\\0'", 1)  # print argv instead of launching
    out = subprocess.run(
        ["bash", "-c", probe], capture_output=True, check=True, text=True, env={"MASTER_ADDR": "10.0.0.1", "PATH": os.environ["PATH"]}
    ).stdout
    argv = out.split("\0")[:-1]
    assert "10.0.0.1:29500" in argv and NASTY[1] in argv and NASTY[2] in argv and argv[-1] == NASTY[3]


def test_slurm_runs_the_same_command_on_every_node() -> None:
    cmd = megatron(CASES[0], script=NASTY[1])
    script = slurm_script(
        cmd, nnodes=8, nproc_per_node=8, job_name="j", options=SlurmOptions(partition="gpu", time="04:00:00", account="proj-1", qos="high")
    )
    assert "#SBATCH --partition=gpu\n#SBATCH --time=04:00:00\n#SBATCH --account=proj-1\n#SBATCH --qos=high\n" in script
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert shlex.split(srun) == ["srun", "--nodes=8", "--ntasks-per-node=1", "--cpus-per-task=64", "bash", "-c", cmd]
    assert "#SBATCH --gpus-per-node=8\n#SBATCH --cpus-per-task=64\n" in script  # 8 CPUs per GPU
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in script
    if shutil.which("bash"):
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("job_name", "x; rm -rf ~"),
        ("job_name", "a\n#SBATCH --nodes=99"),
        ("partition", "gpu batch"),
        ("time", "$(id)"),
        ("qos", "a\nb"),
        ("account", "x y"),
    ],
)
def test_slurm_refuses_unsafe_directive_values(field: str, value: str) -> None:
    job_name = value if field == "job_name" else "ok"
    options = SlurmOptions() if field == "job_name" else SlurmOptions(**{field: value})
    with pytest.raises(SpecError, match="may hold only"):
        slurm_script("true", nnodes=1, nproc_per_node=8, job_name=job_name, options=options)


# --- plans a framework cannot run -------------------------------------------------------------


def test_errors_are_one_line_spec_errors() -> None:
    case = CASES[0]
    bad = [
        lambda: mg.megatron_command(case.model, case.plan, case.job, nnodes=4, nproc_per_node=8),
        lambda: mg.megatron_command(case.model, Plan(dp=1, tp=8, pp=8, ep=2), case.job, nnodes=8, nproc_per_node=8),
        lambda: titan(CASES[6]),  # fp16: torchtitan's CLI has bf16 mixed precision only
        lambda: tt.torchtitan_command(
            spec(),
            Plan(dp=4, tp=4, pp=1),
            Job(gpus=16, gpus_per_node=8, global_batch=16, seq_len=1002),
            config="c",
            nnodes=2,
            nproc_per_node=8,
        ),
        lambda: tt.torchtitan_command(spec(name="unknown"), Plan(dp=8, tp=8, pp=1), case.job, nnodes=8, nproc_per_node=8),
        lambda: slurm_script("true", nnodes=0, nproc_per_node=8, job_name="j"),
    ]
    for call in bad:
        with pytest.raises(SpecError) as err:
            call()
        assert "\n" not in str(err.value)


def test_slurm_cpus_per_task_follows_the_gpus_or_the_option() -> None:
    four = slurm_script("true", nnodes=2, nproc_per_node=4, job_name="j")
    assert "#SBATCH --cpus-per-task=32\n" in four and "srun --nodes=2 --ntasks-per-node=1 --cpus-per-task=32 " in four
    given = slurm_script("true", nnodes=1, nproc_per_node=8, job_name="j", options=SlurmOptions(cpus_per_task=96))
    assert "#SBATCH --cpus-per-task=96\n" in given and "--cpus-per-task=96 bash" in given
