"""Print the README's paper-vs-autopar table for the variable-length setups of examples/seqlen/papers.yaml.

    python benchmarks/varlen_papers.py [--steps 64]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autopar.advise.papers import reproduce, setups
from autopar.varlen import STRATEGY_INFO


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=64)
    args = ap.parse_args()
    print("| setup | strategy | paper | autopar | autopar / paper |")
    print("|---|---|---:|---:|---:|")
    for name in setups():
        c = reproduce(name, steps=args.steps)
        for strategy, paper in c.paper.items():
            got = c.autopar[strategy]
            print(f"| {c.title} | `{strategy}` ({STRATEGY_INFO[strategy].label}) | {paper:.2f}x | {got:.2f}x "
                  f"| {got / paper:.2f} |")


if __name__ == "__main__":
    main()
