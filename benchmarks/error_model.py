"""Out-of-sample error bands: writes autopar/data/error_model.yaml and measures how often they hold.

    python benchmarks/error_model.py [--refit [--fit-passes N --fit-every N --jobs N]] [--write]

Residuals (measured / predicted) on rows that set no constant of the figure they test:

- training tokens/s and memory: every scored row of benchmarks/data/framework_runs.yaml,
  heldout_runs.yaml and published_runs.yaml that no one-source constant was set on (the rows each
  such constant of benchmarks/data/fitted_constants.yaml names are left out), costed with the shipped
  constants but those set on rows of several sources (`refit`), which score each source's rows at
  their value refit without that source (benchmarks/loso.py refit_results); no memory constant is
  set on rows, so every published peak memory counts;
- serving TTFT and TPOT: benchmarks/data/serving_runs.csv. Each framework version's fitted
  constants are refitted without one (GPU, model) group of its aggregated rows and that group
  is evaluated with them (serving_accuracy.held_out_results: leave-one-model-out where a
  version has several models on one GPU, leave-one-GPU-and-model-out across GPUs, by input
  length for a version measured on one GPU and model); disaggregated rows are never fitted on
  and are evaluated with the shipped constants. Rows whose run did not hold the stated
  concurrency ("not-reached") are left out: they measure another workload.

The refits take many minutes: --refit writes the residuals to benchmarks/data/error_residuals.csv,
from which --write renders the error model (and which every run reads for its coverage figures).
The classes, their fallback and the weight of a source (at most min_rows rows) are spec/error_model.py's.

Coverage: each source (a benchmark table or measurement file) is left out of the error model
in turn and its rows are tested against the band of their class set by the other sources
(memory rows one row at a time). Printed: rows with a band, the share
inside [p10, p90], its mean over the sources (each source weighing the same) and the median width of the
band (p90 - p10, over the prediction); with a source left out, the same per class the rows' bands came from.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a file: python benchmarks/error_model.py
    import _as_script  # noqa: F401

from autopar.advise.bands import serving_keys, training_keys
from autopar.cost.serve_load import ServeEstimate
from autopar.spec.error_model import METRICS, MIN_ROWS, MIN_SOURCES, Band, ErrorModel, build
from benchmarks import accuracy, framework, loso, published, serving_accuracy
from benchmarks.serving_rows import Row, load_rows

ROOT = Path(__file__).resolve().parent.parent

DATA = ROOT / "benchmarks" / "data"
OUT = ROOT / "autopar" / "data" / "error_model.yaml"
RESIDUALS = DATA / "error_residuals.csv"  # generated with --refit: every residual the error model is set on
COMMAND = "python benchmarks/error_model.py --write"  # from RESIDUALS (--refit, with the settings it names, first)
SOURCES = {
    "tokens_per_s": "benchmarks/data/{framework,heldout,published}_runs.yaml, rows no fitted constant was set on: "
    "published tokens/s per GPU over autopar's",
    "memory": "benchmarks/data/{framework,heldout}_runs.yaml: published peak memory per GPU over autopar's, no constant fitted on it",
    "ttft": "benchmarks/data/serving_runs.csv: measured TTFT over autopar's, constants refitted without the row's group",
    "tpot": "benchmarks/data/serving_runs.csv: measured TPOT over autopar's, constants refitted without the row's group",
}


@dataclass(frozen=True, slots=True)
class Residual:
    metric: str  # spec/error_model.py METRICS
    group: str  # the source left out together in the coverage test
    id: str  # the row
    keys: tuple[str, ...]  # the row's class keys
    ratio: float  # measured / predicted


def training_residuals() -> list[Residual]:
    """Every scored training row (accuracy.training_rows) that no one-source constant was set on
    (fitted_constants.yaml), costed with the shipped constants but a refit one, refit without the row's
    source: tokens/s grouped by source (loso.source_of); peak memory, where published, one row a group (no
    memory constant is set on rows)."""
    # a constant set on rows of several sources (`refit`: the sustained tensor efficiencies) scores each
    # source's rows at its value refit without them, as the leave-one-source-out headline does
    consts = loso.constants()
    fitted = {i for c in consts if not c.refit for i in c.rows}
    rows = [row for row in accuracy.training_rows() if row["id"] not in fitted]
    out = []
    for row, r in zip(rows, loso.refit_results(rows, accuracy.score, accuracy.score(rows), consts), strict=True):
        if not r.accepted or not r.predicted or not r.published:
            continue
        pub = "achieved" in row
        model = published.model_from_row(row) if pub else framework.model_for(row)
        keys = training_keys(stack=r.stack, dtype=published.dtype_of(row) if pub else row["dtype"], model=model, gpus=r.gpus)
        out.append(Residual("tokens_per_s", loso.source_of(row), r.id, keys, r.published / r.predicted))
        if getattr(r, "published_gib", None) is not None and r.predicted_gib:
            out.append(Residual("memory", r.id, r.id, (r.stack,), r.published_gib / r.predicted_gib))
    return out


def _serving(results: Sequence[tuple[Row, ServeEstimate, str]]) -> list[Residual]:
    out = []
    for row, est, kind in results:
        if kind == "not-reached":
            continue
        keys, rid = serving_keys(est), f"{' '.join(row.key)} {row.label}"
        out.append(Residual("ttft", row.source, rid, keys, row.ttft_ms / (est.ttft_s * 1e3)))
        out.append(Residual("tpot", row.source, rid, keys, row.tpot_ms / (est.tpot_s * 1e3)))
    return out


def _fold(index: int, passes: int, every: int) -> list[Residual]:
    """The index-th fold of serving_accuracy.held_out_results (run in a worker process)."""
    rows = load_rows(DATA / "serving_runs.csv")
    with contextlib.redirect_stderr(io.StringIO()):  # the fit's progress lines
        folds = serving_accuracy.held_out_results(rows, only=index, passes=passes, every=every)
        return [r for _, _, results in folds for r in _serving(results)]


def serving_residuals(jobs: int, passes: int, every: int) -> list[Residual]:
    rows = load_rows(DATA / "serving_runs.csv")
    disagg = [r for r in rows if r.dep.mode == "disagg"]
    out = _serving(serving_accuracy.evaluate(disagg))
    n = len(serving_accuracy.folds(rows))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for part in pool.map(_fold, range(n), [passes] * n, [every] * n):
            out += part
    return out


def read_residuals(path: Path) -> tuple[list[Residual], str]:
    """The residuals of a file write_residuals wrote, and how its serving refits were run."""
    with path.open() as f:
        fit = f.readline().removeprefix("# ").rstrip("\n")
        rows = [Residual(r["metric"], r["group"], r["id"], tuple(r["keys"].split(" ")), float(r["ratio"])) for r in csv.DictReader(f)]
    return rows, fit


def write_residuals(path: Path, residuals: Sequence[Residual], fit: str) -> None:
    """One comment line (the refit settings), then a CSV row per residual."""
    with path.open("w", newline="") as f:
        f.write(f"# {fit}\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["metric", "group", "id", "keys", "ratio"])
        for r in residuals:
            w.writerow([r.metric, r.group, r.id, " ".join(r.keys), repr(r.ratio)])


def classes(residuals: Sequence[Residual]) -> dict[str, dict[str, Band]]:
    mine = {m: [r for r in residuals if r.metric == m] for m in METRICS}
    return {
        m: build([(r.keys, r.ratio) for r in rs], min_rows=MIN_ROWS, min_sources=MIN_SOURCES, sources=[r.group for r in rs])
        for m, rs in mine.items()
    }


def render(residuals: Sequence[Residual], *, fit: str = "") -> str:
    """The error model file: header, provenance, every class with its rows and band; `fit` says how the
    serving refits were run."""
    table = classes(residuals)
    counts = {m: sum(r.metric == m for r in residuals) for m in METRICS}
    lines = [
        f"# GENERATED by `{COMMAND}`: do not edit. {', '.join(f'{m} {n}' for m, n in counts.items())} rows.",
        "# Each class: rows, their sources, and with at least min_rows of them from min_sources sources the 10th",
        "# and 90th percentiles of measured / predicted (prediction quantiles, a source counting as at most",
        "# min_rows rows: spec/error_model.py).",
        "# Read by autopar/io/error_model.py.",
        "schema_version: 1",
        f"command: {COMMAND}",
        f"min_rows: {MIN_ROWS}",
        f"min_sources: {MIN_SOURCES}",
        "sources:",
    ]
    fits = {"ttft": fit, "tpot": fit}
    lines += [f'  {m}: "{SOURCES[m]} ({counts[m]} rows{fits.get(m, "")})"' for m in METRICS]
    lines.append("classes:")
    for m in METRICS:
        lines.append(f"  {m}:" + ("" if table[m] else " []"))
        for band in table[m].values():
            entry = f'  - {{class: "{band.name}", rows: {band.rows}, sources: {band.sources}'
            if band.p10 is not None and band.p90 is not None:
                entry += f", p10: {band.p10:.4f}, p90: {band.p90:.4f}"
            lines.append(entry + "}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Coverage:
    rows: int  # rows tested
    banded: int  # rows whose class had a band without their source
    inside: int  # rows inside it
    median_width: float | None  # median of (hi - lo) / prediction
    per_group: float | None  # the share inside, each group (with a band) weighing the same
    classes: dict[str, tuple[int, int, float]]  # the class a row's band came from -> (rows, inside, median width)


def coverage(residuals: Sequence[Residual], metric: str, group: Callable[[Residual], str]) -> Coverage:
    """Each group left out of the error model in turn; its rows tested against the others' bands."""
    mine = [r for r in residuals if r.metric == metric]
    inside = banded = 0
    widths, shares = [], []
    by_class: dict[str, list[tuple[bool, float]]] = {}
    for g in sorted({group(r) for r in mine}):
        rest = [r for r in mine if group(r) != g]
        model = ErrorModel(min_rows=MIN_ROWS, min_sources=MIN_SOURCES, classes={metric: classes(rest)[metric]})
        held = [(r, model.lookup(metric, r.keys).interval(1.0)) for r in mine if group(r) == g]
        hits = [band.lo <= r.ratio <= band.hi for r, band in held if band is not None]
        banded += len(hits)
        inside += sum(hits)
        widths += [band.hi - band.lo for _, band in held if band is not None]
        shares += [sum(hits) / len(hits)] if hits else []
        for r, band in held:
            if band is not None:
                by_class.setdefault(band.name, []).append((band.lo <= r.ratio <= band.hi, band.hi - band.lo))
    return Coverage(
        rows=len(mine),
        banded=banded,
        inside=inside,
        median_width=statistics.median(widths) if widths else None,
        per_group=statistics.fmean(shares) if shares else None,
        classes={k: (len(v), sum(h for h, _ in v), statistics.median(w for _, w in v)) for k, v in sorted(by_class.items())},
    )


