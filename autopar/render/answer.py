"""The one check every answer passes before it is rendered, as text or as JSON.

An answer is the document ``--json`` prints (text output renders the same
values). Every number in it is finite; times, rates, sizes and counts are not
negative (but differences: SIGNED); MFU is at most 100% of the peak its GEMMs
run against (:func:`mfu_ceiling`).
The inputs are bounded when read (:mod:`autopar.io.schema`), so a violation is
a defect of the cost model or a corner the bounds missed: the command prints
one line saying which value broke which rule, and nothing else (exit 1).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopar.errors import AnswerError

if TYPE_CHECKING:
    from autopar.spec.hardware import HardwareProfile

SIGNED = frozenset({"error", "error_pct", "delta", "fit_margin_gib"})  # keys whose numbers may be negative (differences)


def mfu_ceiling(hw: HardwareProfile, dtype: str) -> float:
    """The highest MFU a job of `dtype` can reach: MFU is stated against the bf16 peak, and an fp8 job's
    GEMMs run against the fp8 peak (H20: twice the bf16 one)."""
    bf16 = hw.peak_flops["bf16"]
    return max(1.0, hw.peak_flops.get(dtype, bf16) / bf16)


def _problem(key: str, value: float, mfu_max: float) -> str | None:
    if not math.isfinite(value):
        return "is not a finite number"
    if value < 0 and key not in SIGNED:
        return "is negative"
    if key == "mfu" and value > mfu_max * (1 + 1e-9):
        return f"is above {mfu_max:.0%} of the bf16 peak" if mfu_max > 1 else "is above 100% of the peak"
    return None


def checked(doc: Any, *, mfu_max: float = 1.0) -> Any:
    """`doc` itself, once every number in it passed; else AnswerError naming the first that did not."""
    stack: list[tuple[Any, str, str]] = [(doc, "", "")]
    while stack:
        value, key, path = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, str(k), f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, key, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            problem = _problem(key, float(value), mfu_max)
            if problem is not None:
                raise AnswerError(
                    f"internal error: the answer's {path or 'value'} ({value!r}) {problem}; "
                    "nothing was printed (please report the command and its input files)"
                )
    return doc


def dumps(doc: Any, *, mfu_max: float = 1.0) -> str:
    """The JSON text of a checked answer (never NaN or Infinity)."""
    return json.dumps(checked(doc, mfu_max=mfu_max), indent=2, allow_nan=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlotSummary:
    """What --plot wrote (the answer's "plot" key)."""

    path: Path  # the file
    plans: int  # feasible plans, as the text counts them (SearchResult.feasible)
    drawn: int  # plans timed and drawn
    pareto: int  # plans on the Pareto front
