"""Rendering only: rich tables for people, JSON documents for programs.

render/text.py, and rich with it, is imported when a table is drawn (`_text`), so that a `--json`
answer loads no rich (tests/cli/test_startup.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopar.advise.bands import TrainingBands, pair
from autopar.advise.train import Context, Explained, Suggestion
from autopar.cost.step import Estimate
from autopar.render.answer import PlotSummary, checked, dumps
from autopar.render.labels import distinct_layouts, figure, legend, plan_label, plan_text
from autopar.spec.error_model import Lookup
from autopar.spec.text import counted
from autopar.spec.units import GIB

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from autopar.advise.launch import Launch


def _text() -> Any:
    """render/text.py, imported when a table is drawn."""
    from autopar.render import text

    return text


def say(console: Console, text: str, **how: Any) -> None:
    _text().say(console, text, **how)


def table(*columns: str, **how: Any) -> Table:
    return _text().table(*columns, **how)


def lookup_dict(found: Lookup) -> dict[str, Any]:
    """The class whose rows set a band: {"class", "rows"}, or no class, the rows of the wanted one and why."""
    if found.band is None:
        return {"class": None, "rows": found.rows, "wanted": found.wanted, "note": found.note()}
    return {"class": found.band.name, "rows": found.band.rows}


def bands_dict(b: TrainingBands) -> dict[str, Any]:
    """[p10, p90] of each figure (null: too few rows), the fit's margin and confidence, and the classes."""
    return {
        "tokens_per_s_range": pair(b.tokens_per_s),
        "tokens_per_s_per_gpu_range": pair(b.tokens_per_s_per_gpu),
        "step_time_s_range": pair(b.step_time_s),
        "memory_gib_per_gpu_range": pair(b.memory_gib),
        "fit_margin_gib": b.fit_margin_gib,
        "fit_confidence": b.fit_confidence,
        "error_classes": {"tokens_per_s": lookup_dict(b.speed), "memory": lookup_dict(b.memory)},
    }


def plan_dict(est: Estimate, bands: TrainingBands | None = None, *, headroom_bytes: float | None = None) -> dict[str, Any]:
    """The DESIGN.md JSON contract for one plan (with its error bands, and whether it leaves the headroom
    free, when given)."""
    p = est.plan
    return {
        "dp": p.dp,
        "tp": p.tp,
        "pp": p.pp,
        "vpp": p.vpp,
        "cp": p.cp,
        "ep": p.ep,
        "etp": p.etp,
        "cp_comm": p.cp_comm,
        "mbs": p.mbs,
        "recompute": p.recompute,
        **({"recompute_modules": list(p.recompute_modules)} if p.recompute_modules else {}),
        "zero": p.zero,
        "sp": p.sp,
        "step_time_s": est.step_time_s,
        "tokens_per_s": est.tokens_per_s,
        "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu,
        "model_tflops_per_gpu": est.model_tflops_per_gpu,
        "mfu": est.mfu,
        "memory_gib_per_gpu": est.memory.total / GIB,
        "allocator_reserved_gib": est.memory.allocator_reserved / GIB,
        "fits": est.fits,
        **(
            {}
            if headroom_bytes is None
            else {"within_headroom": est.fits and est.memory_capacity_bytes - est.memory.total >= headroom_bytes}
        ),
        **({} if bands is None else bands_dict(bands)),
    }


def context_dict(ctx: Context) -> dict[str, Any]:
    j = ctx.job
    return {
        "model": ctx.model.name,
        "params": ctx.model.total_params(),
        "hardware": ctx.hw.name,
        "hardware_source": ctx.hw_reason,
        "corrections": {
            c.name: {"factor": c.factor, "stack": c.stack, "source": c.source}
            for c in ctx.hw.corrections
            if ctx.stack.takes_eager_corrections
        },
        "stack": ctx.stack.name,
        "stack_version": ctx.stack.version,
        "stack_options": dict(ctx.stack.applied),
        "stack_source": ctx.stack_reason,
        "memory_gib_capacity": ctx.hw.memory_bytes / GIB,
        "memory_gib_gpu": ctx.hw.memory_bytes / GIB,
        "headroom_gib": ctx.headroom_bytes / GIB,
        "gpus": j.gpus,
        "gpus_per_node": j.gpus_per_node,
        "global_batch": j.global_batch,
        "seq_len": j.seq_len,
        "dtype": j.dtype,
        "mfu_convention": f"PaLM: 6N + 12*L*a*d*s FLOPs per token, no recompute, against the {ctx.hw.mfu_basis(j.dtype)} dense peak",
    }