def report(residuals: Sequence[Residual]) -> list[str]:
    lines = [f"{'metric':13} {'left out':10} {'rows':>5} {'banded':>6} {'inside':>7} {'per source':>10} {'median width':>12}"]
    for metric in METRICS:
        for how, group in (("source", lambda r: r.group), ("row", lambda r: r.id)):
            c = coverage(residuals, metric, group)
            share = f"{c.inside / c.banded:.1%}" if c.banded else "-"
            width = f"{c.median_width:.1%}" if c.median_width is not None else "-"
            each = f"{c.per_group:.1%}" if c.per_group is not None and how == "source" else "-"
            lines.append(f"{metric:13} {how:10} {c.rows:5} {c.banded:6} {share:>7} {each:>10} {width:>12}")
            if how == "source":
                lines += [
                    f"    class {name:30} rows {n:4}  inside {k / n:6.1%}  median width {w:6.1%}" for name, (n, k, w) in c.classes.items()
                ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--refit", action="store_true", help="recompute the residuals (minutes) into --residuals")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)} from the residuals")
    ap.add_argument("--residuals", type=Path, default=RESIDUALS, help="the residuals CSV (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="processes for the serving refits")
    ap.add_argument("--fit-passes", type=int, default=3, help="coordinate passes of each serving refit")
    ap.add_argument("--fit-every", type=int, default=1, help="each serving refit on 1 in N of its rows")
    args = ap.parse_args(argv)
    if args.refit:
        fit = f"refits: {args.fit_passes} coordinate pass(es) on 1 in {args.fit_every} of the fold rows"
        residuals = training_residuals() + serving_residuals(args.jobs, args.fit_passes, args.fit_every)
        write_residuals(args.residuals, residuals, fit)
    residuals, fit = read_residuals(args.residuals)
    if args.write:
        OUT.write_text(render(residuals, fit=f"; {fit}"))
        print(f"wrote {OUT.relative_to(ROOT)}")
    print("\n".join(report(residuals)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
