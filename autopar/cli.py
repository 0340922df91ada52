"""The command line: parse, call one library function, render. No maths here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from autopar import cli_coerce
from autopar.cli_serve import serve_app
from autopar.completions import (
    complete_emit,
    complete_hardware,
    complete_model,
    complete_recompute,
    complete_schema,
    complete_stack,
    complete_strategy,
)
from autopar.errors import AutoparError, InfeasibleError, SpecError
from autopar.spec.job import DEFAULT_HEADROOM

if TYPE_CHECKING:
    from rich.console import Console

# Library modules are imported inside the commands, so that `autopar --help` and
# shell completion start fast.
cli_coerce.install()  # no pydantic adapter for an option left at its default

app = typer.Typer(
    name="autopar",
    help="Parallelism advisor: how to split a training job across GPUs, how fast it runs, whether it fits.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
app.add_typer(serve_app, name="serve")


def _print_version(value: bool) -> None:
    if value:
        from autopar import version

        print(f"autopar {version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print autopar's version (its package metadata) and exit.",
                                          callback=_print_version, is_eager=True)] = False,
) -> None:
    """Parallelism advisor: how to split a training job across GPUs, how fast it runs, whether it fits."""


def _fail(exc: AutoparError) -> NoReturn:
    from autopar.render.text import error

    text = str(exc)
    error(text if len(text) <= 2000 else text[:1999] + "…")  # one line piped, whatever a name or path holds
    raise typer.Exit(exc.exit_code)


@app.command()
def profile(
    out: Annotated[Path | None, typer.Option(help="Where to write the profile (default: the saved-profile path; "
                                             "profile-cpu.yaml beside it for a CPU run).")] = None,
    quick: Annotated[bool, typer.Option(help="Fewer sizes and repetitions: about 30 s on an 8-GPU node.")] = False,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    nproc: Annotated[int | None, typer.Option(help="Processes to start (default: one per local GPU; 2 gloo processes on CPU).")] = None,
    compare: Annotated[str | None, typer.Option(help="Built-in profile to print the measured numbers against.")] = None,
) -> None:
    """Measure this node (or, under torchrun, these nodes) and save a hardware profile."""
    try:
        from autopar.probe.command import run_profile

        run_profile(out=out, quick=quick, device=device, nproc=nproc, compare=compare)
    except AutoparError as exc:
        _fail(exc)


@app.command()
def calibrate(
    model: Annotated[str, typer.Argument(help="Preset name, model .yaml, or Hugging Face config.json (dense models).",
                                         autocompletion=complete_model)],
    plan: Annotated[list[str] | None, typer.Option(help="A plan to run, e.g. dp2,tp2,pp1, with any of vppN, cpN, mbsN, "
                                                   "gbN, zeroN, seqN, sp or nosp after a comma; repeat for several (one "
                                                   "process group runs them in turn).")]
    = None,
    top: Annotated[int | None, typer.Option(help="Instead of --plan: suggest's best K plans for the processes.")] = None,
    scale_to_fit: Annotated[bool, typer.Option("--scale-to-fit", help="Shrink the model to run in seconds here "
                                               "(says how).")] = False,
    nproc: Annotated[int | None, typer.Option(help="Processes to start (default: one per GPU; 2 on CPU).")] = None,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    steps: Annotated[int, typer.Option(help="Measured steps.")] = 10,
    warmup: Annotated[int, typer.Option(help="Untimed steps first.")] = 2,
    hardware: Annotated[str | None, typer.Option(
        "--hardware", help="Profile for the step-time prediction (default: the saved one, if measured on this device).",
        autocompletion=complete_hardware)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    save: Annotated[bool, typer.Option("--save", help="Write the measured corrections into the saved profile; "
                                       "suggest and estimate then apply them to eager stacks (deepspeed, "
                                       "llm-foundry) and say so.")] = False,
) -> None:
    """Run a few real steps of a plan with torch-native parallelism; print predicted vs measured."""
    saved = None
    try:
        from autopar.calibrate.command import check_run, run_calibrate
        from autopar.calibrate.save import target

        check_run(steps=steps, warmup=warmup, nproc=nproc, device=device, top=top)  # every check before any work
        where = target() if save else None
        plans, note = list(plan or []), None
        if top is not None:
            texts, note = top_plans_for(model, top, nproc=nproc, device=device, hardware=hardware, scale=scale_to_fit)
            plans += texts
        done = run_calibrate(model, plan_texts=plans, scale=scale_to_fit, nproc=nproc, device=device, steps=steps,
                             warmup=warmup, hardware=hardware, before_run=note)
        if done is not None and where is not None:
            from autopar.calibrate.save import save as save_corrections

            saved = save_corrections(done, where)
    except AutoparError as exc:
        _fail(exc)
    if done is None:
        return
    from autopar.render.calibrate import as_json, lines, saved_line

    if json_out:
        print(as_json(done, saved))
    else:
        print("\n\n".join("\n".join(lines(c)) for c in done))
        if saved is not None:
            print("\n" + saved_line(saved))


def top_plans_for(model: str, k: int, *, nproc: int | None, device: str, hardware: str | None,
                  scale: bool) -> tuple[list[str], Callable[[], None]]:
    """--top K: suggest's best plans for this many processes, and what says them on stderr (once all is checked)."""
    from autopar.calibrate.command import top_plans, world_size
    from autopar.io.models import load_model
    from autopar.probe.runtime import require_torch, resolve_device

    kind = resolve_device(require_torch("autopar calibrate"), device)
    world = world_size(kind, nproc)
    texts, hw = top_plans(load_model(model), k, world=world, hardware=hardware, scale=scale, kind=kind)

    def note() -> None:
        from autopar.render.text import console, say

        say(console(stderr=True), f"--top {k}: suggest's best plans for {world} processes on {hw}: "
            f"{'; '.join(texts)}", markup=False)

    return texts, note


