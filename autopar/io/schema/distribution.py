"""A length distribution YAML/JSON (autopar/io/distributions.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from autopar.io.schema.fields import (
    Count,
    Median,
    Sigma,
    Tokens,
    Weight,
    _Strict,
)
from autopar.spec import limits as lim


class LognormalFile(_Strict):
    median: Median
    sigma: Sigma
    max: Tokens
    min: Tokens = 1


Lengths = Annotated[list[Tokens], Field(max_length=lim.MAX_HISTOGRAM_BINS + 1)]
Counts = Annotated[list[Count], Field(max_length=lim.MAX_HISTOGRAM_BINS)]


class ComponentFile(_Strict):
    """A histogram (bin_edges and counts) or a clipped lognormal."""

    bin_edges: Lengths | None = None
    counts: Counts | None = None
    lognormal: LognormalFile | None = None


class MixtureEntry(ComponentFile):
    weight: Weight


class DistFile(ComponentFile):
    """A length distribution YAML/JSON: one component, or a mixture of them."""

    name: str | None = None
    source: str | None = None
    description: str | None = None
    mixture: Annotated[list[MixtureEntry], Field(min_length=1, max_length=1000)] | None = None
