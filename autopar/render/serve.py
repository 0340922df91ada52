"""Rendering of serving answers: rich tables for people, JSON for programs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from autopar.advise.bands import ServingBands, pair, serving_bands
from autopar.advise.serve import RULES, ServeContext, ServeSweep
from autopar.cost.serve_load import PoolEstimate, ServeEstimate
from autopar.emit.serving import ServeLaunch
from autopar.render.answer import PlotSummary, checked, dumps
from autopar.render.report import lookup_dict
from autopar.render.text import say, shell_text, table
from autopar.spec.error_model import Interval
from autopar.spec.serve import TPOT_DEFINITION, Deployment, for_deployment, kv_auto
from autopar.spec.units import GIB


def _degrees(dep: Deployment, pool: PoolEstimate) -> dict[str, Any]:
    e = pool.engine
    attention_dp = e.dp > 1
    return {"tp": e.tp, "pp": e.pp, "dp": e.dp if attention_dp else pool.replicas, "ep": e.ep, "attention_dp": attention_dp}


def layout_label(dep: Deployment) -> str:
    """tp4 x2, tp1 dp8 ep8 (attention-DP), 2P(tp4) + 1D(tp8)."""

    def one(pool_engine: Any, n: int) -> str:
        e = pool_engine
        s = f"tp{e.tp}" + (f" pp{e.pp}" if e.pp > 1 else "") + (f" adp{e.dp}" if e.dp > 1 else "")
        return s + (f" ep{e.ep}" if e.ep > 1 else "") + (f" x{n}" if n > 1 else "")

    if dep.prefill is not None:
        return f"{dep.prefill_replicas}P({one(dep.prefill, 1)}) + {dep.replicas}D({one(dep.engine, 1)})"
    return one(dep.engine, dep.replicas)


def engine_args(dep: Deployment, role: str | None) -> dict[str, Any]:
    """The launch settings the estimate used for the engines in `role` (the framework's defaults where
    --max-num-tokens, --max-batch-size or --memory-fraction is not given)."""
    fw = for_deployment(dep, role)
    out: dict[str, Any] = {"max_num_tokens": fw.chunk_tokens, "max_batch_size": fw.max_seqs, "memory_fraction": fw.memory_fraction}
    if fw.name == "sglang":  # --enable-mixed-chunk, --max-prefill-tokens (0: SGLang's own 16384), --scheduler-recv-interval
        out |= {"mixed_chunk": fw.mixed_chunk, "max_prefill_tokens": fw.max_prefill_tokens, "recv_interval": fw.recv_interval}
    # prefix caching is on by default in all three engines (--disable-prefix-cache turns it off); the Mamba
    # state dtype given (null: the checkpoint's config, MambaSpec.ssm_state_dtype)
    args = dep.args_for(role)
    return out | {"prefix_cache": args.prefix_cache is not False, "ssm_state_dtype": args.ssm_state_dtype}


def pool_dict(dep: Deployment, pool: PoolEstimate) -> dict[str, Any]:
    return {
        **_degrees(dep, pool),
        "workers": pool.replicas,
        "gpus": pool.engine.gpus * pool.replicas,
        "engine_args": engine_args(dep, pool.role),
        "kv_cache_tokens": pool.kv_cache_tokens,
        "max_concurrency": pool.max_concurrency,
        "weights_gib_per_gpu": pool.weights_gib,
        "memory_gib_per_gpu": pool.memory_gib_per_gpu,
        "fits": pool.fits,
    }


def bands_dict(b: ServingBands) -> dict[str, Any]:
    """TTFT and TPOT [p10, p90] (null: too few rows) and the classes that set them."""
    return {
        "ttft_ms_range": pair(b.ttft_ms),
        "tpot_ms_range": pair(b.tpot_ms),
        "error_classes": {"ttft": lookup_dict(b.ttft_class), "tpot": lookup_dict(b.tpot_class)},
    }


def estimate_dict(ctx: ServeContext, est: ServeEstimate) -> dict[str, Any]:
    """The DESIGN.md JSON contract of `autopar serve estimate`."""
    dep, wl = est.deployment, est.workload
    decode = est.pools[-1]
    bands = serving_bands(ctx.errors, est)
    doc: dict[str, Any] = {
        "model": ctx.model.name,
        "hardware": ctx.hw.name,
        "hardware_source": ctx.hw_reason,
        "framework": dep.framework,
        "framework_constants": est.framework_label,
        **({"framework_note": ctx.framework_note} if ctx.framework_note else {}),
        "weights": dep.weights,
        "kv_dtype": dep.kv_dtype,
        "kv_dtype_auto": kv_auto_dict(ctx),
        "gpus": dep.gpus,
        "mode": dep.mode,
        **_degrees(dep, decode),
        "concurrency": wl.concurrency,
        "isl": wl.isl,
        "osl": wl.osl,
        "ttft_ms": est.ttft_s * 1e3,
        "tpot_ms": est.tpot_s * 1e3,
        **bands_dict(bands),
        "latency_ms": est.latency_s * 1e3,
        "output_tokens_per_s": est.output_tokens_per_s,
        "output_tokens_per_s_per_gpu": est.output_tokens_per_s / dep.gpus,
        "tokens_per_s_per_user": 1.0 / est.tpot_s,
        "requests_per_s": est.requests_per_s,
        "kv_cache_tokens": decode.kv_cache_tokens,
        "max_concurrency": decode.max_concurrency,
        "memory_gib_per_gpu": max(p.memory_gib_per_gpu for p in est.pools),
        "fits": est.fits,
        "queue_saturated": est.saturated,
        "engine_args": engine_args(dep, None),
        "ttft_breakdown_ms": {k: v * 1e3 for k, v in est.ttft_parts.items()},
        "tpot_breakdown_ms": {k: v * 1e3 for k, v in est.tpot_parts.items()},
        "tpot_definition": TPOT_DEFINITION,
    }
    if dep.mode == "disagg":
        doc["prefill"] = pool_dict(dep, est.pools[0])
        doc["decode"] = pool_dict(dep, est.pools[1])
    return doc


def estimate_json(ctx: ServeContext, est: ServeEstimate, launched: ServeLaunch | None = None) -> str:
    return dumps({**estimate_dict(ctx, est), **launch_dict(launched)})


_TTFT_LABELS = {
    "prefill": "own prefill",
    "queue": "queued behind other prefills",
    "first_step": "step in progress",
    "kv_transfer": "KV transfer to decode",
    "serving": "tokens queued in the serving process",
    "overhead": "request overhead",
}
_TPOT_LABELS = {
    "weights": "weights read",
    "kv": "KV cache read",
    "compute": "compute beyond memory",
    "tp_comm": "TP all-reduce",
    "ep_comm": "EP all-to-all",
    "overhead": "host step overhead",
    "prefill_mix": "prefill interference",
}


def _breakdown(title: str, parts: dict[str, float], labels: dict[str, str]) -> Table:
    total = sum(parts.values()) or 1.0
    t = table("component", "ms", "share", title=title, left=("component",), wrap=("component",))
    for key, value in parts.items():
        if value > 0:
            t.add_row(labels[key], f"{value * 1e3:.2f}", f"{value / total:.0%}")
    return t


def kv_auto_dict(ctx: ServeContext) -> dict[str, str]:
    """What a KV dtype `auto` resolves to for this model, and why (JSON key kv_dtype_auto)."""
    dtype, why = kv_auto(ctx.model)
    return {"dtype": dtype, "source": why}


def header(console: Console, ctx: ServeContext) -> None:
    m = ctx.model
    kv = ctx.kv_dtype
    if kv == "auto":
        dtype, why = kv_auto(m)
        kv = f"auto ({dtype}, from {why})" if m.kv_dtype_default else f"auto ({dtype})"  # else: the activation dtype
    say(console, f"model: {m.name} ({m.family()}, {m.total_params() / 1e9:.1f}B params), weights {ctx.weights}, KV {kv}")
    say(console, f"hardware: {ctx.hw.name} ({ctx.hw.gpu_name}, {ctx.hw.memory_bytes / GIB:.0f} GiB) - {ctx.hw_reason}")
    if ctx.framework_note:
        say(console, f"framework: {ctx.framework_note}", markup=False)


def render_estimate(console: Console, ctx: ServeContext, est: ServeEstimate, *, with_header: bool = True) -> None:
    checked(estimate_dict(ctx, est))
    dep, wl = est.deployment, est.workload
    if with_header:
        header(console, ctx)
    say(console, f"deployment: {dep.mode} {layout_label(dep)} on {dep.gpus} GPU{'' if dep.gpus == 1 else 's'}, {est.framework_label}")
    say(console, f"workload: {wl.concurrency} request{'' if wl.concurrency == 1 else 's'} in flight, {wl.isl} in / {wl.osl} out tokens")
    b = serving_bands(ctx.errors, est)
    console.print(_breakdown(f"TTFT {est.ttft_s * 1e3:.0f} ms{_spread(b.ttft_ms)}", est.ttft_parts, _TTFT_LABELS))
    console.print(_breakdown(f"TPOT {est.tpot_s * 1e3:.1f} ms{_spread(b.tpot_ms)}", est.tpot_parts, _TPOT_LABELS))
    say(
        console,
        f"error bands (p10-p90 of measured/predicted, out of sample): TTFT {b.ttft_class.note()}; TPOT {b.tpot_class.note()}",
        markup=False,
    )
    say(
        console,
        f"throughput: {est.output_tokens_per_s:,.0f} output tokens/s, "
        f"{est.output_tokens_per_s / dep.gpus:,.0f} per GPU, {1 / est.tpot_s:.1f} tokens/s per user, "
        f"{est.requests_per_s:.2f} requests/s",
    )
    for pool in est.pools:
        say(console, f"{pool.role} engines: KV cache {pool.kv_cache_tokens:,} tokens each, holds {pool.max_concurrency:,} requests")
        say(console, f"  {pool.weights_gib:.1f} GiB weights, {pool.memory_gib_per_gpu:.1f} GiB in use per GPU")
    if not est.fits:
        say(console, "[red]does not fit: the KV cache cannot hold one request beside the weights[/]")
    elif est.saturated and kv_full(est):
        say(
            console,
            f"[yellow]queue-saturated: {wl.concurrency} requests exceed what the KV cache holds "
            f"({est.pools[-1].max_concurrency}); the surplus waits for a slot[/]",
        )
    elif est.saturated:
        say(
            console,
            "[yellow]queue-saturated: the prefill engines set the rate; the requests the decode "
            "engines do not hold wait in the prefill queue[/]",
        )
    say(console, TPOT_DEFINITION, markup=False)


def _spread(band: Interval | None) -> str:
    """' (±6%)', or nothing (too few rows)."""
    return "" if band is None else f" (±{band.spread:.0%})"


def kv_full(est: ServeEstimate) -> bool:
    """The last pool's KV cache holds all it can (rather than a prefill queue holding the surplus)."""
    pool = est.pools[-1]
    held = pool.requests_per_rank * pool.replicas * pool.engine.dp
    return est.workload.concurrency > pool.max_concurrency and held >= pool.max_concurrency * (1 - 1e-6)


