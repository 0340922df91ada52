"""`autopar serve estimate` and `autopar serve suggest`: parse, call one serving use case, render. No maths here."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from autopar.cli.options import (
    DecodeMaxBatchOpt,
    DecodeMaxTokensOpt,
    DecodeMemFractionOpt,
    FrameworkOpt,
    HardwareOpt,
    IslOpt,
    JsonOpt,
    KvOpt,
    MaxBatchOpt,
    MaxPrefillOpt,
    MaxTokensOpt,
    MemFractionOpt,
    MixedOpt,
    Model,
    OslOpt,
    PrefillMaxBatchOpt,
    PrefillMaxTokensOpt,
    PrefillMemFractionOpt,
    PrefixCacheOpt,
    RangeRatioOpt,
    RecvIntervalOpt,
    ServeEmitOpt,
    ServeGpusOpt,
    SsmDtypeOpt,
    WeightsOpt,
    path_option,
)
from autopar.cli.run import console
from autopar.errors import InfeasibleError

if TYPE_CHECKING:
    from autopar.advise.serve import ServeContext, ServeSweep
    from autopar.advise.serve_launch import ServeLaunch
    from autopar.render.answer import PlotSummary
    from autopar.spec.serve import EngineArgs


def parse_launch(argv: Sequence[str]) -> tuple[EngineArgs, EngineArgs, EngineArgs]:
    """launch_args of `serve estimate`'s launch flags as a user types them (["--max-batch-size", "128", ...]),
    read by the command's own parser (what the benchmark passes a row; any other flag is refused)."""
    return _parse_launch(tuple(argv))


@functools.cache
def _parse_launch(argv: tuple[str, ...]) -> tuple[EngineArgs, EngineArgs, EngineArgs]:
    from autopar.advise.serve_options import LAUNCH_PARAMS, launch_args
    from autopar.errors import SpecError

    command = _estimate_command()
    known = {opt for p in command.params if p.name in LAUNCH_PARAMS for opt in p.opts}
    if stray := [a for a in argv if a.startswith("--") and a.split("=")[0] not in known]:
        raise SpecError(f"{stray[0]} is not a serve launch option")
    with command.make_context("estimate", ["MODEL", *argv]) as ctx:
        return launch_args(ctx.params)


@functools.cache
def _estimate_command() -> Any:
    """`autopar serve estimate` as the CLI parses it: Typer's Click command of estimate_cmd, built alone."""
    from typer.main import get_command

    one = typer.Typer()
    one.command("estimate")(estimate_cmd)
    return get_command(one)


def _context(
    model: str,
    *,
    hardware: str | None,
    gpus: int | None,
    framework: str | None,
    emit: str | None,
    weights: str,
    kv_dtype: str,
    launch: Mapping[str, Any],
) -> ServeContext:
    """The serve commands' shared options: --framework defaults to the --emit target, else vllm; the
    engine's launch settings (launch_args of the command's launch options)."""
    from autopar.advise import serve as advise
    from autopar.advise.serve_options import launch_args

    shared, prefill, decode = launch_args(launch)
    return advise.options_context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=framework,
        emit=emit,
        weights=weights,
        kv_dtype=kv_dtype,
        engine_args=shared,
        prefill_args=prefill,
        decode_args=decode,
    )


