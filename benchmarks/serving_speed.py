"""Wall time of a serving sweep: `autopar serve suggest llama3.1-70b --gpus 8`, agg and disagg, both KV dtypes.

    python benchmarks/serving_speed.py

Prints the in-process sweep time (best of 3) and the whole command's time
(start-up, model and profile loading, sweep, rendering), wall and CPU: on a
shared machine the wall time includes waiting for a core.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.search.serve import Targets, sweep


def main() -> int:
    model, hw = load_model("llama3.1-70b"), load_hardware("h100-sxm")
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        result = sweep(model, hw, gpus=8, isl=1024, osl=1024, framework="vllm", weights="bf16",
                       kv_dtypes=("auto", "fp8"), modes=("agg", "disagg"), targets=Targets(ttft_s=0.5, tpot_s=0.03))
        best = min(best, time.perf_counter() - t0)
    print(f"sweep: {result.layouts} deployments, {len(result.points)} points priced, {best:.3f} s")
    cmd = [sys.executable, "-m", "autopar", "serve", "suggest", "llama3.1-70b", "--gpus", "8", "--hardware", "h100-sxm",
           "--isl", "1024", "--osl", "1024", "--ttft-ms", "500", "--tpot-ms", "30", "--json"]
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"command: {time.perf_counter() - t0:.3f} s wall, {cpu:.3f} s CPU ({' '.join(cmd[3:])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
