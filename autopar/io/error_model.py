"""Reading the error model (autopar/data/error_model.yaml, or the file AUTOPAR_ERROR_MODEL names).

The file is written by benchmarks/error_model.py and never edited by hand, so
everything is checked: a corrupt or hand-edited file is refused with one line
naming the file and the field (exit 2), before any figure is printed. Its format
is the pydantic model ErrorModelFile (io/tables.py); pydantic is imported only
when a file is read.
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from autopar.errors import SpecError
from autopar.io.cache import builtin
from autopar.io.reading import load_mapping, named, shown
from autopar.spec.error_model import COARSEST, LEVELS, METRICS, Band, ErrorModel

if TYPE_CHECKING:
    from autopar.io.tables import BandEntry

ENV = "AUTOPAR_ERROR_MODEL"  # a file to read instead of the built-in one


def error_model() -> ErrorModel:
    """The error model in use: $AUTOPAR_ERROR_MODEL, else the built-in file (read once per process)."""
    override = os.environ.get(ENV)
    if override:
        return read_error_model(Path(override))
    return _builtin()


@functools.lru_cache(maxsize=1)
def _builtin() -> ErrorModel:
    return builtin("error_model", "error_model", ErrorModel, _shipped)


def _shipped() -> ErrorModel:
    with resources.as_file(resources.files("autopar") / "data" / "error_model.yaml") as path:
        return read_error_model(path)


def read_error_model(path: Path) -> ErrorModel:
    """Read and check one error model file; SpecError naming the file and field on any fault."""
    from autopar.io.schema import validate
    from autopar.io.tables import ErrorModelFile

    where = named(path)
    doc = validate(ErrorModelFile, load_mapping(path), where=where, err=SpecError)
    classes = {
        metric: _classes(getattr(doc.classes, metric), metric, doc.min_rows, doc.min_sources, where=f"{where}: classes.{metric}")
        for metric in METRICS
    }
    return ErrorModel(min_rows=doc.min_rows, min_sources=doc.min_sources, classes=classes, where=where)


def _classes(entries: list[BandEntry], metric: str, min_rows: int, min_sources: int, *, where: str) -> dict[str, Band]:
    """One metric's classes as Bands; the checks across fields the file model cannot make alone."""
    out: dict[str, Band] = {}
    levels = LEVELS[metric]
    for i, e in enumerate(entries):
        at = f"{where}[{i}]"
        parts = e.name.split(" ")
        if e.name != COARSEST and (len(parts) > len(levels) or "" in parts):
            raise SpecError(f"{at}.class: must be {COARSEST!r} or up to {len(levels)} words ({' '.join(levels)}), got {shown(e.name)}")
        if e.name in out:
            raise SpecError(f"{at}.class: {shown(e.name)} is listed twice")
        sources = e.rows if e.sources is None else e.sources
        if sources > e.rows:
            raise SpecError(f"{at}.sources: {sources} sources of {e.rows} rows")
        banded = e.rows >= min_rows and sources >= min_sources
        for key, value in (("p10", e.p10), ("p90", e.p90)):
            if banded and value is None:
                raise SpecError(f"{at}.{key}: missing required field")
        if not banded and (e.p10 is not None or e.p90 is not None):
            why = (
                f"{e.rows} rows (under min_rows {min_rows})"
                if e.rows < min_rows
                else f"{sources} sources (under min_sources {min_sources})"
            )
            raise SpecError(f"{at}.p10: a class of {why} has no band")
        if e.p10 is not None and e.p90 is not None and e.p10 > e.p90:
            raise SpecError(f"{at}.p10: ({e.p10:g}) exceeds p90 ({e.p90:g})")
        out[e.name] = Band(name=e.name, rows=e.rows, sources=sources, p10=e.p10, p90=e.p90)
    return out
