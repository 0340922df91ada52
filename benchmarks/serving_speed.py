"""CPU time of `autopar serve suggest`: dense, MoE and disaggregated fleets, each engine.

    python benchmarks/serving_speed.py           # every case
    python benchmarks/serving_speed.py --quick   # the cases under a few seconds

Prints the in-process sweep time of one case (best of 3), then each whole
command's CPU seconds (start-up, model and profile loading, sweep, rendering;
user + system of the child, the median of 3 runs, one run past 10 s): CPU
rather than wall time, as a shared machine makes the wall time wait for a core.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

if not __package__:  # run as a file: python benchmarks/serving_speed.py
    import _as_script  # noqa: F401

from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.search.serve import Targets, sweep

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
    ("MoE, 1,024 H200", "deepseek-v3 --gpus 1024 --hardware h200-sxm", False),
)


def command_cpu(args: str) -> float:
    """CPU seconds of one `autopar serve suggest ARGS --json`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "autopar", "serve", "suggest", *args.split(), "--json"], check=True,
                   capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    model, hw = load_model("llama3.1-70b"), load_hardware("h100-sxm")
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        result = sweep(model, hw, gpus=8, isl=1024, osl=1024, framework=load_framework("vllm"), weights="bf16",
                       kv_dtypes=("auto", "fp8"), modes=("agg", "disagg"), targets=Targets(ttft_s=0.5, tpot_s=0.03))
        best = min(best, time.process_time() - t0)
    print(f"sweep llama3.1-70b on 8 H100: {result.layouts} deployments, {len(result.points)} points priced, "
          f"{result.skipped} bounded, {best:.3f} s CPU")
    for label, args, fast in CASES:
        if quick and not fast:
            continue
        runs = [command_cpu(args)]
        while runs[0] < 10 and len(runs) < 3:
            runs.append(command_cpu(args))
        print(f"{statistics.median(runs):8.2f} s CPU  {label}: serve suggest {args}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
