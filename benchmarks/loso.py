"""Leave-one-source-out scoring of the training rows: the headline of benchmarks/accuracy.py.

The fitted training constants are listed in benchmarks/data/fitted_constants.yaml,
each with the rows it was set on and `unfitted`, the value its mechanism takes
without them. A source is one table or paper (a framework row's source repo and
path, a published row's primary reference). Each source's rows are scored with
every constant set without them: a constant whose rows all come from that
source falls to `unfitted` there, and keeps its value for every other source.
A constant set on rows of several sources (`refit: true`: the sustained tensor
efficiency) is refit without each source's rows for that source (refit_value).

The keep rule: a constant that improves its own source's rows and worsens the
other sources' rows (MAPE with it against MAPE at `unfitted`) is reported as
dropped by the rule.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any

import yaml

if not __package__:  # run as a file: python benchmarks/loso.py
    import _as_script  # noqa: F401

import autopar.io.cache as cache
import autopar.io.profiles as profiles
import autopar.io.stacks as stacks
from autopar.spec.hardware import Curve, HardwareProfile

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True, slots=True, kw_only=True)
class Constant:
    name: str  # key in fitted_constants.yaml
    where: dict[str, Any]  # {module, name} or {stack, field[, scale_of]}
    value: float  # as fitted
    unfitted: float  # its mechanism's value without its rows
    rows: tuple[str, ...]  # the row ids it was set on
    refit: bool = False  # set on rows of several sources: refit without each source's rows for that source


def constants(path: Path = DATA / "fitted_constants.yaml") -> list[Constant]:
    doc = yaml.safe_load(path.read_text())["constants"]
    return [
        Constant(
            name=k,
            where=dict(v["where"]),
            value=float(v["value"]),
            unfitted=float(v["unfitted"]),
            rows=tuple(v["rows"]),
            refit=bool(v.get("refit", False)),
        )
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
    with at_value(c, c.unfitted):
        yield


@contextmanager
def at_value(c: Constant, value: float) -> Iterator[None]:
    """The cost model with constant `c` at `value`: a module constant, a stack's field or a built-in hardware
    profile's field."""
    # the start-up cache (io/cache.py) would hand back the built-in files' values as first read, past
    # the patched readers below: off while a constant is moved
    with _no_cache(), _moved(c, value):
        yield


@contextmanager
def _no_cache() -> Iterator[None]:
    old = os.environ.get(cache.ENV)
    os.environ[cache.ENV] = os.devnull
    try:
        yield
    finally:
        if old is None:
            del os.environ[cache.ENV]
        else:
            os.environ[cache.ENV] = old


@contextmanager
def _moved(c: Constant, value: float) -> Iterator[None]:
    w = c.where
    if "profile" in w:
        with _profile_at(w["profile"], w["field"], value):
            yield
        return
    if "module" in w:
        mod = importlib.import_module(w["module"])
        old = getattr(mod, w["name"])
        setattr(mod, w["name"], value)
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
        if "scale_of" in w:  # a factor on a curve: scale it to the factor `value`
            curve: Curve = getattr(s, w["field"])
            k = value / float(w["scale_of"])
            return replace(s, **{w["field"]: Curve(xs=curve.xs, ys=tuple(y * k for y in curve.ys))})
        return replace(s, **{w["field"]: value})

    stacks.parse_stack = patched  # type: ignore[assignment]
    try:
        yield
    finally:
        stacks.parse_stack = parse  # type: ignore[assignment]


@contextmanager
def _profile_at(name: str, field: str, value: float) -> Iterator[None]:
    """Built-in hardware profile `name` read with `field` (its sustained tensor efficiency, the one profile
    field fitted) at `value`, the file's other numbers as they are."""
    if field != "sustained_tensor_efficiency":
        raise SystemExit(f"loso.py: profile field {field} is not one a constant may set")
    build = profiles._builtin_profile

    def patched(ref: str) -> HardwareProfile:
        hw = build(ref)
        return replace(hw, sustained_tensor_efficiency=value) if ref == name else hw

    profiles._builtin_profile = patched
    try:
        yield
    finally:
        profiles._builtin_profile = build