Model = Annotated[str, typer.Argument(help="Preset name (see `autopar models`), model .yaml, or Hugging Face config.json.",
                                      autocompletion=complete_model)]
HardwareOpt = Annotated[
    str | None, typer.Option("--hardware", help="Built-in profile name or profile .yaml (default: saved profile, else h100-sxm).",
                             autocompletion=complete_hardware)
]
StackOpt = Annotated[
    str | None, typer.Option("--stack", help="Execution stack: megatron | torchtitan | deepspeed | llm-foundry, or a stack "
                             ".yaml (default: megatron; see `autopar stacks`).", autocompletion=complete_stack)
]
GpusOpt = Annotated[int | None, typer.Option(help="Total GPUs.")]
GpusAutoOpt = Annotated[str | None, typer.Option(
    "--gpus", help="Total GPUs, or auto: the fewest GPUs that fit, and tokens/s as the count doubles.")]
NodesOpt = Annotated[int | None, typer.Option(help="Nodes (GPUs = nodes x GPUs per node).")]
BatchOpt = Annotated[int | None, typer.Option(help="Global batch in sequences (default: about 4M tokens).")]
SeqOpt = Annotated[int | None, typer.Option(help="Sequence length in tokens (default: the model's).")]
DtypeOpt = Annotated[str, typer.Option(help="bf16 | fp16 | fp8 (FP8 GEMMs; MFU still against the bf16 peak)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
HeadroomOpt = Annotated[str, typer.Option(help="Memory a plan should leave free on each GPU, GiB (4) or a share (5%); "
                                          "a plan fits in the whole GPU, one inside the headroom is warned about.")]
DistOpt = Annotated[str | None, typer.Option(
    help="Sequence-length distribution: lengths (.txt/.jsonl/.npy), a histogram or a parametric form (.yaml).")]
DEFAULT_VARLEN_STRATEGY = "megatron_dynamic_cp"
StrategyOpt = Annotated[str | None, typer.Option(
    help="With --seq-len-dist: naive | balanced | wlb | megatron_dynamic_cp | hdp_no_balance | hdp "
         "(default megatron_dynamic_cp).",
    autocompletion=complete_strategy)]
EmitOpt = Annotated[str | None, typer.Option(
    help="Also give the launch: megatron | torchtitan | megatron-bridge (torchrun lines) | deepspeed (a line and "
         "ds_config.json) | slurm | slurm-torchtitan (sbatch scripts).",
    autocompletion=complete_emit)]
EmitOutOpt = Annotated[Path | None, typer.Option(help="Write the --emit launch to this file instead of printing it.")]
TitanOpt = Annotated[str | None, typer.Option(
    help="torchtitan config function, NAME or MODULE:NAME (e.g. llama3_70b); presets have a default.")]
ExtraOpt = Annotated[str | None, typer.Option(
    help="Framework arguments appended to the --emit command, as one shell-quoted string.")]
PartitionOpt = Annotated[str | None, typer.Option(help="SLURM partition for --emit slurm*.")]
TimeOpt = Annotated[str | None, typer.Option(help="SLURM time limit for --emit slurm*, e.g. 04:00:00.")]
AccountOpt = Annotated[str | None, typer.Option(help="SLURM account for --emit slurm*.")]
QosOpt = Annotated[str | None, typer.Option(help="SLURM quality of service for --emit slurm*.")]
CpusOpt = Annotated[int | None, typer.Option(help="CPUs per node for --emit slurm* (default 8 per GPU).", min=1)]
SaveDirOpt = Annotated[Path | None, typer.Option(
    help="Also write the plans (plans.csv, plans.jsonl), the --json document and the --emit launch files into "
         "this folder.")]


def _console() -> Console:
    from autopar.render.text import console

    return console()  # 80 columns piped, at most 80 on a terminal


def _varlen_strategy(strategy: str | None, seq_len_dist: str | None) -> str:
    """--varlen-strategy (default megatron_dynamic_cp); refused without the --seq-len-dist whose plans it ranks."""
    if strategy is not None and seq_len_dist is None:
        raise SpecError("--varlen-strategy needs --seq-len-dist (it ranks the plans of a length distribution)")
    return DEFAULT_VARLEN_STRATEGY if strategy is None else strategy


@app.command()
def suggest(
    model: Model,
    hardware: HardwareOpt = None,
    stack: StackOpt = None,
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
    plot: Annotated[Path | None, typer.Option(help="Write a chart of all feasible plans (.svg or .html; needs the \\[plot] "
                                              "extra: matplotlib).")]
    = None,
    seq_len_dist: DistOpt = None,
    varlen_strategy: StrategyOpt = None,
    headroom: HeadroomOpt = DEFAULT_HEADROOM,
    save_dir: SaveDirOpt = None,
) -> None:
    """Search every parallel plan for a job and rank them by tokens/s."""
    from autopar.advise import launch, questions
    from autopar.advise import train as advise
    from autopar.emit.slurm import SlurmOptions
    from autopar.render import report
    from autopar.render.progress import progress_after

    try:
        varlen_strategy = _varlen_strategy(varlen_strategy, seq_len_dist)
        count, auto = questions.parse_gpus(gpus)
        if auto:
            _gpus_auto(model, hardware=hardware, stack=stack, nodes=nodes, global_batch=global_batch, seq_len=seq_len,
                       dtype=dtype, json_out=json_out, headroom=headroom,
                       refused=[name for name, given in (("--emit", emit), ("--plot", plot), ("--seq-len-dist", seq_len_dist),
                                                         ("--save-dir", save_dir)) if given is not None])
            return
        want = launch.request(emit, out=emit_out, torchtitan_config=torchtitan_config, extra=emit_extra,
                              slurm=SlurmOptions(partition=slurm_partition, time=slurm_time, account=slurm_account,
                                                 qos=slurm_qos, cpus_per_task=slurm_cpus_per_task))
        ctx = advise.context(model, hardware=hardware, gpus=count, nodes=nodes, global_batch=global_batch,
                             seq_len=seq_len, dtype=dtype, seq_len_dist=seq_len_dist,
                             stack=launch.stack_for(emit, stack), headroom=headroom)
        if seq_len_dist is not None:
            from autopar.advise import varlen as advise_varlen
            from autopar.render import varlen as report_varlen
            from autopar.render.text import say

            if plot is not None:
                raise SpecError("--plot charts fixed-length plans; it cannot be combined with --seq-len-dist")
            if save_dir is not None:
                raise SpecError("--save-dir saves fixed-length plans; it cannot be combined with --seq-len-dist")
            dist = advise_varlen.load(seq_len_dist, ctx.model.max_seq_len, ctx.model.name)
            varlen_result = advise_varlen.suggest_varlen(ctx, dist, sequences=global_batch, strategy=varlen_strategy)
            best = varlen_result.plans[0].estimate
            extra, note = advise_varlen.launch_args(want, varlen_strategy, best, varlen_result.fixed.ctx.job)
            launched = launch.prepare(want, varlen_result.fixed.ctx, [p.estimate.plan for p in varlen_result.plans],
                                      extra_args=extra)
            launch_doc = {**report.launch_dict(launched), **({"launch_note": note} if note else {})}
            if json_out:
                print(report_varlen.suggestion_json(varlen_result, top, launch=launch_doc))
            else:
                report_varlen.render_suggestion(_console(), varlen_result, top)
                if launched is not None:
                    report.render_launch(_console(), launched)
                    say(_console(), f"launch: {note}", markup=False)
            return
        with progress_after("searching plans", enabled=not json_out) as tick:
            result = advise.suggest(ctx, progress=tick)
        launched = launch.prepare(want, result.ctx, result.plan_order)
        plotted = None
        if plot is not None:
            from autopar.render.plot import write_plot

            plotted = write_plot(plot, result)
        saved = None
        if save_dir is not None:
            from autopar.io.savedir import save_files
            from autopar.render.export import suggestion_files

            saved = save_files(save_dir, suggestion_files(result, top, launch=launched), executable=frozenset({"launch.sh"}))
    except AutoparError as exc:
        _fail(exc)
    if json_out:
        print(report.suggestion_json(result, top, launch=launched, plot=plotted, saved=saved))
    else:
        report.render_suggestion(_console(), result, top, launch=launched, plot=plotted, saved=saved)


def _gpus_auto(model: str, *, hardware: str | None, stack: str | None, nodes: int | None, global_batch: int | None,
               seq_len: int | None, dtype: str, json_out: bool, headroom: str, refused: list[str]) -> None:
    """suggest --gpus auto: the fewest GPUs that fit and the throughput curve (errors raise AutoparError)."""
    from autopar.advise import questions
    from autopar.advise import train as advise
    from autopar.render.progress import progress_after
    from autopar.render.scaling import render_scaling, scaling_json

    if refused or nodes is not None:
        raise SpecError(f"--gpus auto chooses the GPU count; it cannot be combined with {', '.join(refused or ['--nodes'])}")
    ctx = advise.context(model, hardware=hardware, gpus=None, nodes=1, global_batch=global_batch, seq_len=seq_len,
                         dtype=dtype, stack=stack, headroom=headroom)
    with progress_after("GPU counts", enabled=not json_out) as tick:
        result = questions.scaling(ctx, batch_given=global_batch is not None, progress=tick)
    if json_out:
        print(scaling_json(result))
    else:
        render_scaling(_console(), result)


@app.command()
def estimate(
    model: Model,
    hardware: HardwareOpt = None,
    stack: StackOpt = None,
    gpus: GpusOpt = None,
    nodes: NodesOpt = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline stages.")] = 1,
    vpp: Annotated[int, typer.Option(help="Virtual stages per pipeline rank (interleaved 1F1B).")] = 1,
    cp: Annotated[int, typer.Option(help="Context-parallel degree.")] = 1,
    ep: Annotated[int, typer.Option(help="Expert-parallel degree (MoE only).")] = 1,
    etp: Annotated[int, typer.Option(help="Expert tensor-parallel degree: 1 or tp (MoE only).")] = 1,
    cp_comm: Annotated[str | None, typer.Option(
        help="CP K/V exchange: ring | allgather (default: the stack's first; megatron ring).")] = None,
    mbs: Annotated[int, typer.Option(help="Micro-batch size, sequences.")] = 1,
    recompute: Annotated[str, typer.Option(help="none | selective | full", autocompletion=complete_recompute)] = "none",
    recompute_modules: Annotated[str | None, typer.Option(
        help="With --recompute selective: Megatron's modules to recompute, comma-separated (core_attn, moe_act, "
             "layernorm, mla_up_proj, mlp, moe, shared_experts).")] = None,
    zero: Annotated[int | None, typer.Option(
        help="0 | 1 | 2 | 3 (1 = distributed optimizer; default: 1 where the stack has it, else 3).")] = None,
    sp: Annotated[bool, typer.Option("--sp/--no-sp", help="Sequence parallelism with TP.")] = True,
    global_batch: BatchOpt = None,
    seq_len: SeqOpt = None,
    dtype: DtypeOpt = "bf16",
    json_out: JsonOpt = False,
    explain: Annotated[bool, typer.Option(
        "--explain/--no-explain", help="Draw the pipeline schedule, the step-time bar and the memory bar.")] = True,
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
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.emit.slurm import SlurmOptions
    from autopar.render import report

    def explain_plan(ctx: advise.Context) -> advise.Explained:
        return advise.explain(ctx, tp=tp, pp=pp, cp=cp, vpp=vpp, ep=ep, etp=etp, cp_comm=cp_comm, mbs=mbs,
                              recompute=recompute, zero=zero, sp=sp, recompute_modules=recompute_modules)

    try:
        varlen_strategy = _varlen_strategy(varlen_strategy, seq_len_dist)
        want = launch.request(emit, out=emit_out, torchtitan_config=torchtitan_config, extra=emit_extra,
                              slurm=SlurmOptions(partition=slurm_partition, time=slurm_time, account=slurm_account,
                                                 qos=slurm_qos, cpus_per_task=slurm_cpus_per_task))
        ctx = advise.context(model, hardware=hardware, gpus=gpus, nodes=nodes, global_batch=global_batch,
                             seq_len=seq_len, dtype=dtype, seq_len_dist=seq_len_dist,
                             stack=launch.stack_for(emit, stack), headroom=headroom)
        if seq_len_dist is not None:
            from autopar.advise import varlen as advise_varlen
            from autopar.render import varlen as report_varlen
            from autopar.render.text import say

            dist = advise_varlen.load(seq_len_dist, ctx.model.max_seq_len, ctx.model.name)
            explained = advise_varlen.explain_varlen(ctx, dist, lambda c: explain_plan(c).estimate,
                                                     sequences=global_batch, strategy=varlen_strategy)
            extra, note = advise_varlen.launch_args(want, varlen_strategy, explained.plan.estimate, explained.ctx.job)
            launched = launch.prepare(want, explained.ctx, explained.plan.estimate.plan, extra_args=extra)
            launch_doc = {**report.launch_dict(launched), **({"launch_note": note} if note else {})}
            if json_out:
                print(report_varlen.explained_json(explained, launch=launch_doc))
            else:
                report_varlen.render_explained(_console(), explained)
                if launched is not None:
                    report.render_launch(_console(), launched)
                    say(_console(), f"launch: {note}", markup=False)
            if not explained.plan.estimate.fits:
                raise typer.Exit(InfeasibleError.exit_code)
            return
        result = explain_plan(ctx)
        launched = launch.prepare(want, result.ctx, result.estimate.plan)
    except AutoparError as exc:
        _fail(exc)
    if json_out:
        print(report.explained_json(result, launch=launched))
    else:
        report.render_explained(_console(), result, explain=explain, launch=launched)
    if not result.estimate.fits:  # as suggest's "no plan fits": exit 1, after the breakdown that says by how much
        raise typer.Exit(InfeasibleError.exit_code)


@app.command("models")
def models_cmd() -> None:
    """List the built-in model presets."""
    from autopar.io.models import load_model, preset_names
    from autopar.render.text import say, table

    try:
        t = table("name", "family", "params (active)", "layers", "hidden", "heads/kv", "seq/max",
                  left=("name", "family", "params (active)"), wrap=("family", "params (active)"))
        for name in preset_names():
            m = load_model(name)
            params = f"{m.total_params() / 1e9:.1f}B" + (f" ({m.active_params() / 1e9:.1f}B)" if m.moe else "")
            t.add_row(name, m.family(), params, str(m.layers), str(m.hidden_size),
                      f"{m.num_attention_heads}/{m.num_kv_heads}", f"{m.seq_len}/{m.max_seq_len}")
    except AutoparError as exc:
        _fail(exc)
    console = _console()
    console.print(t)
    say(console, "sources and citations: the `source:` field of each preset in autopar/data/presets/", markup=False)


@app.command("hardware")
def hardware_cmd() -> None:
    """List the built-in hardware profiles."""
    from autopar.io.profiles import builtin_names, load_hardware
    from autopar.render.text import say, table
    from autopar.spec.hardware import DEFAULT_HARDWARE

    try:
        t = table("name", "GPU", "GiB", "bf16 TFLOP/s", "GPUs/node", left=("name", "GPU"), wrap=("GPU",))
        described = []
        for name in builtin_names():
            hw = load_hardware(name)
            t.add_row(name, hw.gpu_name, f"{hw.memory_bytes / 2**30:.1f}", f"{hw.peak('bf16') / 1e12:.0f}",
                      str(hw.gpus_per_node))
            described.append(f"{name}: {hw.description}")
    except AutoparError as exc:
        _fail(exc)
    console = _console()
    console.print(t)
    for line in described:
        say(console, line, markup=False)
    say(console, f"default when no --hardware and no saved profile: {DEFAULT_HARDWARE}")


@app.command("stacks")
def stacks_cmd() -> None:
    """List the execution stacks and what each one assumes."""
    from autopar.io.stacks import DEFAULT_STACK, builtin_stacks, load_stack
    from autopar.render.text import say, table

    try:
        t = table("name", "kernels", "overlap", "DP sync", "ZeRO", "axes",
                  left=("name", "kernels", "overlap", "DP sync", "ZeRO", "axes"), wrap=("kernels", "DP sync"))
        for name in builtin_stacks():
            s = load_stack(name)
            overlaps = f"{s.tp_overlap:.2f}/{'y' if s.cp_overlap else 'n'}/{'y' if s.ep_overlap else 'n'}"
            sync = "per block" if s.dp_granularity == "layer" else (f"{s.dp_bucket_params / 1e6:.0f}M bucket"
                                                                  if s.dp_bucket_params else "one pass")
            t.add_row(name, s.attention_kernel + ("" if s.compiled else " eager"), overlaps, sync,
                      ",".join(map(str, s.zero_stages)), ",".join(s.parallelisms) + ("+vpp" if s.vpp else ""))
        launchers = ", ".join(f"{n}: {load_stack(n).launcher}" for n in builtin_stacks())
    except AutoparError as exc:
        _fail(exc)
    console = _console()
    console.print(t)
    say(console, "overlap: share of TP communication hidden / CP ring hidden / MoE all-to-all hidden (y/n)")
    say(console, f"--emit follows the stack: {launchers}", markup=False)
    say(console, f"default when no --stack: {DEFAULT_STACK}")
    say(console, "what each assumes, cited: autopar/data/stacks/NAME.yaml")


@app.command("schema")
def schema_cmd(
    kind: Annotated[str, typer.Argument(help="model | hardware | distribution", autocompletion=complete_schema)],
) -> None:
    """Print the JSON Schema of a model spec, hardware profile or length-distribution file (for editors)."""
    import json

    from autopar.io.schema import schemas

    found = schemas()
    if kind not in found:
        _fail(SpecError(f"schema: expected one of {', '.join(found)}, got {kind!r}"))
    print(json.dumps(found[kind], indent=2))


def main() -> None:
    import os

    from autopar.io.streams import run

    if os.environ.get("COLUMNS", "").strip().isdigit():  # rich only then: start-up and completion stay fast
        from autopar.render.text import floor_columns

        floor_columns()
    run(app)  # also under `python -m autopar`, so completion finds _AUTOPAR_COMPLETE; exit codes in io/streams.py
