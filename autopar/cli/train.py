"""`autopar suggest` and `autopar estimate`: parse, call one training use case, render. No maths here."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from autopar.cli import varlen
from autopar.cli.options import (
    AccountOpt,
    BatchOpt,
    CpusOpt,
    DistOpt,
    DtypeOpt,
    EmitOpt,
    EmitOutOpt,
    ExtraOpt,
    GpusAutoOpt,
    GpusOpt,
    HardwareOpt,
    HeadroomOpt,
    JsonOpt,
    Model,
    NodesOpt,
    PartitionOpt,
    QosOpt,
    RecipeOpt,
    SaveDirOpt,
    SeqOpt,
    StackOpt,
    StackOptOpt,
    StrategyOpt,
    TimeOpt,
    TitanOpt,
    path_option,
)
from autopar.cli.run import console
from autopar.completions import complete_recompute
from autopar.errors import InfeasibleError, SpecError
from autopar.spec.job import DEFAULT_HEADROOM

if TYPE_CHECKING:
    from autopar.advise.launch import LaunchRequest, SlurmOptions
    from autopar.advise.train import Context, Explained


def _job(
    model: str,
    *,
    hardware: str | None,
    stack: str | None,
    stack_opt: list[str] | None,
    recipe: str | None,
    gpus: int | None,
    nodes: int | None,
    global_batch: int | None,
    seq_len: int | None,
    dtype: str,
    seq_len_dist: str | None,
    headroom: str,
    emit: str | None,
    emit_out: Path | None,
    torchtitan_config: str | None,
    emit_extra: str | None,
    slurm: SlurmOptions,
) -> tuple[LaunchRequest | None, Context]:
    """The options suggest and estimate share: the --emit request (checked before any work), then the job."""
    from autopar.advise import launch
    from autopar.advise import train as advise

    want = launch.request(emit, out=emit_out, torchtitan_config=torchtitan_config, extra=emit_extra, slurm=slurm)
    ctx = advise.context(
        model,
        hardware=hardware,
        gpus=gpus,
        nodes=nodes,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        seq_len_dist=seq_len_dist,
        stack=launch.stack_for(emit, stack),
        headroom=headroom,
        stack_options=stack_opt or [],
        recipe=recipe,
    )
    return want, ctx


def suggest(
    model: Model,
    hardware: HardwareOpt = None,
    stack: StackOpt = None,
    stack_opt: StackOptOpt = None,
    recipe: RecipeOpt = None,
    gpus: GpusAutoOpt = None,
    nodes: NodesOpt = None,
    global_batch: BatchOpt = None,
    seq_len: SeqOpt = None,
    dtype: DtypeOpt = "bf16",
    top: Annotated[int, typer.Option(help="Plans to show.", min=1)] = 10,
    json_out: JsonOpt = False,
    emit: EmitOpt = None,
    emit_out: EmitOutOpt = None,
    torchtitan_config: TitanOpt = None,
    emit_extra: ExtraOpt = None,
    slurm_partition: PartitionOpt = None,
    slurm_time: TimeOpt = None,
    slurm_account: AccountOpt = None,
    slurm_qos: QosOpt = None,
    slurm_cpus_per_task: CpusOpt = None,
    plot: Annotated[Path | None, path_option("Chart the plans timed and the Pareto front (.svg or .html).")] = None,
    seq_len_dist: DistOpt = None,
    varlen_strategy: StrategyOpt = None,
    headroom: HeadroomOpt = DEFAULT_HEADROOM,
    save_dir: SaveDirOpt = None,
) -> None:
    """Search every parallel plan for a job and rank them by tokens/s."""
    from autopar.advise import questions
    from autopar.advise.launch import SlurmOptions

    strategy = varlen.checked_strategy(varlen_strategy, seq_len_dist)
    count, auto = questions.parse_gpus(gpus)
    if auto:
        _gpus_auto(
            model,
            hardware=hardware,
            stack=stack,
            nodes=nodes,
            global_batch=global_batch,
            seq_len=seq_len,
            dtype=dtype,
            json_out=json_out,
            headroom=headroom,
            stack_options=stack_opt or [],
            recipe=recipe,
            refused=[
                name
                for name, given in (("--emit", emit), ("--plot", plot), ("--seq-len-dist", seq_len_dist), ("--save-dir", save_dir))
                if given is not None
            ],
        )
        return
    want, ctx = _job(
        model,
        hardware=hardware,
        stack=stack,
        stack_opt=stack_opt,
        recipe=recipe,
        gpus=count,
        nodes=nodes,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        seq_len_dist=seq_len_dist,
        headroom=headroom,
        emit=emit,
        emit_out=emit_out,
        torchtitan_config=torchtitan_config,
        emit_extra=emit_extra,
        slurm=SlurmOptions(
            partition=slurm_partition, time=slurm_time, account=slurm_account, qos=slurm_qos, cpus_per_task=slurm_cpus_per_task
        ),
    )
    if seq_len_dist is not None:
        _varlen_suggest(
            ctx, want, seq_len_dist, strategy=strategy, sequences=global_batch, top=top, json_out=json_out, plot=plot, save_dir=save_dir
        )
    else:
        _fixed(ctx, want, top=top, json_out=json_out, plot=plot, save_dir=save_dir)


def _varlen_suggest(
    ctx: Context,
    want: LaunchRequest | None,
    seq_len_dist: str,
    *,
    strategy: str,
    sequences: int | None,
    top: int,
    json_out: bool,
    plot: Path | None,
    save_dir: Path | None,
) -> None:
    """suggest --seq-len-dist: the plans ranked under the distribution (no chart, no saved folder)."""
    if plot is not None:
        raise SpecError("--plot charts fixed-length plans; it cannot be combined with --seq-len-dist")
    if save_dir is not None:
        raise SpecError("--save-dir saves fixed-length plans; it cannot be combined with --seq-len-dist")
    varlen.answer(
        ctx,
        want,
        seq_len_dist=seq_len_dist,
        strategy=strategy,
        json_out=json_out,
        find=lambda dist: varlen.ranked(ctx, dist, sequences=sequences, strategy=strategy, top=top),
    )


def _fixed(ctx: Context, want: LaunchRequest | None, *, top: int, json_out: bool, plot: Path | None, save_dir: Path | None) -> None:
    """suggest at one fixed sequence length: search, launch, chart, save, print."""
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.render import report
    from autopar.render.progress import progress_after

    with progress_after("searching plans", enabled=not json_out) as tick:
        result = advise.suggest(ctx, progress=tick)
    launched = launch.prepare(want, result.ctx, result.plan_order)
    plotted = None
    if plot is not None:
        from autopar.io.files import write_atomic
        from autopar.render.plot import plot_file

        text, plotted = plot_file(plot, result)
        write_atomic(plot, text, option="--plot")
    saved = None
    if save_dir is not None:
        from autopar.io.savedir import save_files
        from autopar.render.export import suggestion_files

        saved = save_files(save_dir, suggestion_files(result, top, launch=launched), executable=frozenset({"launch.sh"}))
    if json_out:
        print(report.suggestion_json(result, top, launch=launched, plot=plotted, saved=saved))
    else:
        report.render_suggestion(console(), result, top, launch=launched, plot=plotted, saved=saved)


def _gpus_auto(
    model: str,
    *,
    hardware: str | None,
    stack: str | None,
    nodes: int | None,
    global_batch: int | None,
    seq_len: int | None,
    dtype: str,
    json_out: bool,
    headroom: str,
    stack_options: list[str],
    recipe: str | None,
    refused: list[str],
) -> None:
    """suggest --gpus auto: the fewest GPUs that fit and the throughput curve (errors raise AutoparError)."""
    from autopar.advise import questions
    from autopar.advise import train as advise
    from autopar.render.progress import progress_after
    from autopar.render.scaling import render_scaling, scaling_json

    if refused or nodes is not None:
        raise SpecError(f"--gpus auto chooses the GPU count; it cannot be combined with {', '.join(refused or ['--nodes'])}")
    ctx = advise.context(
        model,
        hardware=hardware,
        gpus=None,
        nodes=1,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        stack=stack,
        headroom=headroom,
        stack_options=stack_options,
        recipe=recipe,
    )
    with progress_after("GPU counts", enabled=not json_out) as tick:
        result = questions.scaling(ctx, batch_given=global_batch is not None, progress=tick)
    if json_out:
        print(scaling_json(result))
    else:
        render_scaling(console(), result)


def estimate(
    model: Model,
    hardware: HardwareOpt = None,
    stack: StackOpt = None,
    stack_opt: StackOptOpt = None,
    recipe: RecipeOpt = None,
    gpus: GpusOpt = None,
    nodes: NodesOpt = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages.")] = 1,
    vpp: Annotated[int, typer.Option(help="Virtual stages per pipeline rank (interleaved 1F1B).")] = 1,
    cp: Annotated[int, typer.Option(help="Context-parallel degree.")] = 1,
    ep: Annotated[int, typer.Option(help="Expert-parallel degree (MoE only).")] = 1,
    etp: Annotated[int, typer.Option(help="Expert tensor-parallel degree: 1 or tp (MoE only).")] = 1,
    cp_comm: Annotated[
        str | None, typer.Option(help="CP K/V exchange: ring | allgather (default: the stack's first; megatron ring).")
    ] = None,
    mbs: Annotated[int, typer.Option(help="Micro-batch size, sequences.")] = 1,
    recompute: Annotated[str, typer.Option(help="none | selective | full", autocompletion=complete_recompute)] = "none",
    recompute_modules: Annotated[
        str | None,
        typer.Option(
            help="With --recompute selective: Megatron's modules to recompute, comma-separated (core_attn, moe_act, "
            "layernorm, mla_up_proj, mlp, moe, shared_experts)."
        ),
    ] = None,
    zero: Annotated[
        int | None, typer.Option(help="0 | 1 | 2 | 3 (1 = distributed optimizer; default: 1 where the stack has it, else 3).")
    ] = None,
    sp: Annotated[bool, typer.Option("--sp/--no-sp", help="Sequence parallelism with TP.")] = True,
    global_batch: BatchOpt = None,
    seq_len: SeqOpt = None,
    dtype: DtypeOpt = "bf16",
    json_out: JsonOpt = False,
    explain: Annotated[
        bool, typer.Option("--explain/--no-explain", help="Draw the pipeline schedule, the step-time bar and the memory bar.")
    ] = True,
    emit: EmitOpt = None,
    emit_out: EmitOutOpt = None,
    torchtitan_config: TitanOpt = None,
    emit_extra: ExtraOpt = None,
    slurm_partition: PartitionOpt = None,
    slurm_time: TimeOpt = None,
    slurm_account: AccountOpt = None,
    slurm_qos: QosOpt = None,
    slurm_cpus_per_task: CpusOpt = None,
    seq_len_dist: DistOpt = None,
    varlen_strategy: StrategyOpt = None,
    headroom: HeadroomOpt = DEFAULT_HEADROOM,
) -> None:
    """Explain one plan: step-time and memory breakdown. dp = gpus / (tp * pp * cp). Exits 1 if it does not fit."""
    from autopar.advise import train as advise
    from autopar.advise.launch import SlurmOptions

    explain_plan = functools.partial(
        advise.explain,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vpp,
        ep=ep,
        etp=etp,
        cp_comm=cp_comm,
        mbs=mbs,
        recompute=recompute,
        zero=zero,
        sp=sp,
        recompute_modules=recompute_modules,
    )
    strategy = varlen.checked_strategy(varlen_strategy, seq_len_dist)
    want, ctx = _job(
        model,
        hardware=hardware,
        stack=stack,
        stack_opt=stack_opt,
        recipe=recipe,
        gpus=gpus,
        nodes=nodes,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        seq_len_dist=seq_len_dist,
        headroom=headroom,
        emit=emit,
        emit_out=emit_out,
        torchtitan_config=torchtitan_config,
        emit_extra=emit_extra,
        slurm=SlurmOptions(
            partition=slurm_partition, time=slurm_time, account=slurm_account, qos=slurm_qos, cpus_per_task=slurm_cpus_per_task
        ),
    )
    if seq_len_dist is not None:
        fits = varlen.answer(
            ctx,
            want,
            seq_len_dist=seq_len_dist,
            strategy=strategy,
            json_out=json_out,
            find=lambda dist: varlen.explained(ctx, dist, explain_plan, sequences=global_batch, strategy=strategy),
        )
    else:
        fits = _explained(explain_plan(ctx), want, json_out=json_out, explain=explain)
    if not fits:  # as suggest's "no plan fits": exit 1, after the breakdown that says by how much
        raise typer.Exit(InfeasibleError.exit_code)


def _explained(result: Explained, want: LaunchRequest | None, *, json_out: bool, explain: bool) -> bool:
    """estimate at one fixed sequence length: launch, print; whether the plan fits."""
    from autopar.advise import launch
    from autopar.render import report

    launched = launch.prepare(want, result.ctx, result.estimate.plan)
    if json_out:
        print(report.explained_json(result, launch=launched))
    else:
        report.render_explained(console(), result, explain=explain, launch=launched)
    return result.estimate.fits
