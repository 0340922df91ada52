"""`autopar calibrate` output: the comparison table (80 columns) and its JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autopar.calibrate.compare import Row, step_stats
from autopar.render.answer import dumps
from autopar.render.text import WIDTH, wrap

if TYPE_CHECKING:
    from autopar.calibrate.command import Calibration
    from autopar.calibrate.save import Saved


def _bytes(b: float) -> str:
    if abs(b) >= 2**20:
        return f"{b / 2**20:.3f} MiB"
    if abs(b) >= 2**10:
        return f"{b / 2**10:.2f} KiB"
    return f"{b:.0f} B"


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "B":
        return _bytes(v)
    if unit == "s":
        return f"{v * 1e3:.1f} ms"
    return f"{v:g}"


def _error(row: Row) -> str:
    err = row.error
    if err is None:
        return ""
    if row.predicted == row.measured:
        return "exact"
    return f"{err:+.1%}"


def plan_label(c: Calibration) -> str:
    p = c.plan
    bits = [p.label(), f"zero{p.zero}", "sp" if p.sp and p.tp > 1 else "", f"mbs{p.mbs}"]
    return " ".join(b for b in bits if b)


def lines(c: Calibration) -> list[str]:
    run, pred = c.run, c.prediction
    n = len(run.ranks)
    backend = "NCCL" if run.device == "cuda" else "gloo"
    out = [
        f"autopar calibrate: {c.model_name}, {plan_label(c)}",
        f"  {n} {backend} process{'es' if n > 1 else ''} on {run.device_name}, torch {run.torch_version}",
    ]
    if c.scaling.lines:
        out.append("  scaled to fit: " + "; ".join(c.scaling.lines))
    m = pred.microbatches
    out.append(
        f"  {m} micro-batch{'es' if m > 1 else ''} of {c.plan.mbs} x {c.job.seq_len} tokens per step; "
        f"{run.warmup} warm-up + {run.steps} measured steps"
    )
    out.append("")
    out.append(f"  {'':32}{'predicted':>14}{'measured':>14}{'error':>10}")
    for row in c.rows:
        out.append(f"  {row.label:32}{_value(row.predicted, row.unit):>14}{_value(row.measured, row.unit):>14}{_error(row):>10}")
    stats = step_stats(run.ranks[0].step_times_s)
    load = ", ".join(f"{x:.2f}" for x in run.load_average)
    out.append("")
    out.append(
        f"  step time: median {stats.median_s * 1e3:.1f} ms, min {stats.min_s * 1e3:.1f}, "
        f"p90 {stats.p90_s * 1e3:.1f}, CV {stats.cv:.1%}; load average {load}"
    )
    out.append(f"  step-time prediction: {pred.hardware}")
    out.append(f"  state bytes per parameter: FSDP2 (fp32 params, fp32 grads, AdamW m+v); activations: {pred.stack_saves}")
    if run.device == "cpu":
        out.append("  on CPU step times inform, they decide nothing (shared cores); bytes are exact")
    for note in run.notes:
        out.append(f"  note: {note}")
    return [t.plain for line in out for t in wrap(line, width=WIDTH, indent=4, markup=False)]


def saved_line(saved: Saved) -> str:
    c = saved.correction
    clipped = f" (clipped from {saved.raw_factor:.3f})" if abs(saved.raw_factor - c.factor) > 1e-4 else ""
    text = f"saved to {saved.path}: {c.name} = {c.factor:g}{clipped} over the fused formula; suggest and estimate apply it and say so"
    return "\n".join(t.plain for t in wrap(text, width=WIDTH, indent=2, markup=False))


def as_json(runs: tuple[Calibration, ...], saved: Saved | None = None) -> str:
    """One document: {"runs": [...], "saved": ...}, one run per --plan."""
    doc: dict[str, Any] = {"runs": [_doc(c) for c in runs]}
    if saved is not None:
        c = saved.correction
        doc["saved"] = {
            "path": str(saved.path),
            "name": c.name,
            "factor": c.factor,
            "raw_factor": saved.raw_factor,
            "stack": c.stack,
            "source": c.source,
        }
    return dumps(doc)


def _doc(c: Calibration) -> dict[str, Any]:
    run, pred = c.run, c.prediction
    stats = step_stats(run.ranks[0].step_times_s)
    doc: dict[str, Any] = {
        "model": c.model_name,
        "scaled": list(c.scaling.lines),
        "built": {
            "layers": c.model.layers,
            "hidden_size": c.model.hidden_size,
            "heads": c.model.num_attention_heads,
            "kv_heads": c.model.num_kv_heads,
            "head_dim": c.model.head_dim,
            "ffn": c.model.ffn_hidden_size,
            "vocab": c.model.vocab_size,
            "params": c.model.total_params(),
        },
        "plan": {
            "dp": c.plan.dp,
            "tp": c.plan.tp,
            "pp": c.plan.pp,
            "vpp": c.plan.vpp,
            "mbs": c.plan.mbs,
            "zero": c.plan.zero,
            "sp": c.plan.sp,
            "microbatches": pred.microbatches,
            "seq_len": c.job.seq_len,
        },
        "device": run.device,
        "device_name": run.device_name,
        "torch": run.torch_version,
        "rows": [{"key": r.key, "predicted": r.predicted, "measured": r.measured, "unit": r.unit, "error": r.error} for r in c.rows],
        "step_time": {
            "median_s": stats.median_s,
            "min_s": stats.min_s,
            "p90_s": stats.p90_s,
            "cv": stats.cv,
            "times_s": list(run.ranks[0].step_times_s),
            "load_average": list(run.load_average),
            "predicted_s": pred.step_time_s,
            "predicted_from": pred.hardware,
        },
        "ranks": [
            {
                "rank": r.rank,
                "pp_rank": r.pp_rank,
                "collective_calls": r.collective_calls,
                "collective_bytes": r.collective_bytes,
                "in_flight_chunks": r.in_flight_chunks,
                "optimizer_scalar_bytes": r.optimizer_scalar_bytes,
                "first_loss": r.first_loss,
            }
            for r in run.ranks
        ],
        "notes": list(run.notes),
    }
    return doc
