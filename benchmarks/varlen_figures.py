"""Variable-length answers before and after a change: every example distribution, figures and CPU time.

    python benchmarks/varlen_figures.py --record [--only NAME ...]   # write benchmarks/data/varlen_figures.json
    python benchmarks/varlen_figures.py [--only NAME ...]            # rerun, compare with that file

Each case is one whole ``autopar ... --json`` process (CPU time of the child:
user + system, from ``resource.getrusage``). ``--record`` stores the JSON
answers with the command and commit that produced them; the comparison walks
both answers and reports, per case, the largest relative difference of any
number (fractions of a step, keys ending ``_frac``, are compared in absolute
terms: their 0.1% is of the step), whether the plans keep their order, and the
CPU time before and after. It exits 1 when a case moves by more than
``--tolerance`` (default 0.1%).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "varlen_figures.json"
SEQ = "examples/seqlen/"
CASES: dict[str, list[str]] = {
    "chat_short": ["suggest", "llama3.1-70b", "--gpus", "64", "--seq-len-dist", SEQ + "chat_short.yaml"],
    "long_context": ["suggest", "llama3.1-70b", "--gpus", "64", "--seq-len-dist", SEQ + "long_context.yaml"],
    "wlb": ["suggest", "llama3.1-70b", "--gpus", "64", "--seq-len-dist", SEQ + "wlb.yaml"],
    "bytescale": ["suggest", "examples/models/llama-7b.yaml", "--gpus", "1024", "--seq-len-dist", SEQ + "bytescale.yaml"],
    "estimate_wlb": [
        "estimate",
        "examples/models/llama-7b.yaml",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "64",
        "--tp",
        "8",
        "--cp",
        "2",
        "--pp",
        "4",
        "--seq-len-dist",
        SEQ + "wlb.yaml",
        "--global-batch",
        "118",
        "--varlen-strategy",
        "wlb",
    ],
    # the simulation's own limit: 65,536 sequences per step (spec/limits.py MAX_VARLEN_SEQUENCES)
    "limit_65536": ["suggest", "llama3.1-8b", "--gpus", "8", "--seq-len-dist", SEQ + "chat_short.yaml", "--global-batch", "65536"],
}


def run(argv: list[str]) -> tuple[Any, float]:
    """The JSON answer of one autopar process and its CPU seconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-m", "autopar", *argv, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.stdout), cpu


def diffs(old: Any, new: Any, path: str = "") -> list[tuple[float, str, Any, Any]]:
    """(difference, path, old, new) for every number of ``old``; a missing or changed non-number counts as inf.
    The error bands (``*_range``: the error model's p10-p90 applied to a figure compared here) are not the
    placement's: they move with autopar/data/error_model.yaml and are left out."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [(float("inf"), path, "dict", new)]
        return [d for k, v in old.items() if not k.endswith("_range") for d in diffs(v, new.get(k), f"{path}.{k}")]
    if isinstance(old, list):
        if not isinstance(new, list) or len(new) != len(old):
            return [(float("inf"), path, f"list of {len(old)}", new)]
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in diffs(a, b, f"{path}[{i}]")]
    if isinstance(old, bool) or not isinstance(old, int | float):
        return [] if old == new else [(float("inf"), path, old, new)]
    if isinstance(new, bool) or not isinstance(new, int | float):
        return [(float("inf"), path, old, new)]
    if path.endswith("_frac"):
        return [(abs(new - old), path, old, new)]
    return [(abs(new - old) / max(abs(old), 1e-300), path, old, new)]


def layouts(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [tuple(p.get(k) for k in ("dp", "tp", "pp", "cp", "vpp", "mbs")) for p in answer.get("plans", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help=f"write {DATA.relative_to(ROOT)} from this checkout")
    ap.add_argument("--only", nargs="*", default=None, help="cases to run (default: all)")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    args = ap.parse_args()
    names = args.only or list(CASES)
    if args.record:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
        stored = json.loads(DATA.read_text()) if DATA.exists() else {"cases": {}}
        stored["command"] = "python benchmarks/varlen_figures.py --record"
        stored["commit"] = commit
        for name in names:
            answer, cpu = run(CASES[name])
            stored["cases"][name] = {"argv": CASES[name], "cpu_s": round(cpu, 2), "answer": answer}
            print(f"{name:<14} {cpu:7.2f} s CPU (recorded)", flush=True)
            DATA.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        return
    stored = json.loads(DATA.read_text())
    print(f"against {DATA.relative_to(ROOT)} (commit {stored['commit']}); tolerance {args.tolerance:.2%}")
    print(f"{'case':<14} {'CPU before':>10} {'CPU after':>10} {'ratio':>6} {'max diff':>9}  order  where")
    worst = 0.0
    for name in names:
        case = stored["cases"][name]
        answer, cpu = run(case["argv"])
        found = sorted(diffs(case["answer"], answer), key=lambda d: d[0])
        top = found[-1] if found else (0.0, "", None, None)
        same_order = layouts(case["answer"]) == layouts(answer)
        worst = max(worst, top[0], 0.0 if same_order else float("inf"))
        print(
            f"{name:<14} {case['cpu_s']:9.2f}s {cpu:9.2f}s {case['cpu_s'] / cpu:5.1f}x {top[0]:9.2e}  "
            f"{'same' if same_order else 'MOVED'}  {top[1]} ({top[2]} -> {top[3]})"
        )
    sys.exit(0 if worst <= args.tolerance else 1)


if __name__ == "__main__":
    main()
