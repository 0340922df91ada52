"""The --seq-len-dist branch of suggest and estimate, one function for both (:func:`answer`): read the length
distribution, rank or explain under it, launch the best plan with the strategy's words, print."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autopar.cli.options import DEFAULT_VARLEN_STRATEGY
from autopar.cli.run import console
from autopar.errors import SpecError

if TYPE_CHECKING:
    from rich.console import Console

    from autopar.advise.launch import LaunchRequest
    from autopar.advise.train import Context, Estimate, Explained
    from autopar.spec.distribution import LengthDist
    from autopar.spec.plan import Plan


def checked_strategy(strategy: str | None, seq_len_dist: str | None) -> str:
    """--varlen-strategy (default megatron_dynamic_cp); refused without the --seq-len-dist whose plans it ranks."""
    if strategy is not None and seq_len_dist is None:
        raise SpecError("--varlen-strategy needs --seq-len-dist (it ranks the plans of a length distribution)")
    return DEFAULT_VARLEN_STRATEGY if strategy is None else strategy


@dataclass(frozen=True, slots=True, kw_only=True)
class Varlen:
    """What suggest or estimate found under a length distribution, for the launch and the printing they share."""

    ctx: Context  # the packed job the launch runs
    best: Estimate  # the plan launched
    plans: Plan | list[Plan]  # the plans the launch chooses from, best first
    as_json: Callable[[dict[str, Any]], str]  # the --json document, given the launch's part of it
    render: Callable[[Console], None]  # the text answer, without the launch
    fits: bool  # whether the plan fits (estimate exits 1 when it does not)


def answer(
    ctx: Context, want: LaunchRequest | None, *, seq_len_dist: str, strategy: str, json_out: bool, find: Callable[[LengthDist], Varlen]
) -> bool:
    """The --seq-len-dist branch of suggest and estimate: read the distribution, let `find` rank or explain
    under it, launch its best plan with the strategy's words, print; whether the plan fits."""
    from autopar.advise import launch
    from autopar.advise import varlen as advise_varlen
    from autopar.render import report
    from autopar.render.text import say

    dist = advise_varlen.load(seq_len_dist, ctx.model.max_seq_len, ctx.model.name)
    found = find(dist)
    extra, note = advise_varlen.launch_args(want, strategy, found.best, found.ctx.job)
    launched = launch.prepare(want, found.ctx, found.plans, extra_args=extra)
    if json_out:
        print(found.as_json({**report.launch_dict(launched), **({"launch_note": note} if note else {})}))
    else:
        found.render(console())
        if launched is not None:
            report.render_launch(console(), launched)
            say(console(), f"launch: {note}", markup=False)
    return found.fits


def ranked(ctx: Context, dist: LengthDist, *, sequences: int | None, strategy: str, top: int) -> Varlen:
    """suggest --seq-len-dist: the plans ranked under the distribution."""
    from autopar.advise import varlen as advise_varlen
    from autopar.render import varlen as report_varlen

    result = advise_varlen.suggest_varlen(ctx, dist, sequences=sequences, strategy=strategy)
    return Varlen(
        ctx=result.fixed.ctx,
        best=result.plans[0].estimate,
        plans=[p.estimate.plan for p in result.plans],
        as_json=lambda launch: report_varlen.suggestion_json(result, top, launch=launch),
        render=lambda out: report_varlen.render_suggestion(out, result, top),
        fits=True,
    )


def explained(
    ctx: Context, dist: LengthDist, explain_for: Callable[[Context], Explained], *, sequences: int | None, strategy: str
) -> Varlen:
    """estimate --seq-len-dist: the one plan under the distribution."""
    from autopar.advise import varlen as advise_varlen
    from autopar.render import varlen as report_varlen

    explained = advise_varlen.explain_varlen(ctx, dist, explain_for, sequences=sequences, strategy=strategy)
    est = explained.plan.estimate
    return Varlen(
        ctx=explained.ctx,
        best=est,
        plans=est.plan,
        as_json=lambda launch: report_varlen.explained_json(explained, launch=launch),
        render=lambda out: report_varlen.render_explained(out, explained),
        fits=est.fits,
    )
