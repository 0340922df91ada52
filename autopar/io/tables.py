"""The tables autopar ships and reads itself, as pydantic models (the file formats users give are in schema/).

- the error model, ``autopar/data/error_model.yaml`` (or $AUTOPAR_ERROR_MODEL),
  written by benchmarks/error_model.py and read by :mod:`autopar.io.error_model`;
- the published variable-length setups, ``examples/seqlen/papers.yaml``, read by
  :mod:`autopar.advise.papers`.

They share schema/fields.py's rules: unknown keys refused, every number bounded, ints
may be written as integral floats, and :func:`autopar.io.schema.validate` says
the first problem in one line naming the file and the field. Checks across
fields (a band needs ``min_rows`` rows, p10 <= p90) stay with the loader.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from autopar.io.schema.fields import _I, Text, Version, _int, _Strict
from autopar.spec import limits as lim
from autopar.spec.error_model import METRICS

__all__ = ["ERROR_MODEL_VERSION", "BandEntry", "ErrorModelFile", "PaperSetupFile"]

ERROR_MODEL_VERSION = 1
MAX_ROWS = 10**6  # rows of one class
MAX_MIN_ROWS = 1000  # rows a class needs for a band


def _as_float(value: Any) -> Any:
    """An int as the float it stands for (messages then show -1.0, as for a number written so); a number too
    large for a float is infinite (refused as not finite); anything else is left for the type check."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return math.inf
    return value


Positive = Annotated[float, Field(gt=0, allow_inf_nan=False), BeforeValidator(_as_float)]

# --- the error model ---------------------------------------------------------------------------------------


class BandEntry(_Strict):
    """One class of one metric: its rows and, with at least min_rows of them, the band (spec/error_model.Band)."""

    name: Text = Field(alias="class")  # "all", or up to one word per level of the metric (checked by the loader)
    rows: Annotated[int, _int(1, MAX_ROWS), _I]
    # the sources they come from (at most rows, checked by the loader); absent: each row its own
    sources: Annotated[int, _int(1, MAX_ROWS), _I] | None = None
    p10: Positive | None = None  # 10th percentile of measured / predicted; required with min_rows rows of min_sources
    p90: Positive | None = None  # 90th percentile


Bands = list[BandEntry]


class ErrorSources(_Strict):
    """Where each metric's rows come from, one line each."""

    tokens_per_s: Text
    memory: Text
    ttft: Text
    tpot: Text


class ErrorClasses(_Strict):
    """Each metric's classes, in the file's order."""

    tokens_per_s: Bands
    memory: Bands
    ttft: Bands
    tpot: Bands


assert tuple(ErrorSources.model_fields) == METRICS and tuple(ErrorClasses.model_fields) == METRICS


class ErrorModelFile(_Strict):
    """autopar/data/error_model.yaml: per-class bands of measured / predicted (spec/error_model.py)."""

    schema_version: Version
    command: Text  # the command that wrote the file
    min_rows: Annotated[int, _int(1, MAX_MIN_ROWS), _I]
    min_sources: Annotated[int, _int(1, MAX_MIN_ROWS), _I] = 1  # sources a class's rows need for a band
    sources: ErrorSources
    classes: ErrorClasses

    @field_validator("schema_version")
    @classmethod
    def _known(cls, value: int) -> int:
        if value != ERROR_MODEL_VERSION:
            raise ValueError(f"must be {ERROR_MODEL_VERSION}, got {value}")
        return value


# --- the published variable-length setups ------------------------------------------------------------------


class PaperPlan(_Strict):
    """The fixed plan the paper ran (the rest as `estimate` defaults it)."""

    tp: Annotated[int, _int(1, lim.MAX_GPUS), _I]
    pp: Annotated[int, _int(1, lim.MAX_GPUS), _I]
    cp: Annotated[int, _int(1, lim.MAX_GPUS), _I]
    recompute: Text


class PaperSetupFile(_Strict):
    """One setup of examples/seqlen/papers.yaml; paths are relative to the repository root."""

    title: Text  # what the paper ran
    source: Text  # where its figures are
    model: Text  # a model spec path
    hardware: Text  # a profile name
    gpus: Annotated[int, _int(1, lim.MAX_GPUS), _I]
    plan: PaperPlan
    lengths: Text  # a length-distribution path
    sequences_per_step: Annotated[int, _int(1, lim.MAX_BATCH), _I]
    speedups: dict[str, Positive]  # strategy -> the paper's throughput over its naive baseline
