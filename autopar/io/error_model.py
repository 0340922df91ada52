"""Reading the error model (autopar/data/error_model.yaml, or the file AUTOPAR_ERROR_MODEL names).

The file is written by benchmarks/error_model.py and never edited by hand, so
everything is checked: a corrupt or hand-edited file is refused with one line
naming the file and the field (exit 2), before any figure is printed.
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.strict import Fields, load_mapping, named, shown
from autopar.spec.error_model import COARSEST, LEVELS, METRICS, Band, ErrorModel

ENV = "AUTOPAR_ERROR_MODEL"  # a file to read instead of the built-in one
SCHEMA_VERSION = 1
MAX_ROWS = 10**6  # rows of one class


def error_model() -> ErrorModel:
    """The error model in use: $AUTOPAR_ERROR_MODEL, else the built-in file (read once per process)."""
    override = os.environ.get(ENV)
    if override:
        return read_error_model(Path(override))
    return _builtin()


@functools.lru_cache(maxsize=1)
def _builtin() -> ErrorModel:
    with resources.as_file(resources.files("autopar") / "data" / "error_model.yaml") as path:
        return read_error_model(path)


def read_error_model(path: Path) -> ErrorModel:
    """Read and check one error model file; SpecError naming the file and field on any fault."""
    data = load_mapping(path)
    where = f"{named(path)}: "
    f = Fields(data, where)
    version = f.integer("schema_version")
    if version != SCHEMA_VERSION:
        raise f.fail("schema_version", f"must be {SCHEMA_VERSION}, got {version}")
    f.text("command")
    min_rows = f.integer("min_rows", maximum=1000)
    sources = Fields(f.mapping("sources") or {}, f.prefix("sources"))
    for metric in METRICS:
        sources.text(metric)
    sources.finish()
    table = f.mapping("classes") or {}
    f.finish()
    classes = Fields(table, f.prefix("classes"))
    out: dict[str, dict[str, Band]] = {}
    for metric in METRICS:
        entries = classes.sequence(metric) or []
        out[metric] = _classes(entries, metric, min_rows, where=f"{where}classes.{metric}")
    classes.finish()
    return ErrorModel(min_rows=min_rows, classes=out, where=named(path))


def _classes(entries: list[Any], metric: str, min_rows: int, *, where: str) -> dict[str, Band]:
    out: dict[str, Band] = {}
    for i, entry in enumerate(entries):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise SpecError(f"{at}: expected a mapping, got {type(entry).__name__}")
        e = Fields(entry, f"{at}.")
        name = e.text("class")
        parts = name.split(" ")
        if name != COARSEST and (len(parts) > len(LEVELS[metric]) or "" in parts):
            raise e.fail(
                "class", f"must be {COARSEST!r} or up to {len(LEVELS[metric])} words ({' '.join(LEVELS[metric])}), got {shown(name)}"
            )
        if name in out:
            raise e.fail("class", f"{shown(name)} is listed twice")
        rows = e.integer("rows", maximum=MAX_ROWS)
        banded = rows >= min_rows
        p10, p90 = (_quantile(e, k, banded) for k in ("p10", "p90"))
        e.finish()
        if not banded and (p10 is not None or p90 is not None):
            raise e.fail("p10", f"a class of {rows} rows (under min_rows {min_rows}) has no band")
        if p10 is not None and p90 is not None and p10 > p90:
            raise e.fail("p10", f"({p10:g}) exceeds p90 ({p90:g})")
        out[name] = Band(name=name, rows=rows, p10=p10, p90=p90)
    return out


def _quantile(e: Fields, key: str, banded: bool) -> float | None:
    if banded or e.has(key):
        return e.number(key)
    e.ignore(key)  # absent or null: no band
    return None
