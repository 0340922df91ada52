"""Sequence-length distributions read from a file (the type and its sampling: spec/distribution.py).

``load_distribution(path)`` accepts five kinds of file, picked by extension:

- ``.txt`` (or any other name): one positive integer per line. Blank lines and
  ``#`` comments (whole-line or trailing) are ignored.
- ``.jsonl``: one JSON object per line with the length in exactly one of the
  fields ``length``, ``len``, ``seq_len`` or ``num_tokens`` (other fields are
  ignored, so a tokenized dataset's index works as is).
- ``.npy``: a one-dimensional array of integers (saved with ``numpy.save``).
- ``.yaml`` / ``.yml`` / ``.json``: a mapping, one of
    * a histogram: ``bin_edges: [e0, e1, ..., en]`` (integers, increasing) and
      ``counts: [c1, ..., cn]``; a sampled length is uniform over the integers
      of its bin ``[e_i, e_{i+1})``;
    * a parametric form: ``lognormal: {median, sigma, max, min}`` (``min``
      defaults to 1); samples outside ``[min, max]`` are clipped to the bound,
      as a data pipeline that truncates or chunks long documents does;
    * ``mixture: [{weight: w, <histogram or lognormal>}, ...]``.
  ``name`` and ``source`` (a citation) are allowed at the top level.

Every problem is a one-line :class:`SpecError` naming the file and the line or
field. Empirical files are resampled with replacement.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from autopar.errors import SpecError
from autopar.io.reading import load_mapping, named, one_line, parse, read_bytes, read_text, shown
from autopar.spec.distribution import Component, LengthDist
from autopar.spec.limits import MAX_LENGTH_BYTES, MAX_LENGTH_TEXT_BYTES, MAX_SEQ

LENGTH_FIELDS = ("length", "len", "seq_len", "num_tokens")
MAPPING_SUFFIXES = (".yaml", ".yml", ".json")


def load_distribution(path: str | Path) -> LengthDist:
    """Read a length distribution from ``path`` (format chosen by extension; see the module doc)."""
    if not str(path).strip():
        raise SpecError("`seq_len_dist` is empty: give a length-distribution file")
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return _empirical(p, _read_npy(p))
    if suffix in MAPPING_SUFFIXES:
        return _from_mapping(p, load_mapping(p))
    if suffix == ".jsonl":
        return _empirical(p, _read_jsonl(p))
    return _empirical(p, _read_text_lengths(p))


def _empirical(path: Path, lengths: np.ndarray) -> LengthDist:
    comp = Component(kind="empirical", values=lengths, upper=np.empty(0), probs=np.empty(0), lo=int(lengths.min()), hi=int(lengths.max()))
    return LengthDist(source=named(path), components=(comp,), weights=np.ones(1))


def _read_text_lengths(path: Path) -> np.ndarray:
    values: list[int] = []
    name = named(path)
    for lineno, line in enumerate(read_text(path, cap=MAX_LENGTH_TEXT_BYTES).splitlines(), start=1):
        token = line.split("#", 1)[0].strip()
        if not token:
            continue
        values.append(_positive_int(token, f"{name}:{lineno}"))
    if not values:
        raise SpecError(f"{named(path)}: no lengths found (only blank lines and comments)")
    return np.asarray(values, dtype=np.int64)


def _read_jsonl(path: Path) -> np.ndarray:
    values: list[int] = []
    name = named(path)
    for lineno, line in enumerate(read_text(path, cap=MAX_LENGTH_TEXT_BYTES).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            record = parse(line, json_text=True)
        except ValueError as exc:
            raise SpecError(f"{where}: {str(exc).replace(' at line 1', '')}") from None
        if not isinstance(record, dict):
            raise SpecError(f"{where}: expected a JSON object with a length field, got {type(record).__name__}")
        present = [k for k in LENGTH_FIELDS if k in record]
        if len(present) != 1:
            found = "none" if not present else ", ".join(present)
            raise SpecError(f"{where}: expected exactly one of the fields {', '.join(LENGTH_FIELDS)}; found {found}")
        values.append(_positive_int(record[present[0]], f"{where}: {present[0]}"))
    if not values:
        raise SpecError(f"{named(path)}: no records found")
    return np.asarray(values, dtype=np.int64)


def _read_npy(path: Path) -> np.ndarray:
    raw = read_bytes(path, cap=MAX_LENGTH_BYTES)
    if not raw:
        raise SpecError(f"{named(path)}: file is empty")
    arr = _npy_array(path, raw)
    bad = np.flatnonzero(arr <= 0)
    if bad.size:
        raise SpecError(f"{named(path)}: lengths must be positive; element {bad[0]} is {arr[bad[0]]}")
    big = np.flatnonzero(arr > MAX_SEQ)  # also uint64 values that int64 would wrap negative
    if big.size:
        raise SpecError(f"{named(path)}: lengths must be at most {MAX_SEQ:,} tokens (autopar's limit); element {big[0]} is {arr[big[0]]}")
    return arr.astype(np.int64)


def _npy_array(path: Path, raw: bytes) -> np.ndarray:
    """The 1-D integer array of a .npy file's bytes. The header's shape is checked against the bytes that
    follow it before anything is allocated: np.load trusts it (a 160-byte file claiming 10^12 elements
    makes numpy allocate 7 TiB)."""
    fp = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ValueError(f".npy format version {version[0]}.{version[1]}; autopar reads 1.0 and 2.0")
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise SpecError(f"{named(path)}: not a readable .npy array ({one_line(str(exc), 120)})") from None
    if len(shape) != 1:
        raise SpecError(f"{named(path)}: expected a one-dimensional array of lengths, got shape {shape}")
    if dtype.kind not in "iu":
        raise SpecError(f"{named(path)}: expected integer lengths, got dtype {dtype}")
    count, data = shape[0], len(raw) - fp.tell()
    if count < 0:
        raise SpecError(f"{named(path)}: the header's shape {shape} has a negative length")
    if count == 0:
        raise SpecError(f"{named(path)}: the array is empty")
    if count * dtype.itemsize > data:
        raise SpecError(
            f"{named(path)}: the header claims {count:,} elements ({count * dtype.itemsize:,} bytes) but "
            f"the file holds {data:,} bytes after it"
        )
    return np.frombuffer(raw, dtype=dtype, count=count, offset=fp.tell())


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise SpecError(f"{where}: expected a positive integer length, got {shown(value)}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}: expected a positive integer length, got {shown(value)}")
    if value <= 0:
        raise SpecError(f"{where}: lengths must be positive, got {shown(value)}")
    if value > MAX_SEQ:
        raise SpecError(f"{where}: lengths must be at most {MAX_SEQ:,} tokens (autopar's limit), got {shown(value)}")
    return value


def _from_mapping(path: Path, data: dict[str, Any]) -> LengthDist:
    """A histogram, lognormal or mixture file (autopar.io.schema.DistFile)."""
    from autopar.io.schema import DistFile, validate  # pydantic: only once a file is read

    where = named(path)
    d = validate(DistFile, data, where=where, err=SpecError)
    if d.mixture is None:
        return LengthDist(source=where, components=(_component(d, f"{where}: "),), weights=np.ones(1), name=d.name or "")
    if d.bin_edges is not None or d.counts is not None or d.lognormal is not None:
        raise SpecError(f"{where}: mixture: give the components inside the mixture, not beside it")
    comps = tuple(_component(entry, f"{where}: mixture[{i}].") for i, entry in enumerate(d.mixture))
    w = np.asarray([entry.weight for entry in d.mixture], dtype=np.float64)
    return LengthDist(source=where, components=comps, weights=w / w.sum(), name=d.name or "")


def _component(c: Any, where: str) -> Component:
    """A histogram (bin_edges + counts) or ``lognormal:`` from one validated ComponentFile."""
    if c.lognormal is not None:
        if c.bin_edges is not None or c.counts is not None:
            raise SpecError(f"{where}lognormal: give a histogram or a lognormal, not both")
        g = c.lognormal
        if g.min > g.max:
            raise SpecError(f"{where}lognormal.min ({g.min}) must not exceed max ({g.max})")
        return Component(
            kind="lognormal",
            values=np.empty(0),
            upper=np.empty(0),
            probs=np.empty(0),
            mu=math.log(g.median),
            sigma=g.sigma,
            lo=g.min,
            hi=g.max,
        )
    if c.bin_edges is None and c.counts is None:
        raise SpecError(f"{where}bin_edges: missing: give a histogram (bin_edges and counts), lognormal, or mixture")
    edges, counts = c.bin_edges or [], c.counts or []
    if len(edges) < 2:
        raise SpecError(f"{where}bin_edges: expected at least 2 edges, got {len(edges)}")
    for i in range(1, len(edges)):
        if edges[i] <= edges[i - 1]:
            raise SpecError(f"{where}bin_edges: must be strictly increasing; edge {i} ({edges[i]}) <= edge {i - 1} ({edges[i - 1]})")
    if len(counts) != len(edges) - 1:
        raise SpecError(f"{where}counts: expected {len(edges) - 1} counts for {len(edges)} bin edges, got {len(counts)}")
    total = sum(counts)
    if total <= 0:
        raise SpecError(f"{where}counts: all counts are zero")
    probs = np.asarray(counts, dtype=np.float64) / total
    nonzero = np.flatnonzero(probs > 0)
    lower, upper = np.asarray(edges[:-1], dtype=np.int64), np.asarray(edges[1:], dtype=np.int64)
    return Component(kind="histogram", values=lower, upper=upper, probs=probs, lo=int(lower[nonzero[0]]), hi=int(upper[nonzero[-1]] - 1))
