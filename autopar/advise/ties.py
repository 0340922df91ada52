"""Ties within the model's error: a re-ranking of the search's result, not part of the search.

The search ranks by predicted tokens/s (search/ranking.py). A plan a few percent
faster "in the model" is not faster where the model's error on such plans is
larger than that, so the plans within the error band of the fastest (its
tokens/s band's half-width, spec/error_model.py Interval.spread) are ordered
again: a sure fit before a likely one before a borderline one, then by
convention: fewer pipeline stages, no interleaving of one layer per chunk,
expert parallelism rather than ZeRO-3 for an MoE model, then the search's own
simplicity (search/ranking.py). The plans past the band keep the search's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

from autopar.advise.bands import FIT_CONFIDENCE, TrainingBands
from autopar.cost.step import Estimate
from autopar.search.ranking import TIE_BAND, PlanView, RankedPlans, simplicity
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan

SCAN = 256  # plans of the search's ranking read for ties at most (each read builds an Estimate, ~0.1 ms)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ties:
    """The plans within the error band of the fastest."""

    count: int  # how many, the fastest included
    spread: float  # the band's half-width, over the fastest's tokens/s
    fastest: Estimate  # the search's first plan
    chosen: Estimate  # the first after re-ranking: the recommendation
    more: bool  # the scan stopped at SCAN plans (or at the search's exactly ranked ones): count is a floor


def convention(plan: Plan, model: ModelSpec) -> tuple[int, ...]:
    """Smaller is more conventional (see the module docstring)."""
    one_layer_chunks = plan.vpp > 1 and model.layers <= plan.pp * plan.vpp
    zero3_moe = model.moe is not None and plan.zero == 3
    return (plan.pp, int(one_layer_chunks), int(zero3_moe), *simplicity(plan))


class Reranked(Sequence[Estimate]):
    """`head` (the re-ranked band) followed by `rest[start:]`, read lazily."""

    def __init__(self, head: tuple[Estimate, ...], rest: Sequence[Estimate], start: int) -> None:
        self._head, self._rest, self._start = head, rest, start

    def __len__(self) -> int:
        return len(self._head) + len(self._rest) - self._start

    @overload
    def __getitem__(self, i: int) -> Estimate: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Estimate, ...]: ...

    def __getitem__(self, i: int | slice) -> Estimate | tuple[Estimate, ...]:
        if isinstance(i, slice):
            if i.step in (None, 1) and (i.start or 0) >= 0 and i.stop is not None and i.stop >= 0:
                return tuple(self._upto(i.start or 0, i.stop))  # without reading the rest's length
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
        if 0 <= i < len(self._head):
            return self._head[i]
        if i < 0:
            raise IndexError(i)
        return self._rest[self._start + i - len(self._head)]  # IndexError past the end

    def _upto(self, start: int, stop: int) -> list[Estimate]:
        out = []
        for j in range(start, stop):
            try:
                out.append(self[j])
            except IndexError:
                break
        return out

    @property
    def plans(self) -> Sequence[Plan]:
        """The plans alone, in this order (launch.prepare takes the first that its framework runs)."""
        return PlanView(self)

    def plan(self, i: int) -> Plan:
        if 0 <= i < len(self._head):
            return self._head[i].plan
        rest, j = self._rest, self._start + i - len(self._head)
        return rest.plan(j) if isinstance(rest, RankedPlans) else rest[j].plan


def rerank(
    ranked: Sequence[Estimate], *, bands: Callable[[Estimate], TrainingBands], model: ModelSpec, limit: int | None = None
) -> tuple[Sequence[Estimate], Ties | None]:
    """The search's ranking with its error band re-ranked, and the ties (None: one plan, or no band)."""
    try:
        fastest = ranked[0]  # not len(ranked), which completes a pruned ranking
    except IndexError:
        return ranked, None
    band = bands(fastest).tokens_per_s_per_gpu
    if band is None:
        return ranked, None
    spread = max(band.spread, TIE_BAND)
    top = fastest.tokens_per_s
    # a pruned search ranks its first `exact` plans without completing (search/ranking.py RankedPlans)
    exact = ranked.exact if isinstance(ranked, RankedPlans) else len(ranked)
    scan = min(exact, SCAN if limit is None else limit)
    tied: list[Estimate] = []
    more = True
    for i in range(scan):
        try:
            e = ranked[i]
        except IndexError:
            more = False
            break
        top = max(top, e.tokens_per_s)
        if e.tokens_per_s < top * (1 - spread):
            more = False
            break
        tied.append(e)
    if len(tied) < 2:
        return ranked, None
    fit_rank = {c: i for i, c in enumerate(FIT_CONFIDENCE)}

    def key(e: Estimate) -> tuple[object, ...]:
        return (fit_rank.get(bands(e).fit_confidence or "", len(FIT_CONFIDENCE)), convention(e.plan, model), -e.tokens_per_s)

    head = tuple(sorted(tied, key=key))
    return Reranked(head, ranked, len(tied)), Ties(count=len(tied), spread=spread, fastest=fastest, chosen=head[0], more=more)