def error_at(f: float, *, value: float, unfitted: float, errors: tuple[float, float]) -> float:
    """A row's error with the constant at `f`, from its errors at `value` and at `unfitted`: the step time
    taken affine in 1/f (the tensor-core time goes as 1/f, the rest does not move), through both points."""
    e1, e2 = errors
    x1, x2 = 1 / value, 1 / unfitted
    t = 1 + (1 / f - x1) * ((1 + e1) / (1 + e2) - 1) / (x2 - x1)  # step time / step time at `value`
    return (1 + e1) / t - 1


REFIT_GRID = tuple(round(0.3 + 0.001 * i, 3) for i in range(701))  # 0.300 .. 1.000


def refit_value(c: Constant, errors: dict[str, tuple[float, float]], ids: Sequence[str]) -> float:
    """The value of `c` that minimises the mean absolute error of rows `ids` (errors: per row id, its error
    at c.value and at c.unfitted; error_at between them); c.unfitted when none of the rows has errors."""
    pts = [errors[i] for i in ids if i in errors]
    if not pts:
        return c.unfitted

    def mape(f: float) -> float:
        return sum(abs(error_at(f, value=c.value, unfitted=c.unfitted, errors=e)) for e in pts) / len(pts)

    return min(REFIT_GRID, key=mape)


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
    sources = {r["id"]: source_of(r) for r in rows}
    owner: dict[str, str] = {}
    for c in consts:
        own = {sources[i] for i in c.rows if i in sources}
        if len(own) > 1 and not c.refit:
            raise SystemExit(f"loso.py: {c.name} is set on rows of {len(own)} sources: a refit without each is needed")
        owner[c.name] = "" if c.refit else next(iter(own), "")
    fit_by_id = {r.id: r for r in fitted}
    bare = {c.name: _bare(c, rows, score, fit_by_id) for c in consts}
    errors = {c.name: _errors(fit_by_id, bare[c.name]) for c in consts if c.refit}
    refits = refits_by_source(consts, sources, errors)
    loso = fit_by_id | _by_source(
        rows,
        score,
        sources,
        lambda source: (
            [(c, c.unfitted) for c in consts if owner[c.name] == source]
            + [(c, refits[c.name][source]) for c in consts if source in refits.get(c.name, {})]
        ),
    )
    out: dict[str, Any] = {"stacks": {}}
    for stack in [*sorted({r.stack for r in fitted}), "all"]:
        keep = [r for r in fitted if stack in ("all", r.stack)]
        out["stacks"][stack] = {"in_sample": _stats(keep), "loso": _stats([loso[r.id] for r in keep])}
    out["rows"] = {
        r.id: {"stack": r.stack, "in_sample": r.error, "loso": loso[r.id].error, "source": sources[r.id]}
        for r in fitted
        if r.accepted and r.error is not None and loso[r.id].accepted and loso[r.id].error is not None
    }
    out["rule"] = [_rule(c, owner[c.name], sources, fitted, bare[c.name]) for c in consts]
    for doc, c in zip(out["rule"], consts, strict=True):
        if c.refit:
            doc["fit"] = refit_value(c, errors[c.name], c.rows)
            doc["refit_without"] = refits[c.name]
    return out


def refits_by_source(
    consts: Sequence[Constant], sources: dict[str, str], errors: dict[str, dict[str, tuple[float, float]]]
) -> dict[str, dict[str, float]]:
    """Per refit constant, per source among its rows: its value refit without that source's rows (unfitted
    where it has no other rows). errors: per refit constant, _errors of its rows."""
    refits: dict[str, dict[str, float]] = {}
    for c in consts:
        if not c.refit:
            continue
        refits[c.name] = {}
        for source in sorted({sources[i] for i in c.rows if i in sources}):
            rest = [i for i in c.rows if sources.get(i) != source]
            refits[c.name][source] = refit_value(c, errors[c.name], rest) if rest else c.unfitted
    return refits


def refit_results(rows: list[dict[str, Any]], score: Score, fitted: list[Any], consts: Sequence[Constant]) -> list[Any]:
    """`fitted` (the results of `rows` in order), with the rows of each source that a refit constant was set
    on scored at the refits without that source; the rows of the other constants as fitted."""
    fit_by_id = {r.id: r for r in fitted}
    sources = {r["id"]: source_of(r) for r in rows}
    refit = [c for c in consts if c.refit]
    errors = {c.name: _errors(fit_by_id, _bare(c, rows, score, fit_by_id)) for c in refit}
    refits = refits_by_source(refit, sources, errors)
    out = fit_by_id | _by_source(
        rows, score, sources, lambda source: [(c, refits[c.name][source]) for c in refit if source in refits[c.name]]
    )
    return [out[r.id] for r in fitted]


