"""Search speed and CLI start-up.

    python benchmarks/search_speed.py           # the named cases, as a table
    python benchmarks/search_speed.py --sweep   # also every preset at 8, 64, 512, 4,096, 12,288, 15,360, 16,384 GPUs

Times `suggest`'s search (in-process, CPU seconds of this process, median of 3)
for the largest dense model at the largest scale and the MoE models whose
spaces are widest (experts multiply the layouts: every ep dividing the experts,
etp 1 or tp), on H100s with the default global batch and stack (as `suggest` runs it); then `autopar --help`
start-up (median of 5 fresh processes). Targets: every search under 1 s,
start-up under 0.3 s. CPU time, not wall time, so that other work on the
machine inflates the figures less. The sweep's 12,288 and 15,360 GPUs are the
counts up to 16,384 with the most layouts for the MoE presets (their node counts
have the most divisors: more pipeline depths, expert-parallel degrees, batches).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autopar.errors import InfeasibleError  # noqa: E402
from autopar.io.models import load_model, preset_names  # noqa: E402
from autopar.io.profiles import load_hardware  # noqa: E402
from autopar.io.stacks import load_stack  # noqa: E402
from autopar.search.planner import search  # noqa: E402
from autopar.spec.job import Job, default_global_batch  # noqa: E402

CASES = (("llama3.1-405b", 16384), ("deepseek-v3", 1024), ("qwen3-235b-a22b", 256), ("gpt-oss-120b", 64),
         ("qwen3-30b-a3b", 64), ("mixtral-8x7b", 32))
SWEEP_GPUS = (8, 64, 512, 4096, 12288, 15360, 16384)
TARGET_S = 1.0


def time_search(name: str, gpus: int, repeats: int) -> tuple[float, str]:
    """(median CPU seconds, a one-line summary) of the search for `name` on `gpus` H100s, on the default stack."""
    model, hw, stack = load_model(name), load_hardware("h100-sxm"), load_stack(None)
    job = Job(gpus=gpus, gpus_per_node=hw.gpus_per_node, global_batch=default_global_batch(gpus, hw.gpus_per_node,
              model.seq_len), seq_len=model.seq_len)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        try:
            result = search(model, hw, job, stack=stack)
        except InfeasibleError:
            times.append(time.process_time() - start)
            return statistics.median(times), "no plan fits"
        times.append(time.process_time() - start)
    best = result.ranked[0].plan
    return statistics.median(times), (f"{result.considered:>7,} {result.feasible:>7,} {result.ranked.exact:>6,}  "
                                      f"{best.label()} mbs{best.mbs}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true", help="every preset at 8 to 16,384 GPUs as well")
    args = ap.parse_args()
    print(f"{'model':<16} {'GPUs':>6} {'CPU s':>6}  {'plans':>7} {'fit':>7} {'ranked':>6}  best")
    worst = 0.0
    for name, gpus in CASES:
        secs, line = time_search(name, gpus, 3)
        worst = max(worst, secs)
        print(f"{name:<16} {gpus:>6} {secs:>6.2f}  {line}")
    if args.sweep:
        slowest = (0.0, "")
        for name in preset_names():
            for gpus in SWEEP_GPUS:
                secs, _ = time_search(name, gpus, 1)
                slowest = max(slowest, (secs, f"{name} on {gpus}"))
        worst = max(worst, slowest[0])
        print(f"sweep: {len(preset_names())} presets x {len(SWEEP_GPUS)} GPU counts, slowest {slowest[0]:.2f} s "
              f"({slowest[1]})")
    verdict = "all under" if worst < TARGET_S else "NOT all under"
    print(f"slowest search {worst:.2f} s CPU: {verdict} {TARGET_S:.0f} s")
    starts = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autopar", "--help"], check=True, capture_output=True)
        starts.append(time.perf_counter() - start)
    print(f"start-up: `python -m autopar --help` median {statistics.median(starts):.3f} s over 5 runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
