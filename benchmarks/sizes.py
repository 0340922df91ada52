"""The modules over about 400 lines and the functions over about 80 (issue 22's size habits).

    python -m benchmarks.sizes [--lines 400] [--function-lines 80]

Counts physical lines of each module under autopar/ and, from `ast`, the span of every function
(decorators included). Prints what is over the limits, largest first; it reports, it does not fail.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "autopar"


def modules(root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(lines, path relative to the repository) of every module under `root`."""
    return [(len(p.read_text().splitlines()), str(p.relative_to(root.parent))) for p in sorted(root.rglob("*.py"))]


def functions(root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(lines, path:line name) of every function and method under `root`."""
    out = []
    for p in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append((node.end_lineno - start + 1, f"{p.relative_to(root.parent)}:{start} {node.name}"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=400, help="module limit (default 400)")
    ap.add_argument("--function-lines", type=int, default=80, help="function limit (default 80)")
    args = ap.parse_args(argv)
    big = sorted((m for m in modules() if m[0] > args.lines), reverse=True)
    long = sorted((f for f in functions() if f[0] > args.function_lines), reverse=True)
    print(f"modules over {args.lines} lines: {len(big)}")
    for n, name in big:
        print(f"  {n:5d}  {name}")
    print(f"functions over {args.function_lines} lines: {len(long)}")
    for n, name in long:
        print(f"  {n:5d}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
