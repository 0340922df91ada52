"""``suggest --gpus auto``: the fewest GPUs that fit, and throughput as the GPU count grows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autopar.advise.questions import Scaling
from autopar.render.answer import checked, dumps
from autopar.render.labels import figure, plan_label
from autopar.render.report import context_dict, plan_dict
from autopar.spec.units import GIB

if TYPE_CHECKING:
    from rich.console import Console


def scaling_doc(s: Scaling) -> dict[str, Any]:
    first = s.points[0].suggestion
    curve: list[dict[str, Any]] = []
    for p in s.points:
        best = p.suggestion.result.ranked[0]
        curve.append(
            {
                "gpus": p.gpus,
                "global_batch": p.suggestion.ctx.job.global_batch,
                "scaling_efficiency": s.efficiency(p),
                **plan_dict(best, p.suggestion.bands(best)),
            }
        )
    return {**context_dict(first.ctx), "min_gpus": s.min_gpus, "tried_gpus": list(s.tried), "curve": curve}


def scaling_json(s: Scaling) -> str:
    return dumps(scaling_doc(s))


def render_scaling(console: Console, s: Scaling) -> None:
    from autopar.render.text import say, table  # rich: a --json answer does not load it

    checked(scaling_doc(s))
    first = s.points[0].suggestion
    m, hw = first.ctx.model, first.ctx.hw
    below = f" ({', '.join(map(str, s.tried))} fit no plan)" if s.tried else ""
    say(console, f"[bold]{m.name}[/] on {hw.gpu_name}: the fewest GPUs that fit: [bold green]{s.min_gpus}[/]{below}")
    say(console, f"stack: {first.ctx.stack.label} — {first.ctx.stack_reason}")
    say(console, "best plan as the GPU count doubles (eff.: tokens/s per GPU against the fewest GPUs; total tokens/s: --json):")
    t = table("GPUs", "batch", "plan", "mbs", "recompute", "tok/s/GPU", "MFU", "GiB", "eff.", left=("plan", "recompute"), wrap=("plan",))
    runs: list[list[Any]] = []  # [first GPUs, last GPUs, the class's note] of consecutive points
    for p in s.points:
        e = p.suggestion.result.ranked[0]
        b = p.suggestion.bands(e)
        t.add_row(
            str(p.gpus),
            str(p.suggestion.ctx.job.global_batch),
            plan_label(e),
            str(e.plan.mbs),
            e.plan.recompute,
            figure(e.tokens_per_s_per_gpu, b.tokens_per_s_per_gpu, column=True),
            f"{e.mfu:.1%}",
            f"{e.memory.total / GIB:.1f}",
            f"{s.efficiency(p):.0%}",
        )
        if runs and runs[-1][2] == b.speed.note():
            runs[-1][1] = p.gpus
        else:
            runs.append([p.gpus, p.gpus, b.speed.note()])
    console.print(t)
    where = [note if len(runs) == 1 else f"{a}-{b} GPUs {note}" if a != b else f"{a} GPUs {note}" for a, b, note in runs]
    say(console, f"error bands of tok/s/GPU (p10-p90 of measured/predicted on held-out rows): {'; '.join(where)}", markup=False)
