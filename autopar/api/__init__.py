"""autopar as a library: the CLI's four questions as functions returning frozen results.

    import autopar
    r = autopar.suggest("llama3-70b", gpus=64, hardware="h100-sxm")
    r.recommended.tokens_per_s_per_gpu; r.to_dict()  # == `autopar suggest ... --json`; r.to_pandas()

A front end beside the CLI: it calls the same advise/ use cases and builds `to_dict()` with the same
render functions as `--json`, so the numbers and keys are the CLI's. Bad input raises autopar.SpecError,
no plan that fits raises autopar.InfeasibleError (both autopar.AutoparError); messages name the parameter (`gpus`).
Nothing is printed. Documented in docs/python.md; the package root loads these names from here.

- results.py   the result dataclasses, built from a --json document
- training.py  suggest, estimate
- serving.py   serve_suggest, serve_estimate
"""

from __future__ import annotations

from autopar.api.results import (
    EstimateResult,
    PlanResult,
    ServeEstimateResult,
    ServePoint,
    ServeSuggestResult,
    SuggestResult,
)
from autopar.api.serving import serve_estimate, serve_suggest
from autopar.api.training import estimate, suggest

__all__ = [
    "EstimateResult",
    "PlanResult",
    "ServeEstimateResult",
    "ServePoint",
    "ServeSuggestResult",
    "SuggestResult",
    "estimate",
    "serve_estimate",
    "serve_suggest",
    "suggest",
]