def estimate_cmd(
    model: Model,
    gpus: ServeGpusOpt = None,
    hardware: HardwareOpt = None,
    tp: Annotated[int | None, typer.Option(help="Attention tensor parallelism (disagg: the decode TP).")] = None,
    pp: Annotated[int | None, typer.Option(help="Pipeline stages (default 1).")] = None,
    dp: Annotated[int | None, typer.Option(help="Replicas; with --attention-dp, attention data-parallel ranks inside one engine.")] = None,
    ep: Annotated[int | None, typer.Option(help="Expert parallelism of the MoE layers (default 1).")] = None,
    attention_dp: Annotated[bool, typer.Option("--attention-dp", help="--dp counts attention-DP ranks.")] = False,
    concurrency: Annotated[int, typer.Option(help="Requests in flight across the deployment.")] = 1,
    isl: IslOpt = 1024,
    osl: OslOpt = 1024,
    random_range_ratio: RangeRatioOpt = 1.0,
    framework: FrameworkOpt = None,
    weights: WeightsOpt = "bf16",
    kv_dtype: KvOpt = "auto",
    mode: Annotated[str, typer.Option(help="agg | disagg")] = "agg",
    prefill_workers: Annotated[int | None, typer.Option(help="disagg: prefill engines.")] = None,
    prefill_tp: Annotated[int | None, typer.Option(help="disagg: prefill TP (default 1).")] = None,
    prefill_pp: Annotated[int | None, typer.Option(help="disagg: prefill pipeline stages (default 1).")] = None,
    prefill_dp: Annotated[
        int | None, typer.Option(help="disagg: attention-DP ranks per prefill engine (with --prefill-attention-dp).")
    ] = None,
    prefill_ep: Annotated[int | None, typer.Option(help="disagg: prefill EP (default 1).")] = None,
    prefill_attention_dp: Annotated[
        bool, typer.Option("--prefill-attention-dp", help="disagg: --prefill-dp counts attention-DP ranks.")
    ] = False,
    decode_workers: Annotated[int | None, typer.Option(help="disagg: decode engines.")] = None,
    decode_tp: Annotated[int | None, typer.Option(help="disagg: decode TP (default --tp).")] = None,
    decode_pp: Annotated[int | None, typer.Option(help="disagg: decode pipeline stages (default 1).")] = None,
    decode_dp: Annotated[
        int | None, typer.Option(help="disagg: attention-DP ranks per decode engine (with --decode-attention-dp).")
    ] = None,
    decode_ep: Annotated[int | None, typer.Option(help="disagg: decode EP (default 1).")] = None,
    decode_attention_dp: Annotated[
        bool, typer.Option("--decode-attention-dp", help="disagg: --decode-dp counts attention-DP ranks.")
    ] = False,
    max_num_tokens: MaxTokensOpt = None,
    max_batch_size: MaxBatchOpt = None,
    memory_fraction: MemFractionOpt = None,
    mixed_chunk: MixedOpt = False,
    max_prefill_tokens: MaxPrefillOpt = None,
    recv_interval: RecvIntervalOpt = None,
    disable_prefix_cache: PrefixCacheOpt = False,
    ssm_state_dtype: SsmDtypeOpt = None,
    prefill_max_num_tokens: PrefillMaxTokensOpt = None,
    prefill_max_batch_size: PrefillMaxBatchOpt = None,
    prefill_memory_fraction: PrefillMemFractionOpt = None,
    decode_max_num_tokens: DecodeMaxTokensOpt = None,
    decode_max_batch_size: DecodeMaxBatchOpt = None,
    decode_memory_fraction: DecodeMemFractionOpt = None,
    emit: ServeEmitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Explain one deployment: TTFT and TPOT breakdown, throughput, KV capacity, memory. Exits 1 if it does not fit."""
    from autopar.advise.serve_options import LAUNCH_PARAMS

    launch = {k: v for k, v in locals().items() if k in LAUNCH_PARAMS}
    from autopar.advise import serve as advise
    from autopar.advise import serve_launch
    from autopar.render import serve as render
    from autopar.spec.serve import Workload

    ctx = _context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=framework,
        emit=emit,
        weights=weights,
        kv_dtype=kv_dtype,
        launch=launch,
    )
    wl = Workload(isl=isl, osl=osl, concurrency=concurrency, random_range_ratio=random_range_ratio)
    dep = advise.deployment(
        ctx,
        mode=mode,
        agg=advise.PoolArgs(tp=tp, pp=pp, dp=dp, ep=ep, attention_dp=attention_dp),
        prefill=advise.PoolArgs(
            tp=prefill_tp, pp=prefill_pp, dp=prefill_dp, ep=prefill_ep, attention_dp=prefill_attention_dp, workers=prefill_workers
        ),
        decode=advise.PoolArgs(
            tp=decode_tp, pp=decode_pp, dp=decode_dp, ep=decode_ep, attention_dp=decode_attention_dp, workers=decode_workers
        ),
    )
    est = advise.explain(ctx, dep, wl)
    launched = serve_launch.launch(ctx, emit, est) if emit else None
    if json_out:
        print(render.estimate_json(ctx, est, launched))
    else:
        render.render_estimate(console(), ctx, est)
        if launched is not None:
            render.render_launch(console(), launched)
    if not est.fits:  # as training's estimate: exit 1, after the breakdown that says why
        raise typer.Exit(InfeasibleError.exit_code)


def suggest_cmd(
    model: Model,
    gpus: ServeGpusOpt = None,
    hardware: HardwareOpt = None,
    isl: IslOpt = 1024,
    osl: OslOpt = 1024,
    ttft_ms: Annotated[float | None, typer.Option(help="TTFT target, ms.")] = None,
    tpot_ms: Annotated[float | None, typer.Option(help="TPOT target, ms (inter-token, after the first token).")] = None,
    framework: FrameworkOpt = None,
    weights: WeightsOpt = "bf16",
    kv_dtype: Annotated[str | None, typer.Option(help="auto | bf16 | fp8 (default: try auto and fp8).")] = None,
    modes: Annotated[str, typer.Option(help="Comma-separated: agg, disagg.")] = "agg,disagg",
    max_num_tokens: MaxTokensOpt = None,
    max_batch_size: MaxBatchOpt = None,
    memory_fraction: MemFractionOpt = None,
    mixed_chunk: MixedOpt = False,
    max_prefill_tokens: MaxPrefillOpt = None,
    disable_prefix_cache: PrefixCacheOpt = False,
    ssm_state_dtype: SsmDtypeOpt = None,
    prefill_max_num_tokens: PrefillMaxTokensOpt = None,
    prefill_max_batch_size: PrefillMaxBatchOpt = None,
    prefill_memory_fraction: PrefillMemFractionOpt = None,
    decode_max_num_tokens: DecodeMaxTokensOpt = None,
    decode_max_batch_size: DecodeMaxBatchOpt = None,
    decode_memory_fraction: DecodeMemFractionOpt = None,
    emit: ServeEmitOpt = None,
    json_out: JsonOpt = False,
    save_dir: Annotated[
        Path | None,
        path_option(
            "Also write the Pareto front (front.csv, front.jsonl), the --json document and the --emit launch files into this folder."
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        path_option("Write a chart of every point that fits, tok/s/GPU against tok/s/user (.svg or .html)."),
    ] = None,
) -> None:
    """Search serving deployments: the Pareto front, the best one meeting the targets, its breakdown."""
    from autopar.advise.serve_options import LAUNCH_PARAMS

    launch = {k: v for k, v in locals().items() if k in LAUNCH_PARAMS}
    from autopar.advise import serve as advise
    from autopar.advise import serve_launch
    from autopar.advise.serve import DEFAULT_TARGETS_TEXT
    from autopar.render import serve as render
    from autopar.render.progress import progress_after

    ctx = _context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=framework,
        emit=emit,
        weights=weights,
        kv_dtype="auto" if kv_dtype is None else kv_dtype,
        launch=launch,
    )
    search = functools.partial(
        advise.suggest,
        ctx,
        isl=isl,
        osl=osl,
        ttft_ms=ttft_ms,
        tpot_ms=tpot_ms,
        modes=advise.parse_modes(modes),
        kv_dtypes=advise.kv_dtypes(kv_dtype),
    )
    with progress_after("pricing deployments", enabled=not json_out) as tick:
        result = search(progress=tick)
    launched = serve_launch.launch_best(ctx, emit, result, lambda keep: search(keep=keep)) if emit and result.best is not None else None
    saved, plotted = _front_files(ctx, result, launched, save_dir=save_dir, plot=plot)
    if json_out:
        print(render.suggestion_json(ctx, result, launched, saved=saved, plot=plotted))
    else:
        targets = ", ".join(f"{k} <= {v:g} ms" for k, v in (("TTFT", ttft_ms), ("TPOT", tpot_ms)) if v is not None)
        _print_suggestion(ctx, result, launched, targets=targets or DEFAULT_TARGETS_TEXT, saved=saved, plotted=plotted)


def _front_files(
    ctx: ServeContext, result: ServeSweep, launched: ServeLaunch | None, *, save_dir: Path | None, plot: Path | None
) -> tuple[list[Path] | None, PlotSummary | None]:
    """serve suggest --save-dir and --plot: write the folder, then the chart (when a deployment fits)."""
    saved = None
    if save_dir is not None and result.best is not None:
        from autopar.io.savedir import save_files
        from autopar.render.export import serve_files

        saved = save_files(save_dir, serve_files(ctx, result, launched))
    plotted = None
    if plot is not None and result.best is not None:
        from autopar.io.files import write_atomic
        from autopar.render.serve_plot import serve_plot_file

        text, plotted = serve_plot_file(plot, ctx, result)
        write_atomic(plot, text, option="--plot")
    return saved, plotted


def _print_suggestion(
    ctx: ServeContext,
    result: ServeSweep,
    launched: ServeLaunch | None,
    *,
    targets: str,
    saved: list[Path] | None,
    plotted: PlotSummary | None,
) -> None:
    """serve suggest's text output: the front and the recommendation, what was written, the launch."""
    from autopar.render import serve as render
    from autopar.render.report import render_saved

    render.render_suggestion(console(), ctx, result, targets=targets)
    render_saved(console(), saved)
    if plotted is not None:
        from autopar.render.text import say

        say(
            console(),
            f"plot: {plotted.plans:,} points fit ({plotted.drawn:,} priced and drawn), {plotted.pareto} "
            f"on the Pareto front, written to {plotted.path}",
            markup=False,
        )
    if launched is not None:
        render.render_launch(console(), launched)
