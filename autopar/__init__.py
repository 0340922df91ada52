"""autopar: a parallelism advisor for training and serving large models on many GPUs.

The command line is `autopar`; the same questions as functions (docs/python.md):
suggest, estimate, serve_suggest and serve_estimate, loaded on first use so that
`import autopar` stays cheap.
"""

from __future__ import annotations

from autopar.errors import AutoparError, InfeasibleError, OutputError, ProfileError, SpecError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms); mypy reads the name the same way
if TYPE_CHECKING:
    from typing import Any

    from autopar.api import (
        EstimateResult,
        PlanResult,
        ServeEstimateResult,
        ServePoint,
        ServeSuggestResult,
        SuggestResult,
        estimate,
        serve_estimate,
        serve_suggest,
        suggest,
    )

_API = (
    "suggest",
    "estimate",
    "serve_suggest",
    "serve_estimate",
    "SuggestResult",
    "EstimateResult",
    "PlanResult",
    "ServeSuggestResult",
    "ServeEstimateResult",
    "ServePoint",
)

__all__ = [
    "AutoparError",
    "EstimateResult",
    "InfeasibleError",
    "OutputError",
    "PlanResult",
    "ProfileError",
    "ServeEstimateResult",
    "ServePoint",
    "ServeSuggestResult",
    "SpecError",
    "SuggestResult",
    "__version__",
    "estimate",
    "serve_estimate",
    "serve_suggest",
    "suggest",
]


def version() -> str:
    """The installed distribution's version (pyproject.toml), or "unknown" when run from a tree not installed."""
    from autopar.io.installed import version as installed

    return installed()


def __getattr__(name: str) -> Any:
    if name in _API:
        from autopar import api

        return getattr(api, name)
    if name == "__version__":
        return version()
    raise AttributeError(f"module 'autopar' has no attribute {name!r}")