def _by_source(
    rows: list[dict[str, Any]], score: Score, sources: dict[str, str], values: Callable[[str], list[tuple[Constant, float]]]
) -> dict[str, Any]:
    """Each source's rows scored with the constants `values(source)` names at their values (sources that name
    none are not scored): results by row id."""
    out: dict[str, Any] = {}
    for source in sorted(set(sources.values())):
        if moved := values(source):
            with _at_values(moved):
                out |= {r.id: r for r in score([row for row in rows if sources[row["id"]] == source])}
    return out


def _bare(c: Constant, rows: list[dict[str, Any]], score: Score, fitted: dict[str, Any]) -> dict[str, Any]:
    """Every row's result with `c` at its unfitted value; a stack's constant moves only the rows on that stack:
    those alone are scored again."""
    stack = c.where.get("stack")
    with unfitted(c):
        again = [row for row in rows if stack in (None, fitted[row["id"]].stack)]
        return fitted | {r.id: r for r in score(again)}


def _errors(fitted: dict[str, Any], bare: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Per row id: its error as fitted and at the unfitted value, where both are scored."""
    ok = [i for i, r in fitted.items() if r.accepted and r.error is not None and bare[i].accepted and bare[i].error is not None]
    return {i: (fitted[i].error, bare[i].error) for i in ok}


@contextmanager
def _at_values(values: list[tuple[Constant, float]]) -> Iterator[None]:
    if not values:
        yield
        return
    with at_value(*values[0]), _at_values(values[1:]):
        yield


def _rule(c: Constant, source: str, sources: dict[str, str], fitted: list[Any], bare: dict[str, Any]) -> dict[str, Any]:
    """Its own rows' MAPE and the others', with it and at its unfitted value; dropped when it improves its own
    and worsens the others. Its own rows: its source's (a refit constant: the rows it was set on)."""
    mine = (lambda r: r.id in c.rows) if c.refit else (lambda r: sources[r.id] == source)
    own = [r for r in fitted if mine(r)]
    others = [r for r in fitted if not mine(r)]
    doc = {
        "constant": c.name,
        "source": f"its {len(own)} rows" if c.refit else source,
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
            f"  {r['constant']} = {r['value']:g} (unfitted {r['unfitted']:g}): {'its rows' if 'fit' in r else 'own source'} "
            f"{pct(r['own_mape'])} ({pct(r['own_mape_unfitted'])} unfitted), others {pct(r['others_mape'])} "
            f"({pct(r['others_mape_unfitted'])}): {verdict}"
        )
        if "fit" in r:
            without = r["refit_without"].values()
            lines.append(
                f"    fit on its rows {r['fit']:.3f}; refit without each of its {len(without)} sources "
                f"{min(without, default=r['fit']):.3f}-{max(without, default=r['fit']):.3f}"
            )
    return lines


def row_lines(doc: dict[str, Any], *, worst: int = 0) -> list[str]:
    """Every scored row (or the `worst` of each stack), worst out-of-sample error first: its leave-one-source-out
    error, its in-sample error and its source."""
    lines = [f"  {'row':44} {'stack':11} {'LOSO':>7} {'in-sample':>9}  source"]
    rows = sorted(doc["rows"].items(), key=lambda kv: (kv[1]["stack"], -abs(kv[1]["loso"])))
    shown: dict[str, int] = {}
    for rid, r in rows:
        shown[r["stack"]] = n = shown.get(r["stack"], 0) + 1
        if worst and n > worst:
            continue
        lines.append(f"  {rid:44} {r['stack']:11} {r['loso']:+7.1%} {r['in_sample']:+9.1%}  {r['source'][:60]}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """python benchmarks/loso.py [--worst N]: the headline table, then every row's out-of-sample error."""
    import argparse

    from benchmarks import accuracy

    ap = argparse.ArgumentParser(description="leave-one-source-out training accuracy, per stack and per row")
    ap.add_argument("--worst", type=int, default=0, help="only the N worst rows of each stack")
    args = ap.parse_args(argv)
    fw, pub, held, _ = accuracy.shipped()
    doc = accuracy.headline(fw, pub, held)
    head = "rows (error = predicted / published - 1, worst out of sample first):"
    print("\n".join([*table(doc), "", head, *row_lines(doc, worst=args.worst)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
