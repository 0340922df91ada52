"""Write the accuracy tables of docs/ from the benchmarks that compute them.

    python benchmarks/accuracy_docs.py           # rewrite the generated tables (about 60 s of CPU)
    python benchmarks/accuracy_docs.py --check   # exit 1 if a page differs from what would be written

docs/accuracy.md: training (benchmarks/accuracy.py) and serving (benchmarks/serving_accuracy.py);
docs/varlen.md: the papers (benchmarks/varlen_papers.py --steps 64); docs/serving-accuracy.md: the serving
headline, out of sample (benchmarks/serving_accuracy.py). Each table sits between the
GENERATED markers of autopar.docs; the prose around them is written by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if not __package__:  # run as a file: python benchmarks/accuracy_docs.py
    import _as_script  # noqa: F401

from autopar.docs import refresh, rendered
from benchmarks import accuracy, serving_accuracy, varlen_papers

ROOT = Path(__file__).resolve().parent.parent

FILES = {"heldout_runs": "heldout_runs (validation)"}


def _memory(s: dict[str, Any], *, detail: bool) -> str:
    """Mean absolute memory error; per stack also its rows and the largest."""
    if s["memory_mape"] is None:
        return "-"
    more = f" ({s['memory_rows']} rows, max {s['memory_max']:.1%})" if detail else ""
    return f"{s['memory_mape']:.1%}{more}"


def _shipped() -> tuple[Any, ...]:
    """accuracy.shipped(), once per run: both training tables read it."""
    if not _CACHE:
        _CACHE.append(accuracy.shipped())
    return _CACHE[0]


_CACHE: list[tuple[Any, ...]] = []


def headline_table() -> str:
    """Leave-one-source-out beside in-sample MAPE per stack (mean, median), and the keep rule per constant."""
    fw, pub, held, _ = _shipped()
    doc = accuracy.headline(fw, pub, held)
    pct = accuracy._pct
    lines = ["| stack | rows | LOSO MAPE | LOSO median | in-sample MAPE | in-sample median |", "|---|---:|---:|---:|---:|---:|"]
    for stack, s in doc["stacks"].items():
        a, b = s["loso"], s["in_sample"]
        lines.append(f"| {stack} | {a['rows']} | {pct(a['mean'])} | {pct(a['median'])} | {pct(b['mean'])} | {pct(b['median'])} |")
    lines += [
        "",
        "| fitted constant | value (unfitted) | its source: MAPE (unfitted) | other sources: MAPE (unfitted) | keep rule |",
        "|---|---|---|---|---|",
    ]
    for r in doc["rule"]:
        if "fit" in r:  # set on rows of several sources: refit without each for its leave-one-source-out score
            v = r["refit_without"].values()
            r = {**r, "source": f"{r['source']} ({len(v)} sources; refit without each {min(v):.3f}-{max(v):.3f})"}
        lines.append(
            f"| `{r['constant']}` | {r['value']:g} ({r['unfitted']:g}) | {r['source']}: {pct(r['own_mape'])} "
            f"({pct(r['own_mape_unfitted'])}) | {pct(r['others_mape'])} ({pct(r['others_mape_unfitted'])}) | "
            f"{'dropped' if r['dropped'] else 'kept'} |"
        )
    return "\n".join(lines)


def training_table() -> str:
    """Per file and stack: rows, MAPE, bias, memory error, accepted and fitting plans."""
    fw, pub, held, skipped = _shipped()
    lines = ["| file | stack | rows | MAPE | bias | memory error | accepted | fit |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, results in (("framework_runs", fw), ("published_runs", pub), ("heldout_runs", held)):
        for stack, s in accuracy.by_stack(results).items():
            lines.append(
                f"| {FILES.get(name, name)} | {stack} | {s['rows']} | {accuracy._pct(s['mape'])} | "
                f"{accuracy._pct(s['bias'], True)} | {_memory(s, detail=stack != 'all')} | {s['accepted']} | "
                f"{s['fits']} |"
            )
    lines += ["", f"Published rows not scored (no throughput, no layout or no profile): {', '.join(skipped)}."]
    return "\n".join(lines)


def serving_table() -> str:
    """Per framework, GPU and mode: scored rows, TTFT and TPOT MAPE; the rows set apart, counted."""
    results = serving_accuracy.evaluate(serving_accuracy.load_rows(serving_accuracy.HERE / "data" / "serving_runs.csv", []))
    apart = {kind: sum(k == kind for _, _, k in results) for kind in ("saturated", "not-reached")}
    lines = ["| framework | GPU | mode | rows | TTFT MAPE | TPOT MAPE |", "|---|---|---|---:|---:|---:|"]
    for (fw, gpu, mode), (n, ttft, tpot) in serving_accuracy.errors(results).items():
        lines.append(f"| {fw} | {gpu} | {mode} | {n} | {ttft:.1%} | {tpot:.1%} |")
    lines += [
        "",
        f"Not scored: {apart['saturated']} queue-saturated rows and {apart['not-reached']} rows whose stated "
        "concurrency was not reached (`python benchmarks/serving_accuracy.py` lists them).",
    ]
    return "\n".join(lines)


def serving_headline() -> str:
    """The serving headline of benchmarks/serving_accuracy.py (out of sample first) as markdown tables."""
    rows, notes = serving_accuracy.load(None)
    lines = []
    for note in notes:  # a note's reasons: one per line indented 2, wrapped on lines indented 4
        for line in note.splitlines():
            if line.startswith("    "):
                lines[-1] += " " + line.strip()
            else:
                lines.append(f"  - {line.strip()}" if line.startswith("  ") else f"- {line}")
    for title, groups in serving_accuracy.headline_groups(rows, serving_accuracy.evaluate(rows)):
        lines += ["", f"**{title}**", ""]
        if isinstance(groups, str):
            lines.append(groups)
            continue
        lines += [
            "| | rows | TTFT median | TTFT mean | TPOT median | TPOT mean | TTFT within 15% | TPOT within 15% | worst |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {k} | {v.rows} | {v.ttft_median:.1%} | {v.ttft_mean:.1%} | {v.tpot_median:.1%} | {v.tpot_mean:.1%}"
            f" | {v.ttft_within} | {v.tpot_within} | {v.worst:.1f}x |"
            for k, v in groups.items()
        ]
    return "\n".join(lines)


def papers_table() -> str:
    return "\n".join(varlen_papers.table(steps=64))


PAGES: dict[str, list[tuple[str, Callable[[], str]]]] = {
    "docs/accuracy.md": [
        ("`python benchmarks/accuracy.py` (headline)", headline_table),
        ("`python benchmarks/accuracy.py`", training_table),
        ("`python benchmarks/serving_accuracy.py`", serving_table),
    ],
    "docs/varlen.md": [("`python benchmarks/varlen_papers.py --steps 64`", papers_table)],
    "docs/serving-accuracy.md": [("`python benchmarks/serving_accuracy.py`", serving_headline)],
}


def page(name: str) -> str:
    """docs page `name` with its tables as the benchmarks print them now."""
    text = (ROOT / name).read_text(encoding="utf-8")
    for source, build in PAGES[name]:
        text = rendered(text, source, build(), by="python benchmarks/accuracy_docs.py")
    return text


def main(argv: list[str]) -> int:
    return refresh({name: (lambda _old, name=name: page(name)) for name in PAGES}, argv, command="python benchmarks/accuracy_docs.py")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
