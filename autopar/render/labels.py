"""How a training plan is written in one line: its layout label, the whole plan, the legend of its
notations, and a figure with its error band (the suggest and estimate tables, plots and JSON)."""

from __future__ import annotations

from collections.abc import Sequence

from autopar.advise.train import Candidate
from autopar.cost.step import Estimate
from autopar.spec.error_model import Interval


def figure(value: float, band: Interval | None, *, column: bool = False) -> str:
    """1,082 (±6%), the band's half-width over the value (--json has its two ends); in a table column
    1,082 ±6%; 1,082 without a band."""
    if band is None:
        return f"{value:,.0f}"
    return f"{value:,.0f} ±{band.spread:.0%}" if column else f"{value:,.0f} (±{band.spread:.0%})"


def plan_label(est: Estimate | Candidate) -> str:
    """The layout as the tables show it: dp8 tp4+sp pp2 vpp2 cp2(ag) ep4."""
    p = est.plan
    bits = [f"dp{p.dp}", f"tp{p.tp}" + ("+sp" if p.sp else ""), f"pp{p.pp}"]
    if p.vpp > 1:
        bits.append(f"vpp{p.vpp}")
    if p.cp > 1:
        bits.append(f"cp{p.cp}" + ("(ag)" if p.cp_comm == "allgather" else ""))
    if p.ep > 1:
        bits.append(f"ep{p.ep}")
    if p.etp > 1:
        bits.append(f"etp{p.etp}")
    return " ".join(bits)


def plan_text(est: Estimate | Candidate) -> str:
    """The whole plan in one line, as "recommended:" says it: the layout, mbs, recompute (with its modules), ZeRO."""
    p = est.plan
    return f"{plan_label(est)}, mbs {p.mbs}, recompute {p.recompute_label}, ZeRO-{p.zero}"


LEGEND = (
    ("+sp", "+sp: sequence parallelism with tp"),
    ("(ag)", "cpN(ag): context parallelism that all-gathers K/V (cpN: a ring exchange)"),
    ("vpp", "vppN: interleaved pipeline stages per rank"),
    ("etp", "etpN: expert tensor parallelism"),
)


def legend(labels: Sequence[str]) -> str | None:
    """One line explaining the plan notations that `labels` use (plan_label's), or None."""
    found = [text for mark, text in LEGEND if any(mark in label for label in labels)]
    return "; ".join(found) if found else None


def distinct_layouts(ranked: Sequence[Estimate], top: int) -> list[Estimate]:
    """The first `top` plans with distinct degrees (dp, tp, pp, cp, ep): interleaving depth, micro-batch,
    recompute and ZeRO variants of a layout already shown are left out."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for e in ranked:
        key = (e.plan.dp, e.plan.tp, e.plan.pp, e.plan.cp, e.plan.ep)
        if key not in seen:
            seen.add(key)
            out.append(e)
            if len(out) == top:
                break
    return out
