"""Search speed and CLI start-up.

    python benchmarks/search_speed.py

Times `suggest` for llama3.1-405b on 16,384 H100s over the whole plan space
(in-process, median of 3, one core), and `autopar --help` start-up (median of
5 fresh processes). Targets: search under 1 s, start-up under 0.3 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autopar.io.models import load_model  # noqa: E402
from autopar.io.profiles import load_hardware  # noqa: E402
from autopar.search.planner import search  # noqa: E402
from autopar.spec.job import Job, default_global_batch  # noqa: E402


def main() -> int:
    model = load_model("llama3.1-405b")
    hw = load_hardware("h100-sxm")
    gpus = 16384
    job = Job(gpus=gpus, gpus_per_node=hw.gpus_per_node, global_batch=default_global_batch(gpus, hw.gpus_per_node, model.seq_len),
              seq_len=model.seq_len)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        result = search(model, hw, job)
        times.append(time.perf_counter() - start)
    best = result.ranked[0].plan
    print(f"search: llama3.1-405b, {gpus} GPUs, batch {job.global_batch}: {result.considered} plans, {result.feasible} fit, "
          f"median {statistics.median(times):.3f} s (best {best.label()} mbs{best.mbs} {best.recompute} zero{best.zero})")
    starts = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "autopar", "--help"], check=True, capture_output=True)
        starts.append(time.perf_counter() - start)
    print(f"start-up: `python -m autopar --help` median {statistics.median(starts):.3f} s over 5 runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
