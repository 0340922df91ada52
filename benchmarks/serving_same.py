"""Whether `serve suggest` / `serve estimate` print the same as another checkout: 22 commands, text and --json.

    python benchmarks/serving_same.py --against /tmp/old              # every command
    python benchmarks/serving_same.py --against /tmp/old --only 8 12  # some, by number

A change that only makes the sweep faster must keep stdout, stderr and the exit code of each command
byte for byte, but `points_bounded` in --json (the points bounded without solving:
docs/performance.md, "Serving: `serve suggest`"). Each command runs from each checkout
(`python -m autopar`, the checkout on PYTHONPATH); a line per command says same or differs, and
the exit status is 1 if any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# vLLM, SGLang, TensorRT-LLM; aggregated and disaggregated; dense and MoE; default and given targets,
# targets nothing meets, --emit of each engine, --kv-dtype, --modes; the two TensorRT-LLM MoE sweeps
# and DeepSeek-V3 on 1,024 GPUs take about a minute each
COMMANDS = (
    "serve suggest llama3.1-70b --gpus 8 --hardware h100-sxm --ttft-ms 500 --tpot-ms 30",
    "serve suggest llama3.1-8b --gpus 8 --hardware h100-sxm",
    "serve suggest qwen3-32b --gpus 8 --hardware h100-sxm --framework sglang",
    "serve suggest llama3.1-70b --gpus 16 --hardware h200-sxm --framework trtllm --modes disagg",
    "serve suggest qwen3-30b-a3b --gpus 8 --hardware h100-sxm --framework sglang",
    "serve suggest mixtral-8x7b --gpus 8 --hardware h100-sxm --tpot-ms 20",
    "serve suggest qwen3-30b-a3b --gpus 16 --hardware h100-sxm --framework trtllm --isl 4096 --osl 256",
    "serve suggest qwen3-30b-a3b --gpus 32 --hardware h100-sxm --emit vllm",
    "serve suggest qwen3-235b-a22b --gpus 64 --hardware h200-sxm",
    "serve suggest qwen3-235b-a22b --gpus 64 --hardware h200-sxm --tpot-ms 30 --ttft-ms 1000",
    "serve suggest qwen3-235b-a22b --gpus 32 --hardware h200-sxm --framework sglang --tpot-ms 25",
    "serve suggest deepseek-v3 --gpus 64 --hardware h200-sxm --framework trtllm --weights fp8",
    "serve suggest deepseek-v3 --gpus 1024 --hardware h200-sxm",
    "serve suggest mixtral-8x7b --gpus 8 --hardware h100-sxm --tpot-ms 1",
    "serve suggest llama3.1-70b --gpus 8 --hardware h100-sxm --modes disagg --ttft-ms 100",
    "serve suggest llama3.1-8b --gpus 8 --hardware h100-sxm --framework sglang --emit sglang",
    "serve suggest llama3.1-8b --gpus 8 --hardware h100-sxm --framework trtllm --emit trtllm",
    "serve suggest llama3.1-70b --gpus 8 --hardware h100-sxm --kv-dtype fp8",
    "serve suggest qwen3-30b-a3b --gpus 8 --hardware h100-sxm --modes agg --isl 4096 --osl 16",
    "serve suggest llama3.1-8b --gpus 4 --hardware h100-sxm --isl 4096 --osl 1024 --tpot-ms 15",
    "serve estimate llama3.1-70b --gpus 8 --hardware h100-sxm --tp 8 --concurrency 64",
    "serve estimate qwen3-30b-a3b --gpus 8 --hardware h100-sxm --tp 1 --dp 8 --attention-dp --ep 8 --concurrency 512 --framework sglang",
)


def run(args: list[str], root: Path) -> tuple[str, str, int]:
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "autopar", *args], capture_output=True, text=True, cwd=root, env=env, check=False)
    return done.stdout, done.stderr, done.returncode


def _unbounded(doc: Any) -> Any:
    """The --json document without its points_bounded."""
    if isinstance(doc, dict):
        return {k: _unbounded(v) for k, v in doc.items() if k != "points_bounded"}
    if isinstance(doc, list):
        return [_unbounded(v) for v in doc]
    return doc


def same(ours: tuple[str, str, int], theirs: tuple[str, str, int], *, as_json: bool) -> bool:
    if ours[1:] != theirs[1:]:
        return False
    if as_json and ours[0] != theirs[0]:
        try:
            return bool(_unbounded(json.loads(ours[0])) == _unbounded(json.loads(theirs[0])))
        except ValueError:
            return False
    return ours[0] == theirs[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, required=True, help="another checkout (e.g. a git archive of an older commit)")
    ap.add_argument("--only", type=int, nargs="*", help="the commands to run, by number from 0")
    args = ap.parse_args()
    other, differ = args.against.resolve(), 0
    for i, line in enumerate(COMMANDS):
        if args.only and i not in args.only:
            continue
        for as_json in (False, True):
            cmd = line.split() + (["--json"] if as_json else [])
            ok = same(run(cmd, ROOT), run(cmd, other), as_json=as_json)
            differ += not ok
            print(f"{i:2d} {'same   ' if ok else 'DIFFERS'} {' '.join(cmd)}", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