def launch_dict(launch: Launch | None) -> dict[str, Any]:
    """--emit's keys: `launch` (one-line command, or the sbatch script) and where it was written."""
    if launch is None:
        return {}
    doc: dict[str, Any] = {"launch": launch.line, "launch_kind": launch.kind, "launch_notes": list(launch.notes)}
    if launch.path is not None:
        doc["launch_file"] = str(launch.path)
    if launch.files:
        doc["launch_files"] = dict(launch.files)  # name -> text, e.g. DeepSpeed's ds_config.json
    return doc


def suggestion_dict(
    s: Suggestion, top: int, *, launch: Launch | None = None, plot: PlotSummary | None = None, saved: Sequence[Path] | None = None
) -> dict[str, Any]:
    """`suggest --json`'s document (also the Python API's to_dict)."""
    plans = [plan_dict(e, s.bands(e), headroom_bytes=s.ctx.headroom_bytes) for e in s.plans[:top]]
    doc = {
        **context_dict(s.ctx),
        **plans[0],
        "considered": s.result.considered,
        "feasible": s.result.feasible,
        "plans": plans,
        "warnings": list(s.warnings),
        "ties": ties_dict(s),
        **launch_dict(launch),
    }
    if plot is not None:
        doc["plot_file"] = str(plot.path)
    if saved is not None:
        doc["saved_files"] = [str(p) for p in saved]
    return doc


def suggestion_json(
    s: Suggestion, top: int, *, launch: Launch | None = None, plot: PlotSummary | None = None, saved: Sequence[Path] | None = None
) -> str:
    return dumps(suggestion_dict(s, top, launch=launch, plot=plot, saved=saved))


def explained_dict(x: Explained, *, launch: Launch | None = None) -> dict[str, Any]:
    """`estimate --json`'s document (also the Python API's to_dict)."""
    e = x.estimate
    return {
        **context_dict(x.ctx),
        **plan_dict(e, x.bands, headroom_bytes=x.ctx.headroom_bytes),
        "time_breakdown_s": e.time.as_dict(),
        "memory_breakdown_gib": e.memory.as_gib(),
        "fit_hints": [{"change": c, "memory_gib_per_gpu": g} for c, g in x.hints],
        **launch_dict(launch),
    }


def ties_dict(s: Suggestion) -> dict[str, Any] | None:
    """The plans within the model's error of the fastest: how many, the band, the fastest."""
    t = s.ties
    if t is None:
        return None
    return {
        "within_error": t.count,
        "within_error_at_least": t.more,
        "spread": t.spread,
        "fastest": plan_label(t.fastest),
        "fastest_tokens_per_s_per_gpu": t.fastest.tokens_per_s_per_gpu,
    }


def explained_json(x: Explained, *, launch: Launch | None = None) -> str:
    return dumps(explained_dict(x, launch=launch))


def render_launch(console: Console, launch: Launch | None) -> None:
    """The launch after the tables: the command itself, or where it was written."""
    if launch is None:
        return
    what = (
        "sbatch script"
        if launch.kind.startswith("slurm")
        else "deepspeed command"
        if launch.line.startswith("deepspeed ")
        else "torchrun command"
    )
    where = (
        f"{launch.nnodes} nodes x {launch.nproc_per_node} GPUs" if launch.nnodes > 1 else f"1 node, {counted(launch.nproc_per_node, 'GPU')}"
    )
    for note in launch.notes:
        say(console, f"note: {note}", markup=False)
    if launch.path is not None:
        say(console, f"launch: {launch.framework} {what} ({where}) written to {launch.path}", markup=False)
        return
    console.print()
    say(console, f"[bold]launch[/]: {launch.framework} {what} ({where})")
    if launch.nnodes > 1 and not launch.kind.startswith("slurm"):
        say(console, "run it on every node with MASTER_ADDR set to the first node's address")
    console.print(_text().shell_text(launch.text, width=console.width), markup=False, highlight=False)
    for name, text in launch.files:
        say(console, f"{name} (the command reads it from the folder it runs in):", markup=False)
        console.print(text.rstrip("\n"), markup=False, highlight=False)


FIT_MARK = {"likely": "~", "borderline": "!"}  # after GiB in the suggest table; a sure fit has none


