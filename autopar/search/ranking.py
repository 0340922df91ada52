"""Ranked plans: the order (``rank``: speed, then within TIE_BAND simplicity and the Pareto
front) and the lazily built sequence a search returns (``RankedPlans``).

Ranking: by tokens/s; plans within TIE_BAND (0.5%) of the fastest are ordered by
simplicity, those on the Pareto front of (tokens/s, memory) first, so the
recommended plan is never beaten on both speed and memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, TypeVar, overload

from autopar.cost.memo import Memo
from autopar.cost.memory import memory_breakdown
from autopar.cost.step import Estimate, timed_estimate
from autopar.spec.plan import RECOMPUTE, Plan

__all__ = ["TIE_BAND", "Candidate", "RankedPlans", "dominated", "rank", "simplicity"]

TIE_BAND = 0.005  # plans within 0.5% of the fastest rank as equal; the simpler one first


class Candidate(NamedTuple):
    """A timed plan, before its Estimate is built."""

    tokens_per_s: float  # whole job
    memory_bytes: float  # peak on the worst GPU
    plan: Plan


class RankedPlans(Sequence[Estimate]):
    """Ranked plans, best first. Each Estimate is built when first read, by the functions estimate()
    uses (a search times ~10^5 plans and shows a few); ``candidates`` has every plan's figures.

    A pruned search (search/planner.py) ranks exactly only its first `exact` plans, every plan at least
    as fast as its threshold; reading past them, the length or ``candidates`` first completes the
    ranking with `complete` (the unpruned search, whose first `exact` plans are the same)."""

    def __init__(
        self, memo: Memo, candidates: list[Candidate], *, exact: int | None = None, complete: Callable[[], list[Candidate]] | None = None
    ) -> None:
        self._memo = memo
        self._candidates: tuple[Candidate, ...] = tuple(candidates)
        self._exact = len(self._candidates) if exact is None or complete is None else exact
        self._complete = complete if self._exact < len(self._candidates) else None
        self._built: dict[int, Estimate] = {}

    @property
    def exact(self) -> int:
        """How many leading plans are ranked without completing the ranking."""
        return self._exact

    @property
    def pruned(self) -> bool:
        """Whether plans are left to time before the ranking is complete."""
        return self._complete is not None

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every ranked plan's figures, best first."""
        self._completed()
        return self._candidates

    @property
    def plans(self) -> Sequence[Plan]:
        """The ranked plans alone, read lazily (no Estimate is built)."""
        return PlanView(self)

    def plan(self, i: int) -> Plan:
        """The i-th plan, without building its Estimate."""
        if i < 0 or i >= self._exact:
            self._completed()
        return self._candidates[i].plan

    def _completed(self) -> None:
        if self._complete is not None:
            self._candidates = tuple(self._complete())
            self._exact, self._complete = len(self._candidates), None

    def __len__(self) -> int:
        self._completed()
        return len(self._candidates)

    @overload
    def __getitem__(self, i: int) -> Estimate: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Estimate, ...]: ...

    def __getitem__(self, i: int | slice) -> Estimate | tuple[Estimate, ...]:
        if isinstance(i, slice):
            if i.step in (None, 1) and (i.start or 0) >= 0 and i.stop is not None and 0 <= i.stop <= self._exact:
                return tuple(self[j] for j in range(i.start or 0, i.stop))
            return tuple(self[j] for j in range(*i.indices(len(self))))
        if i < 0 or i >= self._exact:
            self._completed()
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self._candidates):
            raise IndexError(i)
        if i not in self._built:
            plan = self._candidates[i].plan
            memo = self._memo
            self._built[i] = timed_estimate(memo, plan, memory_breakdown(memo.model, memo.job, plan, memo=memo))
        return self._built[i]


class IndexedPlans(Protocol):
    """A ranking that gives its i-th plan without building the rest (RankedPlans, advise/ties.Reranked)."""

    def __len__(self) -> int: ...

    def plan(self, i: int) -> Plan: ...


class PlanView(Sequence[Plan]):
    """The plans of a ranking, read lazily: launch.prepare takes the first its framework runs."""

    def __init__(self, ranked: IndexedPlans) -> None:
        self._ranked = ranked

    def __len__(self) -> int:
        return len(self._ranked)

    @overload
    def __getitem__(self, i: int) -> Plan: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Plan, ...]: ...

    def __getitem__(self, i: int | slice) -> Plan | tuple[Plan, ...]:
        if isinstance(i, slice):
            return tuple(self._ranked.plan(j) for j in range(*i.indices(len(self))))
        if i < 0:
            i += len(self)
            if i < 0:
                raise IndexError(i)
        return self._ranked.plan(i)  # IndexError past the end, without reading the length


class _Ranks(Protocol):
    @property
    def tokens_per_s(self) -> float: ...

    @property
    def memory_bytes(self) -> float: ...

    @property
    def plan(self) -> Plan: ...


R = TypeVar("R", bound=_Ranks)


def simplicity(plan: Plan) -> tuple[int, ...]:
    """Smaller is simpler: fewer stages, no interleaving, no CP, less TP, default ZeRO-1, less recompute."""
    return (plan.pp, plan.vpp, plan.cp, plan.tp, plan.zero != 1, RECOMPUTE.index(plan.recompute), plan.mbs)


def dominated(plans: Sequence[_Ranks]) -> set[int]:
    """Indices of the plans another beats on both axes: at least as fast and as lean, and better on one."""
    order = sorted(range(len(plans)), key=lambda i: (plans[i].memory_bytes, -plans[i].tokens_per_s))
    out: set[int] = set()
    best_tps, best_mem = float("-inf"), float("nan")
    for i in order:
        e = plans[i]
        if e.tokens_per_s < best_tps or (e.tokens_per_s == best_tps and e.memory_bytes > best_mem):
            out.add(i)
        elif e.tokens_per_s > best_tps:
            best_tps, best_mem = e.tokens_per_s, e.memory_bytes
    return out


def rank(plans: Sequence[R]) -> list[R]:
    """Best first: the plans within TIE_BAND of the fastest by (dominated, simplicity), then the rest by tokens/s."""
    if not plans:
        return []
    by_speed = sorted(plans, key=lambda e: -e.tokens_per_s)
    floor = by_speed[0].tokens_per_s * (1 - TIE_BAND)
    band = [e for e in by_speed if e.tokens_per_s >= floor]
    beaten = dominated(by_speed)
    order = sorted(range(len(band)), key=lambda i: (i in beaten, simplicity(band[i].plan)))
    return [band[i] for i in order] + by_speed[len(band) :]
