"""Print docs/varlen.md's paper-vs-autopar table for the variable-length setups of examples/seqlen/papers.yaml.

python benchmarks/varlen_papers.py [--steps 64]
"""

from __future__ import annotations

import argparse

if not __package__:  # run as a file: python benchmarks/varlen_papers.py
    import _as_script  # noqa: F401

from autopar.varlen import STRATEGY_INFO
from benchmarks.papers import reproduce, setups


def table(steps: int = 64) -> list[str]:
    """The markdown table: one row per (setup, strategy) the paper reports."""
    lines = ["| setup | strategy | paper | autopar | autopar / paper |", "|---|---|---:|---:|---:|"]
    for name in setups():
        c = reproduce(name, steps=steps)
        for strategy, paper in c.paper.items():
            got = c.autopar[strategy]
            lines.append(f"| {c.title} | `{strategy}` ({STRATEGY_INFO[strategy].label}) | {paper:.2f}x | {got:.2f}x | {got / paper:.2f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=64)
    args = ap.parse_args()
    print("\n".join(table(args.steps)))


if __name__ == "__main__":
    main()
