"""Out-of-sample serving scores: leave-one-model-out, leave-one-GPU-out, and the newer rows.

Each framework version with a data file (autopar/data/frameworks/) has its constants
refitted (serving_accuracy.fit) without one model's, or one GPU's, aggregated
calibration rows, and the rows left out are scored with those constants: no row
is scored by constants set on it. A version measured on one model (one GPU) has
no leave-one-model-out (leave-one-GPU-out) fold; its rows are in the in-sample
column only. The refits take long (minutes a fold), so their constants are kept
in benchmarks/data/serving_holdout_fits.json, written by

    python benchmarks/serving_accuracy.py --refit-holdout

and read back by every other run. The rows of serving_runs_newer.csv are held
out as a whole: nothing is fitted on them; they are scored with the shipped
constants.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path

from autopar.cost.serve_load import ServeEstimate
from autopar.io.frameworks import builtin_frameworks, load_framework
from autopar.spec.framework import Framework
from benchmarks.serving_rows import Row

CACHE = Path(__file__).parent / "data" / "serving_holdout_fits.json"
REFIT_COMMAND = "python benchmarks/serving_accuracy.py --refit-holdout"
AXES: dict[str, Callable[[Row], str]] = {"model": lambda r: r.model.name, "gpu": lambda r: r.key[1]}
Result = tuple[Row, ServeEstimate, str]
# the refits of --refit-holdout: coordinate passes and the share of the training rows (every n-th)
PASSES, EVERY = 1, 2


def calibration(rows: Iterable[Row], key: tuple[str, str]) -> list[Row]:
    """The aggregated calibration rows of one fitted framework version (never a held-out file's)."""
    return [r for r in rows if not r.held_out and r.dep.mode == "agg" and (r.dep.framework, r.dep.framework_version) == key]


def folds(rows: list[Row], axis: str) -> list[tuple[tuple[str, str], str, list[Row], list[Row]]]:
    """(framework version, held-out group, rows fitted on, rows scored) of each version with 2+ groups on `axis`."""
    group_of = AXES[axis]
    out = []
    for key in builtin_frameworks():
        mine = calibration(rows, key)
        for group in sorted({group_of(r) for r in mine}) if len({group_of(r) for r in mine}) > 1 else ():
            out.append((key, group, [r for r in mine if group_of(r) != group], [r for r in mine if group_of(r) == group]))
    return out


class NoScoredRows(ValueError):
    """A fold's training rows score none (all queue-saturated or not reached): every trial of the fit has the
    same loss, so it would return the grid's first point, which no row chose. The fold is not scored."""


def refit(rows: list[Row], fit: Callable[..., Framework], only: str | None = None) -> dict[str, object]:
    """Every fold's refitted constants (the fields serving_accuracy.FIT_GRID searches), as the cache holds them;
    a fold whose training rows score none (NoScoredRows) is kept with no constants and the reason. `only`
    ("NAME@VERSION"): refit that version's folds and keep the cached ones of the others (which a change to
    that version's data file alone does not move)."""
    from benchmarks.serving_accuracy import FIT_GRID

    out = []
    kept = [f for f in load_cache()["folds"] if only and f"{f['framework']}@{f['version']}" != only]  # type: ignore[union-attr, index]
    for axis in AXES:
        for key, group, train, _ in folds(rows, axis):
            if only and "@".join(key) != only:
                continue
            entry: dict[str, object] = {"axis": axis, "framework": key[0], "version": key[1], "group": group}
            entry["fitted_rows"] = len(train[::EVERY])
            try:
                fw = fit(train[::EVERY], key, passes=PASSES)
                entry["constants"] = {f: getattr(fw, f) for f in FIT_GRID}
            except NoScoredRows as exc:
                entry.update(constants=None, why=str(exc))
            out.append(entry)
    out = sorted([*kept, *out], key=lambda f: [f["axis"] != "model", f["framework"], f["version"], f["group"]])  # type: ignore[index]
    return {"command": REFIT_COMMAND, "passes": PASSES, "every": EVERY, "shipped": shipped(), "folds": out}


def shipped() -> dict[str, dict[str, float]]:
    """The shipped fitted constants the refits started from, per framework version: a cache written for
    other ones is stale (the cost model or the fit changed since)."""
    from benchmarks.serving_accuracy import FIT_GRID

    fws = (load_framework(f"{n}@{v}") for n, v in builtin_frameworks())
    return {f"{fw.name}@{fw.version}": {f: getattr(fw, f) for f in FIT_GRID} for fw in fws}


class MissingFold(LookupError):
    """The cache lacks a fold the rows call for (rows or the framework files changed since it was written)."""


def load_cache() -> dict[str, object]:
    return json.loads(CACHE.read_text()) if CACHE.exists() else {"folds": []}


def write_cache(data: dict[str, object]) -> None:
    CACHE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def held_out(
    rows: list[Row], axis: str, evaluate: Callable[[list[Row]], list[Result]], cache: dict[str, object] | None = None
) -> list[Result]:
    """The rows each fold of `axis` leaves out, evaluated with that fold's cached constants."""
    from benchmarks.serving_accuracy import with_framework  # it imports this module

    data = cache if cache is not None else load_cache()
    if "shipped" in data and data["shipped"] != shipped():
        raise MissingFold(f"{CACHE.name} was written for other shipped constants: run `{REFIT_COMMAND}`")
    fitted = {(f["axis"], f["framework"], f["version"], f["group"]): f for f in data["folds"]}  # type: ignore[index, union-attr]
    out: list[Result] = []
    for key, group, _, scored in folds(rows, axis):
        fold = fitted.get((axis, key[0], key[1], group))
        if fold is None:
            raise MissingFold(f"{CACHE.name} has no fold {axis} {key[0]}@{key[1]} {group}: run `{REFIT_COMMAND}`")
        constants = fold["constants"]
        if constants is None:  # its training rows score none (NoScoredRows): no out-of-sample constants for it
            continue
        refitted = dataclasses.replace(load_framework("@".join(key)), **constants)  # type: ignore[arg-type]
        out.extend(evaluate(with_framework(scored, refitted)))
    return out


def unfitted(axis: str, cache: dict[str, object] | None = None) -> list[str]:
    """The folds of `axis` the cache holds no constants for, with why (NoScoredRows): their rows are not scored."""
    data = cache if cache is not None else load_cache()
    return [
        f"{f['framework']}@{f['version']} without {f['group']}: {f.get('why', 'not fitted')}"
        for f in data["folds"]  # type: ignore[union-attr]
        if f["axis"] == axis and f["constants"] is None
    ]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """Absolute relative errors of the scored rows of one group."""

    rows: int
    ttft_median: float
    ttft_mean: float
    tpot_median: float
    tpot_mean: float
    ttft_within: int  # rows within WITHIN of the measured TTFT
    tpot_within: int
    worst: float  # largest predicted / measured or measured / predicted ratio, TTFT or TPOT


WITHIN = 0.15


def score(results: Iterable[Result], *, every: bool = False) -> Score | None:
    """The errors of the scored rows (`every`: of every row, queue-saturated and not reached as well: what
    `serve estimate` answers for each)."""
    pairs = [(est.ttft_s * 1e3 / row.ttft_ms, est.tpot_s * 1e3 / row.tpot_ms) for row, est, kind in results if every or kind == "scored"]
    if not pairs:
        return None
    ttft, tpot = [abs(a - 1) for a, _ in pairs], [abs(b - 1) for _, b in pairs]
    worst = max(max(x, 1 / x) for pair in pairs for x in pair if x > 0)
    return Score(
        rows=len(pairs),
        ttft_median=statistics.median(ttft),
        ttft_mean=statistics.fmean(ttft),
        tpot_median=statistics.median(tpot),
        tpot_mean=statistics.fmean(tpot),
        ttft_within=sum(x <= WITHIN for x in ttft),
        tpot_within=sum(x <= WITHIN for x in tpot),
        worst=worst,
    )


def by(results: list[Result], key: Callable[[Row], str], *, every: bool = False) -> dict[str, Score]:
    groups: dict[str, list[Result]] = {}
    for res in results:
        groups.setdefault(key(res[0]), []).append(res)
    out = {k: score(v, every=every) for k, v in sorted(groups.items())}
    return {k: v for k, v in out.items() if v is not None}


HEADER = f"{'':22} {'rows':>4} {'TTFT med':>8} {'mean':>5} {'TPOT med':>8} {'mean':>5} {'<15% TTFT':>9} {'TPOT':>4} {'worst':>6}"


def line(name: str, s: Score) -> str:
    return (
        f"{name[:22]:22} {s.rows:4} {s.ttft_median:8.1%} {s.ttft_mean:5.0%} {s.tpot_median:8.1%} {s.tpot_mean:5.0%}"
        f" {s.ttft_within:9} {s.tpot_within:4} {s.worst:5.1f}x"
    )


def table(title: str, groups: dict[str, Score]) -> list[str]:
    return [title, HEADER, *(line(k, v) for k, v in groups.items())]


def run_key(row: Row) -> tuple[str, ...]:
    """What makes two rows one run measured twice: the engine, GPU, mode, deployment and workload
    (Row.label) and the engine release; the campaign (Row.source) may differ."""
    return (*row.key, row.label, row.release)


def against_repeats(results: list[Result]) -> tuple[list[Result], int]:
    """Each row judged against the median of its run's measurements (run_key): a run measured in several
    campaigns is one measurement with a spread, not several, and the one campaign far from the others
    (H200 Kimi-K2.5 int4 1024/8192 c16: 884 ms / 64.0 ms once, 196 / 16.0 twice) judges the campaign,
    not the model. Returns the results and how many rows' measurements moved."""
    runs: dict[tuple[str, ...], list[Row]] = {}
    for row, _, _ in results:
        runs.setdefault(run_key(row), []).append(row)
    out, moved = [], 0
    for row, est, kind in results:
        same = runs[run_key(row)]
        ttft, tpot = statistics.median(r.ttft_ms for r in same), statistics.median(r.tpot_ms for r in same)
        if (ttft, tpot) != (row.ttft_ms, row.tpot_ms):
            moved += 1
            row = dataclasses.replace(row, ttft_ms=ttft, tpot_ms=tpot)
        out.append((row, est, kind))
    return out, moved
