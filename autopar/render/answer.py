"""The one check every answer passes before it is rendered, as text or as JSON.

An answer is the document ``--json`` prints (text output renders the same
values). Every number in it is finite; times, rates, sizes and counts are not
negative (but differences: SIGNED); MFU is at most 100% (it is stated against
the peak the job's GEMMs run against: HardwareProfile.mfu_peak).
The inputs are bounded when read (:mod:`autopar.io.schema`), so a violation is
a defect of the cost model or a corner the bounds missed: the command prints
one line saying which value broke which rule, and nothing else (exit 1).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopar.errors import AnswerError

SIGNED = frozenset({"error", "error_pct", "delta", "fit_margin_gib"})  # keys whose numbers may be negative (differences)


def _problem(key: str, value: float) -> str | None:
    if not math.isfinite(value):
        return "is not a finite number"
    if value < 0 and key not in SIGNED:
        return "is negative"
    if key == "mfu" and value > 1 + 1e-9:
        return "is above 100% of the peak"
    return None


def checked(doc: Any) -> Any:
    """`doc` itself, once every number in it passed; else AnswerError naming the first that did not."""
    stack: list[tuple[Any, str, str]] = [(doc, "", "")]
    while stack:
        value, key, path = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, str(k), f"{path}.{k}" if path else str(k)) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((v, key, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            problem = _problem(key, float(value))
            if problem is not None:
                raise AnswerError(
                    f"internal error: the answer's {path or 'value'} ({value!r}) {problem}; "
                    "nothing was printed (please report the command and its input files)"
                )
    return doc


def dumps(doc: Any) -> str:
    """The JSON text of a checked answer (never NaN or Infinity)."""
    return json.dumps(checked(doc), indent=2, allow_nan=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlotSummary:
    """What --plot wrote (the answer's "plot" key)."""

    path: Path  # the file
    plans: int  # feasible plans, as the text counts them (SearchResult.feasible)
    drawn: int  # plans timed and drawn
    pareto: int  # plans on the Pareto front