def _header(console: Console, ctx: Context) -> None:
    j, m = ctx.job, ctx.model
    batch = f"{j.global_batch} sequences" + (" (default: about 4M tokens)" if ctx.batch_defaulted else "")
    say(console, f"[bold]{m.name}[/] ({m.total_params() / 1e9:.1f}B parameters) on {j.gpus} x {ctx.hw.gpu_name}")
    say(console, f"hardware: {ctx.hw.name} — {ctx.hw_reason}")
    for c in ctx.hw.corrections:
        if ctx.stack.takes_eager_corrections:
            say(console, f"corrected by autopar calibrate: {c.describe()}")
        else:  # measured on eager PyTorch: says nothing of a stack with fused kernels
            say(console, f"not applied to stack {ctx.stack.name} (fused kernels): autopar calibrate's {c.describe()}")
    say(console, f"stack: {ctx.stack.label} — {ctx.stack_reason}")
    say(console, f"job: global batch {batch} x {j.seq_len} tokens = {j.tokens_per_step / 1e6:.2f}M tokens/step, {j.dtype}")
    say(
        console,
        f"memory: a plan fits in the GPU's {ctx.hw.memory_bytes / GIB:.1f} GiB; it should leave "
        f"{ctx.headroom_bytes / GIB:.1f} GiB free (--headroom {ctx.headroom})",
    )


def render_suggestion(
    console: Console,
    s: Suggestion,
    top: int,
    *,
    launch: Launch | None = None,
    plot: PlotSummary | None = None,
    saved: Sequence[Path] | None = None,
) -> None:
    checked(suggestion_dict(s, top))
    _header(console, s.ctx)
    r = s.result
    for warning in s.warnings:
        say(console, f"[yellow]warning:[/] {warning}")
    say(console, f"searched {r.considered} plans in {s.search_s:.2f} s; {r.feasible} fit in {s.ctx.hw.memory_bytes / GIB:.1f} GiB")
    shown = distinct_layouts(s.plans, top)
    # tokens/s and TFLOP/s per GPU are tok/s/GPU x GPUs and MFU x peak: in --json and `estimate`, not here
    order = "by tokens/s" if s.ties is None else "by tokens/s, the most conventional first within the model's error"
    heading = (
        f"the best layout {order} (its best variant" if len(shown) == 1 else (f"top {len(shown)} layouts {order} (the best variant of each")
    )
    say(console, f"{heading}; --json keeps the variants):")
    t = table(
        "#", "plan", "mbs", "recompute", "ZeRO", "step s", "tok/s/GPU", "MFU", "GiB", left=("plan", "recompute"), wrap=("plan", "recompute")
    )
    for i, e in enumerate(shown, 1):
        b = s.bands(e)
        modules = f" ({', '.join(e.plan.recompute_modules)})" if e.plan.recompute_modules else ""  # wraps at words
        t.add_row(
            str(i),
            plan_label(e),
            str(e.plan.mbs),
            e.plan.recompute + modules,
            str(e.plan.zero),
            f"{e.step_time_s:.2f}",
            figure(e.tokens_per_s_per_gpu, b.tokens_per_s_per_gpu, column=True),
            f"{e.mfu:.1%}",
            f"{e.memory.total / GIB:.1f}{FIT_MARK.get(b.fit_confidence or '', '') if b.memory_gib else ''}",
        )
    console.print(t)
    best = s.plans[0]
    b = s.bands(best)
    say(
        console,
        f"error bands (p10-p90 of measured/predicted on held-out rows): tokens/s {b.speed.note()}; "
        f"memory {b.memory.note()}" + ("; GiB~ likely fit, GiB! borderline" if b.memory_gib else ""),
        markup=False,
    )
    if s.ties is not None:
        say(
            console,
            f"{'at least ' if s.ties.more else ''}{s.ties.count} plans are within the model's error "
            f"(±{s.ties.spread:.0%}) of the best "
            f"({plan_label(s.ties.fastest)}, {s.ties.fastest.tokens_per_s_per_gpu:,.0f} tok/s/GPU); the most "
            f"conventional: {plan_label(s.ties.chosen)}, ZeRO-{s.ties.chosen.plan.zero}",
            markup=False,
        )
    notes = legend([plan_label(e) for e in (*shown, best)])
    if notes:
        say(console, notes, markup=False)
    say(console, f"[bold green]recommended:[/] {plan_text(best)}")
    say(
        console,
        f"  {best.step_time_s:.2f} s/step, {best.tokens_per_s:,.0f} tokens/s, "
        f"{figure(best.tokens_per_s_per_gpu, b.tokens_per_s_per_gpu)} per GPU, MFU {best.mfu:.1%}",
    )
    say(
        console,
        f"  peak {best.memory.total / GIB:.1f} GiB/GPU ({best.memory.allocator_reserved / GIB:.1f} reserved "
        f"by torch's allocator), {b.fit_margin_gib:.1f} GiB to spare, fit {b.fit_confidence}",
    )
    tight = s.ctx.headroom_warning(best)
    if tight:
        say(console, f"[yellow]warning:[/] {tight}")
    say(console, f"MFU: PaLM convention, 6N + 12·L·a·d·s FLOPs/token, no recompute, {s.ctx.hw.mfu_basis(s.ctx.job.dtype)} dense peak")
    if plot is not None:
        say(
            console,
            f"plot: {plot.plans} feasible plans ({plot.drawn} timed and drawn), {plot.pareto} on the Pareto front, written to {plot.path}",
            markup=False,
        )
    render_saved(console, saved)
    render_launch(console, launch)


