"""How long a refusal takes: every bound of docs/limits.md, checked before any work.

    python benchmarks/limits.py            # the table, median of 3 runs each
    python benchmarks/limits.py --runs 5

Runs the refusal rows of tests/support/hostile.py (issue 26's bounded work and checks-first
rows, and issue 13's huge sizes) as the user would, each in a fresh folder whose
files are written before the clock starts, and times each run's CPU seconds (user
+ system of the child processes, so that other work on the machine inflates the
figures less; start-up included). A row passes when it exits with its code and
its median is under REFUSAL_CPU_S, the bound docs/limits.md states. Exit 1 when
any row fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a file: python benchmarks/limits.py
    import _as_script  # noqa: F401

from tests.support.hostile import CASES, Case

ROOT = Path(__file__).resolve().parent.parent

REFUSAL_CPU_S = 2.0  # docs/limits.md: a refusal takes under 2 s of CPU time, start-up included
CAUSES = ("26.7", "26.8", "5")  # bounded work, checks before the work, huge sizes
AUTOPAR = f"'{sys.executable}' -m autopar"


def refusals() -> list[Case]:
    return [c for c in CASES if c.cause.split()[0] in CAUSES and c.code != 0]


def _env(tmp: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOPAR_", "PYTHONIOENCODING"))}
    return {**base, "AUTOPAR_HOME": str(tmp / "home"), "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "80"}


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_once(case: Case) -> tuple[int, float, float]:
    """Exit code, CPU seconds and wall seconds of one run of `case` in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="autopar-limits-") as folder:
        tmp = Path(folder)
        command = case.setup(tmp).replace("{A}", AUTOPAR).replace("{T}", str(tmp))
        env = {**_env(tmp), **{k: v.replace("{T}", str(tmp)) for k, v in case.env.items()}}
        cpu, wall = _children_cpu(), time.perf_counter()
        res = subprocess.run(
            ["bash", "-c", command], cwd=tmp, env=env, capture_output=True, check=False, stdin=subprocess.DEVNULL, timeout=300
        )
        return res.returncode, _children_cpu() - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each row (the median is kept)")
    args = parser.parse_args()
    failed = 0
    print(f"{'row':58} {'exit':>4} {'CPU s':>6} {'wall s':>6}  bound {REFUSAL_CPU_S:g} s CPU")
    for case in refusals():
        runs = [run_once(case) for _ in range(args.runs)]
        codes = {code for code, _, _ in runs}
        cpu = statistics.median(c for _, c, _ in runs)
        wall = statistics.median(w for _, _, w in runs)
        ok = codes == {case.code} and cpu < REFUSAL_CPU_S
        failed += not ok
        name = f"{case.cause.split()[0]} {case.name}"[:58]
        print(f"{name:58} {'/'.join(map(str, sorted(codes))):>4} {cpu:6.2f} {wall:6.2f}  {'ok' if ok else 'FAIL'}")
    print(f"{failed} of {len(refusals())} rows over the bound or with another exit code" if failed else "all within bounds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
