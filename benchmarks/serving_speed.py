"""CPU time of `autopar serve suggest`: dense, MoE and disaggregated fleets, each engine.

    python benchmarks/serving_speed.py                     # every case
    python benchmarks/serving_speed.py --quick             # the cases under a few seconds
    python benchmarks/serving_speed.py --against /tmp/old  # also another checkout, alternately, and the ratios

Prints the in-process sweep time of one case (best of 3, each on fresh objects), then each whole
command's CPU seconds (start-up, model and profile loading, sweep, rendering;
user + system of the child, the median of 3 runs, one run past 10 s) and the
points it solved and bounded: CPU rather than wall time, as a shared machine
makes the wall time wait for a core. With --against the two checkouts run
alternately, case by case (the other one first), each `python -m autopar`
from its own folder, and the ratio this / other is what to read; the target
(docs/performance.md) is under 2 s of CPU for every case.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run as a file: python benchmarks/serving_speed.py
    import _as_script  # noqa: F401

from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.search.serve import Targets, sweep

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 2.0  # CPU seconds of a whole serve suggest (docs/performance.md)

# (label, serve suggest arguments, quick)
CASES = (
    ("dense, 8 H100", "llama3.1-70b --gpus 8 --hardware h100-sxm --ttft-ms 500 --tpot-ms 30", True),
    ("dense, 8 H100, default targets", "llama3.1-8b --gpus 8 --hardware h100-sxm", True),
    ("dense, sglang", "qwen3-32b --gpus 8 --hardware h100-sxm --framework sglang", True),
    ("dense, trtllm, disagg only", "llama3.1-70b --gpus 16 --hardware h200-sxm --framework trtllm --modes disagg", True),
    ("MoE, 8 H100, sglang", "qwen3-30b-a3b --gpus 8 --hardware h100-sxm --framework sglang", True),
    ("MoE, 8 H100, targets", "mixtral-8x7b --gpus 8 --hardware h100-sxm --tpot-ms 20", True),
    ("MoE, 16 H100, trtllm", "qwen3-30b-a3b --gpus 16 --hardware h100-sxm --framework trtllm --isl 4096 --osl 256", False),
    ("MoE, 64 H200", "qwen3-235b-a22b --gpus 64 --hardware h200-sxm", False),
    ("MoE, 64 H200, targets", "qwen3-235b-a22b --gpus 64 --hardware h200-sxm --tpot-ms 30 --ttft-ms 1000", False),
    ("MoE, 64 H200, trtllm fp8", "deepseek-v3 --gpus 64 --hardware h200-sxm --framework trtllm --weights fp8", False),
    ("MoE, 1,024 H200", "deepseek-v3 --gpus 1024 --hardware h200-sxm", False),
)


def command_cpu(args: str, root: Path) -> tuple[float, str]:
    """CPU seconds of one `autopar serve suggest ARGS --json` run from the checkout `root`, and its
    points solved / bounded."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "autopar", "serve", "suggest", *args.split(), "--json"],
        check=True,
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.loads(done.stdout)
    points = f"{doc['points_priced'] - doc['points_bounded']:,} of {doc['points_priced']:,} solved"
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, points


def median_cpu(args: str, root: Path) -> tuple[float, str]:
    cpu, points = command_cpu(args, root)
    runs = [cpu]
    while runs[0] < 10 and len(runs) < 3:
        runs.append(command_cpu(args, root)[0])
    return statistics.median(runs), points


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the cases under a few seconds")
    ap.add_argument("--against", type=Path, help="another checkout (e.g. a git worktree of an older commit)")
    args = ap.parse_args()
    best = float("inf")
    for _ in range(3):  # fresh model and profile objects: the sweep's caches hold their points by identity
        model, hw = load_model("llama3.1-70b"), load_hardware("h100-sxm")
        t0 = time.process_time()
        result = sweep(
            model,
            hw,
            gpus=8,
            isl=1024,
            osl=1024,
            framework=load_framework("vllm"),
            weights="bf16",
            kv_dtypes=("auto", "fp8"),
            modes=("agg", "disagg"),
            targets=Targets(ttft_s=0.5, tpot_s=0.03),
        )
        best = min(best, time.process_time() - t0)
    print(
        f"sweep llama3.1-70b on 8 H100: {result.layouts} deployments, {len(result.points)} points priced, "
        f"{result.skipped} bounded, {best:.3f} s CPU"
    )
    other = args.against.resolve() if args.against else None
    for label, case, fast in CASES:
        if args.quick and not fast:
            continue
        was = median_cpu(case, other)[0] if other is not None else None
        cpu, points = median_cpu(case, ROOT)
        flag = "" if cpu < TARGET_S else "  (over the target)"
        then = f"  before {was:6.2f} s, ratio {cpu / was:.2f}x" if was is not None else ""
        print(f"{cpu:8.2f} s CPU{then}  {label}: serve suggest {case} ({points}){flag}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
