"""How close autopar's predictions are to published training runs, per execution stack.

    python benchmarks/accuracy.py [--json] [--rows] [--rank] [--runs FILE ...]

Two files, both copied into benchmarks/data/ with their sources (see
benchmarks/data/README.md), so this runs from a fresh clone:

- framework_runs.yaml: framework benchmark tables (torchtitan, llm-foundry, NeMo,
  Megatron-Bridge, the Megatron MoE model zoo), each with its full plan and, for
  torchtitan, the peak memory per GPU. Each published plan is estimated as its
  stack runs it (benchmarks/framework.py).
- published_runs.yaml: papers and READMEs (Megatron-LM 2021, Megatron-Core H100,
  BLOOM, DeepSeek-V3); the search fills what the source leaves open
  (benchmarks/published.py).

`--runs FILE` adds a file of your own runs in the framework_runs.yaml format (see
its `conventions`); rows autopar cannot describe (a model, hardware profile or
field it does not know) are listed with the reason, not scored.

The headline is leave-one-source-out (benchmarks/loso.py): each source's rows scored
with every fitted constant (benchmarks/data/fitted_constants.yaml) set without them,
beside the in-sample figure, per stack, mean and median.

Then, per stack and overall on each file: the mean absolute percentage error of
tokens/s (or of the source's TFLOP/s), the mean signed error (bias), the mean
absolute error of peak memory where published, and how many published plans the
stack accepts and fit by our memory model.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

if not __package__:  # run as a file: python benchmarks/accuracy.py
    import _as_script  # noqa: F401

from autopar.errors import AutoparError
from benchmarks import framework, loso, published

ROOT = Path(__file__).resolve().parent.parent

DATA = ROOT / "benchmarks" / "data"


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summary(rows: Sequence[Any]) -> dict[str, Any]:
    """MAPE, bias, memory error and counts of a set of results (framework or published)."""
    errors = [r.error for r in rows if r.accepted and r.error is not None]
    mem = [abs(e) for r in rows if (e := getattr(r, "memory_error", None)) is not None]
    return {
        "rows": len(rows),
        "mape": _mean([abs(e) for e in errors]),
        "bias": _mean(errors),
        "memory_rows": len(mem),
        "memory_mape": _mean(mem),
        "memory_max": max(mem) if mem else None,
        "accepted": sum(r.accepted for r in rows),
        "fits": sum(r.accepted and r.fits for r in rows),
    }


def by_stack(rows: Sequence[Any]) -> dict[str, dict[str, Any]]:
    out = {s: summary([r for r in rows if r.stack == s]) for s in sorted({r.stack for r in rows})}
    out["all"] = summary(rows)
    return out


def _pct(x: float | None, signed: bool = False) -> str:
    return "-" if x is None else (f"{x:+.1%}" if signed else f"{x:.1%}")


def table(name: str, stats: dict[str, dict[str, Any]]) -> list[str]:
    lines = [f"{name}", f"  {'stack':12} {'rows':>4} {'MAPE':>6} {'bias':>7} {'mem err':>7} {'mem rows':>8} {'accepted':>8} {'fit':>4}"]
    for stack, s in stats.items():
        lines.append(
            f"  {stack:12} {s['rows']:4d} {_pct(s['mape']):>6} {_pct(s['bias'], True):>7} "
            f"{_pct(s['memory_mape']):>7} {s['memory_rows']:8d} {s['accepted']:8d} {s['fits']:4d}"
        )
    return lines


def framework_rows(results: Sequence[framework.FrameworkResult]) -> list[str]:
    lines = [f"  {'run':38} {'stack':11} {'pub':>6} {'ours':>6} {'error':>7} {'mem':>11} {'fit':>3}"]
    for r in results:
        mem = f"{r.predicted_gib:.0f}/{r.published_gib:.0f}" if r.published_gib and r.predicted_gib else "-"
        ours = f"{r.predicted:6.0f}" if r.predicted is not None else "refused"
        lines.append(
            f"  {r.id[:38]:38} {r.stack:11} {r.published:6.0f} {ours:>6} {_pct(r.error, True):>7} {mem:>11} {'yes' if r.fits else 'NO':>3}"
        )
    return lines


def published_rows(results: Sequence[published.RowResult]) -> list[str]:
    lines = [f"  {'run':30} {'stack':9} {'metric':12} {'pub':>7} {'ours':>7} {'error':>7} {'fit':>3}"]
    for r in results:
        lines.append(
            f"  {r.id[:30]:30} {r.stack:9} {r.metric:12} {r.published:7.1f} {r.predicted:7.1f} "
            f"{r.error:+7.1%} {'yes' if r.fits else 'NO':>3}"
        )
    return lines


def shipped(*, rank: bool = False) -> tuple[list[Any], list[Any], list[Any], list[str]]:
    """The shipped files, costed: framework rows, published rows, held-out rows, and the published ids skipped."""
    fw_runs = yaml.safe_load((DATA / "framework_runs.yaml").read_text())["runs"]
    pub_runs = yaml.safe_load((DATA / "published_runs.yaml").read_text())["runs"]
    fw = [framework.evaluate(r) for r in fw_runs]
    pub = [published.evaluate(r, rank=rank) for r in pub_runs if published.usable(r)]
    skipped = [r["id"] for r in pub_runs if not published.usable(r)]
    held_path = DATA / "heldout_runs.yaml"  # validation only: no constant is set on these rows
    held = [framework.evaluate(r) for r in yaml.safe_load(held_path.read_text())["runs"]] if held_path.exists() else []
    return fw, pub, held, skipped


def score(rows: list[dict[str, Any]]) -> list[Any]:
    """Rows of any shipped file, costed: published rows (they carry `achieved`) by the search, the others as
    framework rows through the CLI."""
    return [published.evaluate(r) if "achieved" in r else framework.evaluate(r) for r in rows]


def headline(fw: list[Any], pub: list[Any], held: list[Any]) -> dict[str, Any]:
    """Leave-one-source-out and in-sample MAPE over every scored row of the shipped files, per stack."""
    return loso.leave_one_source_out(training_rows(), score, [*fw, *held, *pub], loso.constants())


def training_rows() -> list[dict[str, Any]]:
    """Every scored row of the shipped files: framework, held-out, then the usable published rows."""
    runs = [yaml.safe_load((DATA / f).read_text())["runs"] for f in ("framework_runs.yaml", "heldout_runs.yaml")]
    pub_rows = [r for r in yaml.safe_load((DATA / "published_runs.yaml").read_text())["runs"] if published.usable(r)]
    return [*runs[0], *runs[1], *pub_rows]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON document")
    ap.add_argument("--rows", action="store_true", help="also print every row")
    ap.add_argument("--rank", action="store_true", help="place each published plan in our own open search (slow)")
    ap.add_argument(
        "--runs", type=Path, action="append", default=[], help="another file of runs in the framework_runs.yaml format (repeatable)"
    )
    args = ap.parse_args(argv)
    fw, pub, held, skipped = shipped(rank=args.rank)
    top = headline(fw, pub, held)
    stats = {"framework_runs": by_stack(fw), "published_runs": by_stack(pub)}
    if held:
        stats["heldout_runs"] = by_stack(held)
    extra = {str(path): evaluate_file(path) for path in args.runs}
    for name, (results, _) in extra.items():
        stats[name] = by_stack(results)
    if args.json:
        doc = {"leave_one_source_out": top, **stats}
        doc |= {
            "framework_rows": [dict(vars_of(r), error=r.error, memory_error=r.memory_error) for r in fw],
            "published_rows": [dict(vars_of(r), error=r.error) for r in pub],
            "published_skipped": skipped,
            "heldout_rows": [dict(vars_of(r), error=r.error, memory_error=r.memory_error) for r in held],
            "runs_files": {
                name: {"rows": [dict(vars_of(r), error=r.error, memory_error=r.memory_error) for r in rs], "skipped": skipped_rows}
                for name, (rs, skipped_rows) in extra.items()
            },
        }
        print(json.dumps(doc, indent=2))
        return 0
    lines = [*loso.table(top), ""]
    lines += table("framework_runs.yaml (tokens/s per GPU; memory where published)", stats["framework_runs"])
    lines += table("published_runs.yaml (each source's own TFLOP/s, or tokens/s)", stats["published_runs"])
    if held:
        lines += table("heldout_runs.yaml (validation only: other rows of the same tables)", stats["heldout_runs"])
    for name, (results, skipped_rows) in extra.items():
        lines += table(f"{name} (tokens/s per GPU; memory where published)", stats[name])
        if args.rows:
            lines += ["", f"{name} rows (mem: ours/published GiB)", *framework_rows(results)]
        lines += [f"{name}: not scored, {len(skipped_rows)} rows"] + [f"  {s}" for s in skipped_rows]
    if args.rows:
        lines += ["", "framework_runs.yaml rows (mem: ours/published GiB)", *framework_rows(fw)]
        lines += ["", "published_runs.yaml rows", *published_rows(pub)]
        if held:
            lines += ["", "heldout_runs.yaml rows (mem: ours/published GiB)", *framework_rows(held)]
    lines.append(f"published_runs skipped (no throughput, no layout or no profile): {', '.join(skipped)}")
    print("\n".join(lines))
    return 0


def evaluate_file(path: Path) -> tuple[list[framework.FrameworkResult], list[str]]:
    """The rows of a framework_runs.yaml-format file that autopar can describe, costed; the others as 'id: why'."""
    try:
        runs = yaml.safe_load(path.read_text())["runs"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise SystemExit(f"accuracy.py: error: {path}: not a runs file ({type(exc).__name__}: {exc})") from None
    results, skipped = [], []
    for i, row in enumerate(runs):
        try:
            results.append(framework.evaluate(row))
        except (AutoparError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            name = row.get("id", f"row {i + 1}") if isinstance(row, dict) else f"row {i + 1}"
            why = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc).split("\n")[0]
            skipped.append(f"{name}: {why}")
    return results, skipped


def vars_of(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


if __name__ == "__main__":
    raise SystemExit(main())
