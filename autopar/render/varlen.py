"""Rendering of the variable-length answers: strategy tables, per-rank load charts, JSON.

Tables fit 80 columns: the plan table shows the strategy asked for beside the
naive baseline; the strategy table (one plan, every strategy) follows it.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from autopar import varlen
from autopar.advise.bands import TrainingBands
from autopar.advise.train import Context
from autopar.advise.varlen import VarlenCandidate, VarlenExplained, VarlenSuggestion
from autopar.render.answer import checked, dumps
from autopar.render.labels import figure, plan_label
from autopar.render.report import bands_dict, context_dict, fit_lines, plan_dict
from autopar.render.text import say, table

SPARK = " ▁▂▃▄▅▆▇█"
# The tokens/s band of a --seq-len-dist answer: the plan's training class, measured on fixed-length rows
BAND_NOTE = "tokens/s band set on fixed-length rows, applied to the simulated tokens/s"


def strategy_dict(r: varlen.StrategyResult, mfu: float) -> dict[str, Any]:
    info = varlen.STRATEGY_INFO[r.strategy]
    return {
        "tokens_per_s": r.tokens_per_s,
        "mfu": mfu,
        "step_time_mean_s": r.step_time_mean_s,
        "step_time_p50_s": r.step_time_p50_s,
        "step_time_p90_s": r.step_time_p90_s,
        "step_time_p99_s": r.step_time_p99_s,
        "imbalance": r.imbalance_mean,
        "pipeline_stall_frac": r.stall_frac_mean,
        "bubble_frac": r.bubble_frac_mean,
        "overhead_frac": r.overhead_frac_mean,
        "token_room": r.token_room,
        "longest_fit_tokens": r.longest_fit_tokens,
        "fits": r.fits,
        "mean_cp_group": r.mean_group_size,
        "steps": r.steps,
        "models": info.models,
        "megatron_flag": info.megatron_flag or None,
        "launchable": info.launchable,
    }


def _plan_doc(p: VarlenCandidate, strategy: str, gpus: int, bands: TrainingBands) -> dict[str, Any]:
    chosen = p.results[strategy]
    doc = plan_dict(p.estimate)
    naive = p.results["naive"].tokens_per_s
    doc.update(
        strategy=strategy,
        step_time_s=chosen.step_time_mean_s,
        tokens_per_s=chosen.tokens_per_s,
        tokens_per_s_per_gpu=chosen.tokens_per_s / gpus,
        mfu=p.mfu[strategy],
        model_tflops_per_gpu=p.estimate.model_tflops_per_gpu * p.mfu[strategy] / p.estimate.mfu if p.estimate.mfu > 0 else 0.0,
        speedup_over_naive=chosen.tokens_per_s / naive,
        max_tokens_per_rank=p.max_tokens_per_rank,
        strategies={k: strategy_dict(v, p.mfu[k]) for k, v in p.results.items()},
    )
    doc.update(bands_dict(bands), error_band_note=BAND_NOTE)
    return doc


def suggestion_dict(v: VarlenSuggestion, top: int, launch: dict[str, Any] | None = None) -> dict[str, Any]:
    gpus = v.fixed.ctx.job.gpus
    plans = [_plan_doc(p, v.strategy, gpus, v.bands(p)) for p in v.plans[:top]]
    fixed_best = v.fixed.result.ranked[0].plan
    doc = {
        **context_dict(v.fixed.ctx),
        **plans[0],
        "seq_len_dist": v.dist.source,
        "strategy": v.strategy,
        "sequences_per_step": v.sequences_per_step,
        "mean_len": v.dist.mean_len,
        "max_len": v.dist.max_len,
        "fixed_length_recommendation": {"dp": fixed_best.dp, "tp": fixed_best.tp, "pp": fixed_best.pp, "cp": fixed_best.cp},
        "plans": plans,
        **(launch or {}),
    }
    return doc


def suggestion_json(v: VarlenSuggestion, top: int, launch: dict[str, Any] | None = None) -> str:
    return dumps(suggestion_dict(v, top, launch))


def _rows(console: Console, p: VarlenCandidate, chosen: str) -> None:
    """Every strategy on one plan: tokens/s, speed-up, MFU, imbalance, step-time percentiles."""
    t = table(
        "strategy",
        "tok/s",
        "x",
        "MFU",
        "imbal",
        "p50 s",
        "p90 s",
        "p99 s",
        left=("strategy",),
        wrap=("strategy",),
        title=f"{plan_label(p.estimate)}: every strategy (x: over naive)",
    )
    naive = p.results["naive"].tokens_per_s
    for name, r in p.results.items():
        label = varlen.STRATEGY_INFO[name].label + (" *" if name == chosen else "") + ("" if r.fits else " ✗")
        t.add_row(
            label,
            f"{r.tokens_per_s:,.0f}",
            f"{r.tokens_per_s / naive:.2f}",
            f"{p.mfu[name]:.1%}",
            f"{r.imbalance_mean:.2f}",
            f"{r.step_time_p50_s:.3g}",
            f"{r.step_time_p90_s:.3g}",
            f"{r.step_time_p99_s:.3g}",
        )
    console.print(t)


def launch_note(strategy: str) -> str:
    """What --emit can and cannot carry of the strategy."""
    info = varlen.STRATEGY_INFO[strategy]
    if info.megatron_flag:
        return f"--emit megatron adds {info.megatron_flag} (pp = 1 only at the pinned Megatron-LM)"
    if strategy == "naive":
        return "--emit gives the fixed plan; Megatron-LM packs in order, as naive does"
    return f"{info.label} is not launchable with Megatron-LM as pinned: --emit gives the fixed plan, which runs as naive"


def _head(console: Console, ctx: Context) -> None:
    """The model, GPUs, hardware and stack lines that suggest and estimate both open with."""
    say(console, f"[bold]{ctx.model.name}[/] on {ctx.job.gpus} x {ctx.hw.gpu_name}; hardware: {ctx.hw.name} — {ctx.hw_reason}")
    say(console, f"stack: {ctx.stack.label} — {ctx.stack_reason}")


def render_suggestion(console: Console, v: VarlenSuggestion, top: int) -> None:
    checked(suggestion_dict(v, top))
    ctx = v.fixed.ctx
    info = varlen.STRATEGY_INFO[v.strategy]
    _head(console, ctx)
    say(
        console,
        f"lengths: {v.dist.source}: mean {v.dist.mean_len:,.0f}, max {v.dist.max_len:,} tokens; "
        f"{v.sequences_per_step:,} sequences per step, window {ctx.job.seq_len:,} tokens",
    )
    say(console, f"{len(v.plans)} leading layouts of the fixed-length search, ranked by [bold]{info.label}[/]: {info.models}")
    t = table(
        "#", "plan", "naive", info.label, "x", "imbal", "GiB", left=("plan",), wrap=("plan",), title="tokens/s under the strategy asked for"
    )
    for i, p in enumerate(v.plans[:top], 1):
        r, naive = p.results[v.strategy], p.results["naive"]
        t.add_row(
            str(i),
            plan_label(p.estimate),
            f"{naive.tokens_per_s:,.0f}",
            figure(r.tokens_per_s, v.bands(p).tokens_per_s, column=True),
            f"{r.tokens_per_s / naive.tokens_per_s:.2f}",
            f"{r.imbalance_mean:.2f}",
            f"{p.estimate.memory.total / 2**30:.1f}",
        )
    console.print(t)
    best, fixed_best = v.plans[0], v.fixed.result.ranked[0]
    r, b = best.results[v.strategy], v.bands(best)
    band_line(console, b)
    say(
        console,
        f"[bold green]recommended ({info.label}):[/] {plan_label(best.estimate)}, mbs "
        f"{best.estimate.plan.mbs}: {figure(r.tokens_per_s, b.tokens_per_s)} tokens/s, MFU "
        f"{best.mfu[v.strategy]:.1%}, step {r.step_time_mean_s:.3g} s (p99 {r.step_time_p99_s:.3g} s)",
    )
    _rows(console, best, v.strategy)
    same = (best.estimate.plan.dp, best.estimate.plan.cp, best.estimate.plan.pp, best.estimate.plan.tp) == (
        fixed_best.plan.dp,
        fixed_best.plan.cp,
        fixed_best.plan.pp,
        fixed_best.plan.tp,
    )
    say(
        console,
        f"fixed-length answer: {plan_label(fixed_best)}; the length distribution picks "
        f"{'the same layout' if same else 'a different layout'}.",
    )
    say(console, f"{launch_note(v.strategy)}.", markup=False)
    say(console, "*: ranked by; ✗: cannot run the longest sequence in this plan's memory.")


def band_line(console: Console, b: TrainingBands) -> None:
    """The classes the bands come from, and that the tokens/s one was measured at fixed lengths."""
    say(
        console,
        f"error bands (p10-p90 of measured/predicted on held-out rows): tokens/s {b.speed.note()}; memory {b.memory.note()}; {BAND_NOTE}",
        markup=False,
    )


def _spark(values: list[float], width: int = 48) -> str:
    if not values:
        return ""
    ordered = sorted(values, reverse=True)
    if len(ordered) > width:
        step = len(ordered) / width
        ordered = [ordered[int(i * step)] for i in range(width)]
    top = ordered[0] or 1.0
    return "".join(SPARK[max(1, round(v / top * (len(SPARK) - 1)))] for v in ordered)


def render_explained(console: Console, x: VarlenExplained) -> None:
    checked(explained_dict(x))
    p = x.plan
    r = p.results[x.strategy]
    info = varlen.STRATEGY_INFO[x.strategy]
    _head(console, x.ctx)  # the header suggest prints (issue 25: estimate dropped it)
    say(
        console,
        f"lengths: {x.dist.source}: mean {x.dist.mean_len:,.0f}, max {x.dist.max_len:,}; {x.sequences_per_step:,} sequences per step",
    )
    say(console, f"plan: {plan_label(p.estimate)}, room {p.max_tokens_per_rank:,} tokens per GPU per micro-batch")
    say(
        console,
        f"[bold]{info.label}[/]: {figure(r.tokens_per_s, x.bands.tokens_per_s)} tokens/s, MFU "
        f"{p.mfu[x.strategy]:.1%}, step "
        f"{r.step_time_mean_s:.3g} s (p50 {r.step_time_p50_s:.3g}, p90 {r.step_time_p90_s:.3g}, p99 "
        f"{r.step_time_p99_s:.3g}), imbalance {r.imbalance_mean:.3f}",
    )
    band_line(console, x.bands)
    _rows(console, p, x.strategy)
    say(console, "per-rank load in one sampled step (sorted; height = pipeline seconds / slowest):")
    for name in varlen.STRATEGIES:
        loads = x.rank_loads[name]
        mean = sum(loads) / len(loads) if loads else 0.0
        worst = max(loads) if loads else 0.0
        console.print(f"  {varlen.STRATEGY_INFO[name].label:15} {_spark(loads)} {worst / mean if mean else 1:.2f}")
    fit_lines(console, x.ctx, p.estimate, x.bands, x.hints)
    say(console, launch_note(x.strategy) + ".", markup=False)


def explained_dict(x: VarlenExplained, launch: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        **context_dict(x.ctx),
        **_plan_doc(x.plan, x.strategy, x.ctx.job.gpus, x.bands),
        "seq_len_dist": x.dist.source,
        "sequences_per_step": x.sequences_per_step,
        "rank_loads_s": x.rank_loads,
        **(launch or {}),
    }


def explained_json(x: VarlenExplained, launch: dict[str, Any] | None = None) -> str:
    return dumps(explained_dict(x, launch))