def render_saved(console: Console, saved: Sequence[Path] | None) -> None:
    """--save-dir: what was written where, on one line."""
    if saved:
        say(console, f"saved in {saved[0].parent}: {', '.join(p.name for p in saved)}", markup=False)


def render_explained(console: Console, x: Explained, *, explain: bool = False, launch: Launch | None = None) -> None:
    checked(explained_dict(x))
    _header(console, x.ctx)
    e = x.estimate
    p = e.plan
    say(
        console,
        f"plan: {plan_label(e)}, mbs {p.mbs}, {p.microbatches(x.ctx.job)} micro-batches, recompute {p.recompute_label}, ZeRO-{p.zero}",
    )
    b = x.bands
    step = "" if b is None or b.step_time_s is None else f" (p10-p90 {b.step_time_s.lo:.3f}-{b.step_time_s.hi:.3f} s)"
    t = table("component", "seconds", "share", title=f"step time {e.step_time_s:.3f} s{step}", left=("component",), wrap=("component",))
    labels = {
        "compute": "compute",
        "tp_comm": "exposed TP comm",
        "cp_comm": "exposed CP comm",
        "ep_comm": "exposed EP all-to-all",
        "pp_comm": "exposed PP p2p",
        "dp_comm": "exposed DP sync",
        "bubble": "pipeline bubble",
        "optimizer": "optimizer step",
        "overlap": "overlap slowdown",
    }
    for key, value in e.time.as_dict().items():
        t.add_row(labels[key], f"{value:.3f}", f"{value / e.step_time_s:.1%}")
    console.print(t)
    mem = table(
        "part",
        "GiB",
        left=("part",),
        title=f"memory per GPU (worst stage): {e.memory.total / GIB:.1f} of {e.memory_capacity_bytes / GIB:.1f} GiB",
    )
    for key, value in e.memory.as_gib().items():
        if key != "total":
            mem.add_row(key, f"{value:.2f}")
    mem.add_row("device peak", f"{e.memory.total / GIB:.2f}")
    mem.add_row("allocator reserved", f"{e.memory.allocator_reserved / GIB:.2f}")
    console.print(mem)
    say(
        console,
        f"allocator reserved = torch.cuda.max_memory_reserved(): the device peak less the CUDA context "
        f"and NCCL ({e.memory.outside_allocator / GIB:.1f} GiB)",
        markup=False,
    )
    if explain:
        from autopar.render.charts import render_explain

        render_explain(console, x)
        console.print()
    per_gpu = figure(e.tokens_per_s_per_gpu, None if b is None else b.tokens_per_s_per_gpu)
    say(
        console,
        f"throughput: {e.tokens_per_s:,.0f} tokens/s, {per_gpu} per GPU, "
        f"{e.model_tflops_per_gpu:.0f} TFLOP/s per GPU, MFU {e.mfu:.1%} (PaLM convention, {x.ctx.hw.mfu_basis(x.ctx.job.dtype)} peak)",
    )
    if b is not None:
        ends = "" if b.memory_gib is None else f" (p10-p90 {b.memory_gib.lo:.1f}-{b.memory_gib.hi:.1f} GiB)"
        say(
            console,
            f"error bands (p10-p90 of measured/predicted on held-out rows): tokens/s {b.speed.note()}; memory {b.memory.note()}{ends}",
            markup=False,
        )
    fit_lines(console, x.ctx, e, b, x.hints)
    render_launch(console, launch)


def fit_lines(console: Console, ctx: Context, e: Estimate, b: TrainingBands | None, hints: Sequence[tuple[str, float]]) -> None:
    """Whether the plan fits (its margin, the headroom warning), or by how much not and what would (`hints`)."""
    if e.fits:
        how = "" if b is None else f": {b.fit_margin_gib:.1f} GiB to spare, fit {b.fit_confidence}"
        console.print(f"[green]fits in memory{how}[/]")
        if tight := ctx.headroom_warning(e):
            say(console, f"[yellow]warning:[/] {tight}")
        return
    none = " no single change of recompute, ZeRO, mbs, tp, pp or cp on these GPUs; use more GPUs or a shorter --seq-len"
    over = (e.memory.total - e.memory_capacity_bytes) / GIB
    say(console, f"[red]does not fit: {over:.1f} GiB over[/]; what would fit:{'' if hints else none}")
    for c, g in hints:
        say(console, f"  {c} -> {g:.1f} GiB", indent=4, markup=False)
