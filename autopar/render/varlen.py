"""Rendering of the variable-length answers: strategy tables, per-rank load charts, JSON."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from autopar import varlen
from autopar.advise.varlen import VarlenCandidate, VarlenExplained, VarlenSuggestion
from autopar.render.report import context_dict, plan_dict, plan_label

NAMES = {"naive": "fixed CP, naive packing", "balanced": "fixed CP, balanced packing", "dynamic_cp": "dynamic CP",
         "flexible": "flexible DP x CP pool"}
SHORT = {"naive": "naive", "balanced": "balanced", "dynamic_cp": "dynamic CP", "flexible": "flex pool"}
SPARK = " ▁▂▃▄▅▆▇█"


def _strategy_dict(r: varlen.StrategyResult) -> dict[str, Any]:
    return {"step_time_mean_s": r.step_time_mean_s, "step_time_p95_s": r.step_time_p95_s, "tokens_per_s": r.tokens_per_s,
            "imbalance": r.imbalance_mean, "pipeline_stall_frac": r.stall_frac_mean, "bubble_frac": r.bubble_frac_mean,
            "longest_fit_tokens": r.longest_fit_tokens, "fits": r.fits, "mean_cp_group": r.mean_group_size,
            "steps": r.steps}


def _plan_doc(p: VarlenCandidate, strategy: str, gpus: int) -> dict[str, Any]:
    chosen = p.results[strategy]
    doc = plan_dict(p.estimate)
    doc.update(step_time_s=chosen.step_time_mean_s, tokens_per_s=chosen.tokens_per_s,
               tokens_per_s_per_gpu=chosen.tokens_per_s / gpus, max_tokens_per_rank=p.max_tokens_per_rank,
               strategies={k: _strategy_dict(v) for k, v in p.results.items()})
    # model FLOP rates and MFU stay those of the packed fixed-length estimate (uniform lengths)
    return doc


def suggestion_json(v: VarlenSuggestion, top: int) -> str:
    gpus = v.fixed.ctx.job.gpus
    plans = [_plan_doc(p, v.strategy, gpus) for p in v.plans[:top]]
    fixed_best = v.fixed.result.ranked[0].plan
    doc = {**context_dict(v.fixed.ctx), **plans[0], "seq_len_dist": v.dist.source, "strategy": v.strategy,
           "sequences_per_step": v.sequences_per_step, "mean_len": v.dist.mean_len, "max_len": v.dist.max_len,
           "fixed_length_recommendation": {"dp": fixed_best.dp, "tp": fixed_best.tp, "pp": fixed_best.pp, "cp": fixed_best.cp},
           "plans": plans}
    return json.dumps(doc, indent=2)


def render_suggestion(console: Console, v: VarlenSuggestion, top: int) -> None:
    ctx = v.fixed.ctx
    console.print(f"[bold]{ctx.model.name}[/] on {ctx.job.gpus} x {ctx.hw.gpu_name}; hardware: {ctx.hw.name} — {ctx.hw_reason}")
    console.print(f"lengths: {v.dist.source}: mean {v.dist.mean_len:,.0f}, max {v.dist.max_len:,} tokens; "
                  f"{v.sequences_per_step:,} sequences per step, packed into {ctx.job.seq_len:,}-token micro-batches")
    console.print(f"{len(v.plans)} leading layouts of the fixed-length search simulated under four strategies; "
                  f"ranked by [bold]{NAMES[v.strategy]}[/]")
    table = Table(title="tokens/s by strategy (mean over sampled steps)")
    table.add_column("#", justify="right")
    table.add_column("plan")
    for name in varlen.STRATEGIES:
        table.add_column(SHORT[name], justify="right")
    for col in ("imbalance", "PP stall", "longest fits", "mem GiB"):
        table.add_column(col, justify="right")
    for i, p in enumerate(v.plans[:top], 1):
        chosen = p.results[v.strategy]
        cells = [f"{p.results[n].tokens_per_s:,.0f}" + ("" if p.results[n].fits else " ✗") for n in varlen.STRATEGIES]
        table.add_row(str(i), plan_label(p.estimate), *cells, f"{chosen.imbalance_mean:.3f}", f"{chosen.stall_frac_mean:.1%}",
                      f"{chosen.longest_fit_tokens:,}", f"{p.estimate.memory.total / 2**30:.1f}")
    console.print(table)
    best, fixed_best = v.plans[0], v.fixed.result.ranked[0]
    r = best.results[v.strategy]
    console.print(f"[bold green]recommended ({NAMES[v.strategy]}):[/] {plan_label(best.estimate)}, mbs {best.estimate.plan.mbs}: "
                  f"{r.tokens_per_s:,.0f} tokens/s, step {r.step_time_mean_s:.2f} s (p95 {r.step_time_p95_s:.2f} s), "
                  f"imbalance {r.imbalance_mean:.3f}, {r.tokens_per_s / best.results['naive'].tokens_per_s:.2f}x naive packing")
    same = (best.estimate.plan.dp, best.estimate.plan.cp, best.estimate.plan.pp, best.estimate.plan.tp) == (
        fixed_best.plan.dp, fixed_best.plan.cp, fixed_best.plan.pp, fixed_best.plan.tp)
    note = "the same layout" if same else "a different layout"
    console.print(f"fixed-length answer (every micro-batch a full {ctx.job.seq_len:,} tokens): {plan_label(fixed_best)}; "
                  f"the length distribution picks {note}.")
    console.print("naive/balanced: fixed CP sized for the longest sequence, packing in order / longest-first by cost; "
                  "dynamic CP: CP group per sequence; flex pool: one DP x CP pool scheduled per step. "
                  "✗: cannot run the longest sequence in this plan's memory.")


def _spark(values: list[float], width: int = 64) -> str:
    if not values:
        return ""
    ordered = sorted(values, reverse=True)
    if len(ordered) > width:
        step = len(ordered) / width
        ordered = [ordered[int(i * step)] for i in range(width)]
    top = ordered[0] or 1.0
    return "".join(SPARK[max(1, round(v / top * (len(SPARK) - 1)))] for v in ordered)


def render_explained(console: Console, x: VarlenExplained) -> None:
    p = x.plan
    console.print(f"lengths: {x.dist.source}: mean {x.dist.mean_len:,.0f}, max {x.dist.max_len:,}; {x.sequences_per_step:,} "
                  f"sequences per step; plan {plan_label(p.estimate)}, room {p.max_tokens_per_rank:,} tokens per GPU per micro-batch")
    table = Table(title="expected step under each strategy")
    for col in ("strategy", "step s", "p95 s", "tokens/s", "imbalance", "PP stall", "bubble", "longest fits"):
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for name in varlen.STRATEGIES:
        r = p.results[name]
        table.add_row(NAMES[name], f"{r.step_time_mean_s:.3f}", f"{r.step_time_p95_s:.3f}", f"{r.tokens_per_s:,.0f}",
                      f"{r.imbalance_mean:.3f}", f"{r.stall_frac_mean:.1%}", f"{r.bubble_frac_mean:.1%}",
                      f"{r.longest_fit_tokens:,}" + ("" if r.fits else " ✗"))
    console.print(table)
    console.print("per-rank load in one sampled step (ranks sorted, bar height = pipeline seconds / slowest rank):")
    for name in varlen.STRATEGIES:
        loads = x.rank_loads[name]
        mean = sum(loads) / len(loads) if loads else 0.0
        worst = max(loads) if loads else 0.0
        console.print(f"  {NAMES[name]:27} {_spark(loads)}  max/mean {worst / mean if mean else 1:.3f}")


def explained_json(x: VarlenExplained) -> str:
    doc = {**context_dict(x.ctx), **_plan_doc(x.plan, "naive", x.ctx.job.gpus), "seq_len_dist": x.dist.source,
           "sequences_per_step": x.sequences_per_step, "rank_loads_s": x.rank_loads}
    return json.dumps(doc, indent=2)