def _point_row(est: ServeEstimate) -> dict[str, Any]:
    dep = est.deployment
    return {
        "layout": layout_label(dep),
        "mode": dep.mode,
        "kv_dtype": dep.kv_dtype,
        "concurrency": est.workload.concurrency,
        "ttft_ms": est.ttft_s * 1e3,
        "tpot_ms": est.tpot_s * 1e3,
        "output_tokens_per_s_per_gpu": est.output_tokens_per_s / dep.gpus,
        "tokens_per_s_per_user": 1 / est.tpot_s,
    }


def shown_front(front: tuple[ServeEstimate, ...]) -> list[dict[str, Any]]:
    """The front's table rows: of points whose tok/s/GPU and tok/s/user print alike (a 64-GPU MoE sweep has
    hundreds, disaggregated pools that differ only in TTFT), the one with the lowest TTFT, in front order."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for est in front:
        r = _point_row(est)
        key = (f"{r['output_tokens_per_s_per_gpu']:,.0f}", f"{r['tokens_per_s_per_user']:.1f}")
        if key not in rows or r["ttft_ms"] < rows[key]["ttft_ms"]:
            rows[key] = {**r, "per_gpu": key[0], "per_user": key[1]}
    return list(rows.values())


def _point_dict(ctx: ServeContext, est: ServeEstimate) -> dict[str, Any]:
    """A Pareto point for JSON: the table row, its TTFT and TPOT bands and both breakdowns."""
    b = serving_bands(ctx.errors, est)
    return {
        **_point_row(est),
        "ttft_ms_range": pair(b.ttft_ms),
        "tpot_ms_range": pair(b.tpot_ms),
        "queue_saturated": est.saturated,
        "ttft_breakdown_ms": {k: v * 1e3 for k, v in est.ttft_parts.items()},
        "tpot_breakdown_ms": {k: v * 1e3 for k, v in est.tpot_parts.items()},
    }


def suggestion_dict(
    ctx: ServeContext,
    result: ServeSweep,
    launched: ServeLaunch | None = None,
    *,
    saved: Sequence[Path] | None = None,
    plot: PlotSummary | None = None,
) -> dict[str, Any]:
    """`serve suggest --json`'s document (also the Python API's to_dict)."""
    if result.best is None:
        raise ValueError("suggestion_dict needs a recommended deployment")
    doc: dict[str, Any] = {
        "recommended": estimate_dict(ctx, result.best),
        "recommended_by": result.rule,
        "recommendation_rule": RULES[result.rule],
        "pareto": [_point_dict(ctx, p) for p in result.pareto],
        "deployments_tried": result.layouts,
        "points_priced": len(result.points) + result.skipped,
        "points_bounded": result.skipped,
        "tpot_definition": TPOT_DEFINITION,
    }
    doc["recommended"].update(launch_dict(launched))
    if saved is not None:
        doc["saved_files"] = [str(p) for p in saved]
    if plot is not None:
        doc["plot_file"] = str(plot.path)
    return doc


def suggestion_json(
    ctx: ServeContext,
    result: ServeSweep,
    launched: ServeLaunch | None = None,
    *,
    saved: Sequence[Path] | None = None,
    plot: PlotSummary | None = None,
) -> str:
    return dumps(suggestion_dict(ctx, result, launched, saved=saved, plot=plot))


def render_suggestion(console: Console, ctx: ServeContext, result: ServeSweep, *, targets: str) -> None:
    checked(suggestion_dict(ctx, result) if result.best is not None else [_point_dict(ctx, p) for p in result.pareto])
    header(console, ctx)
    say(
        console,
        f"searched {result.layouts:,} deployments on {ctx.gpus:,} GPU{'' if ctx.gpus == 1 else 's'}, "
        f"{len(result.points) + result.skipped:,} (deployment, concurrency) points fit",
    )
    say(console, f"targets: {targets}")
    say(console, "Pareto front: output tokens/s per GPU against tokens/s per user")
    if any(p.deployment.mode == "disagg" for p in result.pareto):
        say(console, "xP(engine) + yD(engine): disaggregated, x prefill and y decode engines")
    if any(p.deployment.engine.dp > 1 or (p.deployment.prefill is not None and p.deployment.prefill.dp > 1) for p in result.pareto):
        say(console, "adpN: attention data parallelism, N ranks each with its own requests and KV cache (the MoE layers span them by ep)")
    t = table("layout", "KV", "conc", "TTFT ms", "TPOT ms", "tok/s/GPU", "tok/s/user", left=("layout", "KV"), wrap=("layout",))
    shown = shown_front(result.pareto)
    for r in shown:
        t.add_row(
            r["layout"], r["kv_dtype"], str(r["concurrency"]), f"{r['ttft_ms']:.0f}", f"{r['tpot_ms']:.1f}", r["per_gpu"], r["per_user"]
        )
    console.print(t)
    if len(shown) < len(result.pareto):
        say(
            console,
            f"{len(shown)} of {len(result.pareto):,} front points: of those whose tok/s/GPU and "
            "tok/s/user print alike, the lowest TTFT (--json lists all)",
        )
    best = result.best
    if best is None:
        return
    say(
        console,
        f"recommended: {best.deployment.mode} {layout_label(best.deployment)}, KV {best.deployment.kv_dtype}, "
        f"concurrency {best.workload.concurrency} ({best.framework_label})",
    )
    say(console, f"picked by rule '{result.rule}': {RULES[result.rule]}", markup=False)
    render_estimate(console, ctx, best, with_header=False)


def launch_dict(launched: ServeLaunch | None) -> dict[str, Any]:
    if launched is None:
        return {}
    return {
        "launch": {
            "framework": launched.framework,
            "servers": list(launched.servers),
            "files": dict(launched.files),
            "benchmark": launched.benchmark,
        }
    }


def render_launch(console: Console, launched: ServeLaunch) -> None:
    say(console, f"launch ({launched.framework}) and a benchmark that reproduces the workload:", markup=False)
    console.print(shell_text(launched.text(), width=console.width), markup=False, highlight=False)
