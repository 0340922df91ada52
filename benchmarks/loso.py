"""Leave-one-source-out scoring of the training rows: the headline of benchmarks/accuracy.py.

The fitted training constants are listed in benchmarks/data/fitted_constants.yaml,
each with the rows it was set on and `unfitted`, the value its mechanism takes
without them. A source is one table or paper (a framework row's source repo and
path, a published row's primary reference). Each source's rows are scored with
every constant set without them: a constant whose rows all come from that
source falls to `unfitted` there, and keeps its value for every other source.
(A constant set on rows of several sources would need a refit without each one;
none is, and the loader refuses one.)

The keep rule: a constant that improves its own source's rows and worsens the
other sources' rows (MAPE with it against MAPE at `unfitted`) is reported as
dropped by the rule.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

import yaml

import autopar.io.stacks as stacks
from autopar.spec.hardware import Curve

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True, slots=True, kw_only=True)
class Constant:
    name: str  # key in fitted_constants.yaml
    where: dict[str, Any]  # {module, name} or {stack, field[, scale_of]}
    value: float  # as fitted
    unfitted: float  # its mechanism's value without its rows
    rows: tuple[str, ...]  # the row ids it was set on


def constants(path: Path = DATA / "fitted_constants.yaml") -> list[Constant]:
    doc = yaml.safe_load(path.read_text())["constants"]
    return [
        Constant(name=k, where=dict(v["where"]), value=float(v["value"]), unfitted=float(v["unfitted"]), rows=tuple(v["rows"]))
        for k, v in doc.items()
    ]


def source_of(row: dict[str, Any]) -> str:
    """The table or paper a row comes from."""
    src = row.get("source") or {}
    if "primary" in src:
        return str(src["primary"]).split(",")[0]
    return f"{src.get('repo', '?')}:{src.get('path', '?')}"


@contextmanager
def unfitted(c: Constant) -> Iterator[None]:
    """The cost model with constant `c` at its unfitted value, in this process (the CLI runs in it too)."""
    w = c.where
    if "module" in w:
        mod = importlib.import_module(w["module"])
        old = getattr(mod, w["name"])
        setattr(mod, w["name"], c.unfitted)
        try:
            yield
        finally:
            setattr(mod, w["name"], old)
        return
    parse = stacks.parse_stack

    def patched(data: dict[str, Any], *, where: str) -> Any:
        s = parse(data, where=where)
        if s.name != w["stack"]:
            return s
        if "scale_of" in w:  # a factor on a curve: scale it to the unfitted factor
            curve: Curve = getattr(s, w["field"])
            k = c.unfitted / float(w["scale_of"])
            return replace(s, **{w["field"]: Curve(xs=curve.xs, ys=tuple(y * k for y in curve.ys))})
        return replace(s, **{w["field"]: c.unfitted})

    stacks.parse_stack = patched  # type: ignore[assignment]
    try:
        yield
    finally:
        stacks.parse_stack = parse  # type: ignore[assignment]


def _mape(results: Sequence[Any]) -> float | None:
    errors = [abs(r.error) for r in results if r.accepted and r.error is not None]
    return sum(errors) / len(errors) if errors else None


def _stats(results: Sequence[Any]) -> dict[str, Any]:
    errors = [abs(r.error) for r in results if r.accepted and r.error is not None]
    return {"rows": len(errors), "mean": sum(errors) / len(errors) if errors else None, "median": median(errors) if errors else None}


Score = Callable[[list[dict[str, Any]]], list[Any]]  # rows -> results (with .id .stack .error .accepted)


def leave_one_source_out(rows: list[dict[str, Any]], score: Score, fitted: list[Any], consts: list[Constant]) -> dict[str, Any]:
    """Per stack: in-sample and leave-one-source-out MAPE (mean, median), and the keep rule per constant.

    `fitted` are the results of `rows` with every constant as fitted (in the same order)."""
    by_id = {r["id"]: r for r in rows}
    sources = {r["id"]: source_of(r) for r in rows}
    owner: dict[str, str] = {}
    for c in consts:
        own = {sources[i] for i in c.rows if i in sources}
        if len(own) > 1:
            raise SystemExit(f"loso.py: {c.name} is set on rows of {len(own)} sources: a refit without each is needed")
        owner[c.name] = next(iter(own), "")
    loso = {r.id: r for r in fitted}
    for source in sorted(set(owner.values()) - {""}):
        mine = [c for c in consts if owner[c.name] == source]
        own_rows = [by_id[i] for i in by_id if sources[i] == source]
        with _all_unfitted(mine):
            for r in score(own_rows):
                loso[r.id] = r
    out: dict[str, Any] = {"stacks": {}}
    for stack in [*sorted({r.stack for r in fitted}), "all"]:
        keep = [r for r in fitted if stack in ("all", r.stack)]
        out["stacks"][stack] = {"in_sample": _stats(keep), "loso": _stats([loso[r.id] for r in keep])}
    out["rule"] = [_rule(c, owner[c.name], rows, sources, score, fitted) for c in consts]
    return out


@contextmanager
def _all_unfitted(cs: list[Constant]) -> Iterator[None]:
    if not cs:
        yield
        return
    with unfitted(cs[0]), _all_unfitted(cs[1:]):
        yield


def _rule(c: Constant, source: str, rows: list[dict[str, Any]], sources: dict[str, str], score: Score, fitted: list[Any]) -> dict[str, Any]:
    """Its own source's MAPE and the others', with it and at its unfitted value; dropped when it improves its own
    and worsens the others."""
    bare = {r.id: r for r in fitted}
    stack = c.where.get("stack")  # a stack's constant moves only the rows on that stack: score those alone
    with unfitted(c):
        bare |= {r.id: r for r in score([row for row in rows if stack in (None, bare[row["id"]].stack)])}
    own = [r for r in fitted if sources[r.id] == source]
    others = [r for r in fitted if sources[r.id] != source]
    doc = {
        "constant": c.name,
        "source": source,
        "value": c.value,
        "unfitted": c.unfitted,
        "own_mape": _mape(own),
        "own_mape_unfitted": _mape([bare[r.id] for r in own]),
        "others_mape": _mape(others),
        "others_mape_unfitted": _mape([bare[r.id] for r in others]),
    }
    improves = (doc["own_mape"] or 0) < (doc["own_mape_unfitted"] or 0)
    worsens = (doc["others_mape"] or 0) > (doc["others_mape_unfitted"] or 0) + 1e-12
    doc["dropped"] = improves and worsens
    return doc


def table(doc: dict[str, Any]) -> list[str]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    lines = [
        "leave-one-source-out (headline): each source's rows scored with the fitted constants set without them",
        f"  {'stack':12} {'rows':>4} {'LOSO mean':>9} {'median':>7} {'in-sample':>9} {'median':>7}",
    ]
    for stack, s in doc["stacks"].items():
        a, b = s["loso"], s["in_sample"]
        lines.append(f"  {stack:12} {a['rows']:4d} {pct(a['mean']):>9} {pct(a['median']):>7} {pct(b['mean']):>9} {pct(b['median']):>7}")
    lines.append("keep rule (a constant that improves its own source and worsens the others is dropped):")
    for r in doc["rule"]:
        verdict = "DROPPED by the rule" if r["dropped"] else "kept"
        lines.append(
            f"  {r['constant']} = {r['value']:g} (unfitted {r['unfitted']:g}): own source "
            f"{pct(r['own_mape'])} ({pct(r['own_mape_unfitted'])} unfitted), others {pct(r['others_mape'])} "
            f"({pct(r['others_mape_unfitted'])}): {verdict}"
        )
    return lines
