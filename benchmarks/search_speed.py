"""Search speed and whole-process times of `suggest`, `--gpus auto` and `--plot`.

    python benchmarks/search_speed.py                     # the named cases, as a table
    python benchmarks/search_speed.py --sweep             # also every preset at 8 to 16,384 GPUs
    python benchmarks/search_speed.py --against /tmp/old  # the same, and another checkout's figures and ratios
    python benchmarks/search_speed.py --against /tmp/old --rounds 3  # searches: medians of 3 alternate rounds
    python benchmarks/search_speed.py --phases            # where each search's time goes

Searches: `suggest`'s search in a fresh process per case (CPU seconds of the
search alone, median of 3 in that process) for the largest dense models at the
largest scale and the MoE models whose spaces are widest (experts multiply the
layouts: every ep dividing the experts, etp 1 or tp), on H100s with the default
global batch and stack (as `suggest` runs it). Commands: whole `python -m
autopar` processes (CPU seconds of the child, user + system, median of 5, after
one unmeasured run), with bytecode cached under a temporary PYTHONPYCACHEPREFIX
so that a checkout run with PYTHONDONTWRITEBYTECODE is not compiled every time.

Targets (docs/performance.md): every search under 0.5 s of CPU; a 70B
fixed-length `suggest` under 0.4 s whole process; `--gpus auto` and `--plot`
within 1.5x of the plain `suggest` of the same model. CPU time, not wall time,
so that other work on the machine inflates the figures less; with --against the
two checkouts run alternately, case by case, and the ratios (this / other) are
what to read on a shared machine. The sweep's 12,288 and 15,360 GPUs are the
counts up to 16,384 with the most layouts for the MoE presets (their node counts
have the most divisors: more pipeline depths, expert-parallel degrees, batches).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = (
    ("llama3.1-405b", 16384),
    ("llama3-70b", 16384),
    ("deepseek-v3", 4096),
    ("deepseek-v3", 16384),
    ("kimi-k2", 4096),
    ("kimi-k2", 16384),
    ("kimi-k2", 15360),  # the sweep's slowest: the most layouts (82,276) and plans to time
    ("deepseek-v3", 1024),
    ("qwen3-235b-a22b", 256),
    ("gpt-oss-120b", 64),
    ("qwen3-30b-a3b", 64),
    ("mixtral-8x7b", 32),
)
SWEEP_GPUS = (8, 64, 512, 4096, 12288, 15360, 16384)
SEARCH_TARGET_S = 0.5
SUGGEST_TARGET_S = 0.4  # a 70B fixed-length suggest, whole process
RATIO_TARGET = 1.5  # --gpus auto and --plot against the plain suggest
# (label, arguments, the plain suggest it is held to): a 70B model on one node's worth of GPUs
COMMANDS = (
    ("suggest llama3-8b --gpus 8", ["suggest", "llama3-8b", "--gpus", "8", "--json"], None),
    ("suggest llama3-70b --gpus 64", ["suggest", "llama3-70b", "--gpus", "64", "--json"], None),
    ("suggest llama3-70b --gpus auto", ["suggest", "llama3-70b", "--gpus", "auto", "--json"], "suggest llama3-70b --gpus 64"),
    (
        "suggest llama3-70b --gpus 64 --plot",
        ["suggest", "llama3-70b", "--gpus", "64", "--json", "--plot", "{tmp}/p.svg"],
        "suggest llama3-70b --gpus 64",
    ),
    ("suggest deepseek-v3 --gpus 1024", ["suggest", "deepseek-v3", "--gpus", "1024", "--json"], None),
    (
        "suggest deepseek-v3 --gpus 1024 --plot",
        ["suggest", "deepseek-v3", "--gpus", "1024", "--json", "--plot", "{tmp}/p.svg"],
        "suggest deepseek-v3 --gpus 1024",
    ),
    ("autopar --help", ["--help"], None),
)

# Run in a fresh process with the checkout under test first on the path: CPU seconds of each search.
_SEARCH = """
import json, statistics, sys, time
from autopar.errors import InfeasibleError
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.search.planner import search
from autopar.spec.job import Job, default_global_batch
out = []
for name, gpus, repeats in json.loads(sys.argv[1]):
    model, hw, stack = load_model(name), load_hardware("h100-sxm"), load_stack(None)
    job = Job(gpus=gpus, gpus_per_node=hw.gpus_per_node, seq_len=model.seq_len,
              global_batch=default_global_batch(gpus, hw.gpus_per_node, model.seq_len))
    times, line = [], "no plan fits"
    for _ in range(repeats):
        start = time.process_time()
        try:
            result = search(model, hw, job, stack=stack)
        except InfeasibleError:
            result = None
        times.append(time.process_time() - start)
    if result is not None:
        best = result.ranked[0].plan
        line = f"{result.considered:>7,} {result.feasible:>7,} {result.ranked.exact:>6,}  {best.label()} mbs{best.mbs}"
    out.append([statistics.median(times), line])
print(json.dumps(out))
"""

# The same search, its CPU seconds split by the steps of search/planner.py (each wrapped where the planner
# calls it; the enumeration is timed as the search loop draws from it, so it is the loop's share).
_PHASES = """
import json, sys, time
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from autopar.search import planner, scan
from autopar.spec.job import Job, default_global_batch
STEPS = {(scan, "block_peaks"): "memory check", (planner, "class_floors"): "class bounds",
         (planner, "step_floors"): "plan bounds", (planner, "variant_step_seconds"): "timing", (planner, "rank"): "ranking"}
spent = dict.fromkeys(STEPS.values(), 0.0)
def timed(fn, what):
    def run(*args, **kw):
        start = time.process_time()
        try:
            return fn(*args, **kw)
        finally:
            spent[what] += time.process_time() - start
    return run
for (module, name), what in STEPS.items():
    setattr(module, name, timed(getattr(module, name), what))
out = []
for name, gpus in json.loads(sys.argv[1]):
    model, hw, stack = load_model(name), load_hardware("h100-sxm"), load_stack(None)
    job = Job(gpus=gpus, gpus_per_node=hw.gpus_per_node, seq_len=model.seq_len,
              global_batch=default_global_batch(gpus, hw.gpus_per_node, model.seq_len))
    spent.update(dict.fromkeys(spent, 0.0))
    start = time.process_time()
    try:
        planner.search(model, hw, job, stack=stack)
    except Exception:
        pass
    total = time.process_time() - start
    out.append([total, {**spent, "enumeration, loop, heap": total - sum(spent.values())}])
print(json.dumps(out))
"""


def time_phases(tree: Path, cases: list[tuple[str, int]], cache: str) -> list[tuple[float, dict[str, float]]]:
    """(CPU seconds, seconds per step of the search) of each case, one fresh search in one process."""
    done = subprocess.run(
        [sys.executable, "-c", _PHASES, json.dumps(cases)], check=True, capture_output=True, text=True, cwd=tree, env=_env(tree, cache)
    )
    return [(float(total), {k: float(v) for k, v in parts.items()}) for total, parts in json.loads(done.stdout)]


def _env(tree: Path, cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=cache)
    return env


def time_searches(tree: Path, cases: list[tuple[str, int]], repeats: int, cache: str) -> list[tuple[float, str]]:
    """(median CPU seconds, a one-line summary) of each case's search, the code of `tree` in one process."""
    arg = json.dumps([[n, g, repeats] for n, g in cases])
    done = subprocess.run([sys.executable, "-c", _SEARCH, arg], check=True, capture_output=True, text=True, cwd=tree, env=_env(tree, cache))
    return [(float(s), str(line)) for s, line in json.loads(done.stdout)]


def time_command(tree: Path, args: list[str], cache: str, repeats: int = 5) -> float:
    """Median CPU seconds (user + system) of `python -m autopar ARGS` processes running `tree`'s code."""
    env = _env(tree, cache)
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "autopar", *(a.replace("{tmp}", tmp) for a in args)]
        subprocess.run(argv, check=True, capture_output=True, cwd=tree, env=env)  # warms the bytecode cache
        times = []
        for _ in range(repeats):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(argv, check=True, capture_output=True, cwd=tree, env=env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def _ratio(new: float, old: float | None) -> str:
    return f"{old:>7.3f} {new / old:>5.2f}x" if old else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true", help="every preset at 8 to 16,384 GPUs as well")
    ap.add_argument("--against", type=Path, help="another checkout (e.g. git worktree of an older commit) to compare")
    ap.add_argument("--rounds", type=int, default=1, help="searches: alternate rounds per case, medians reported")
    ap.add_argument("--phases", action="store_true", help="only: each search's CPU seconds by step, then exit")
    args = ap.parse_args()
    if args.phases:
        with tempfile.TemporaryDirectory() as cache:
            for (name, gpus), (total, parts) in zip(CASES, time_phases(ROOT, list(CASES), cache), strict=True):
                shares = ", ".join(f"{k} {v / total:.0%}" for k, v in parts.items() if v >= 0.005 * total)
                print(f"{name:<16} {gpus:>6} {total:>6.3f} s: {shares}")
        return 0
    other: Path | None = args.against.resolve() if args.against else None
    ok = True
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cache_other:
        head = f"{'model':<16} {'GPUs':>6} {'CPU s':>6}" + ("  before  ratio" if other else "")
        print(f"{head}  {'plans':>7} {'fit':>7} {'ranked':>6}  best")
        for name, gpus in CASES:
            news, olds = [], []
            for _ in range(args.rounds):  # alternately, so that both see the same load
                ((secs, line),) = time_searches(ROOT, [(name, gpus)], 3, cache)
                news.append(secs)
                if other:
                    olds.append(time_searches(other, [(name, gpus)], 3, cache_other)[0][0])
            secs, old = statistics.median(news), (statistics.median(olds) if olds else None)
            ok &= secs < SEARCH_TARGET_S
            print(f"{name:<16} {gpus:>6} {secs:>6.3f} {_ratio(secs, old)}  {line}")
        if args.sweep:
            from autopar.io.models import preset_names  # this checkout's presets

            cases = [(n, g) for n in preset_names() for g in SWEEP_GPUS]
            secs_all = [s for s, _ in time_searches(ROOT, cases, 1, cache)]
            worst = max(range(len(cases)), key=secs_all.__getitem__)
            ok &= secs_all[worst] < SEARCH_TARGET_S
            print(f"sweep: {len(cases)} searches, slowest {secs_all[worst]:.3f} s ({cases[worst][0]} on {cases[worst][1]})")
        print(f"\n{'command (whole process, CPU s)':<40} {'CPU s':>6}" + ("  before  ratio" if other else "") + "  target")
        seen: dict[str, float] = {}
        for label, argv, plain in COMMANDS:
            secs = time_command(ROOT, argv, cache)
            old = time_command(other, argv, cache_other) if other else None
            seen[label] = secs
            target = ""
            if plain is not None:
                rel = secs / seen[plain]
                ok &= rel <= RATIO_TARGET
                target = f"{rel:.2f}x of plain (<= {RATIO_TARGET}x)"
            elif label.startswith("suggest llama3-70b"):
                ok &= secs < SUGGEST_TARGET_S
                target = f"< {SUGGEST_TARGET_S} s"
            print(f"{label:<40} {secs:>6.3f} {_ratio(secs, old)}  {target}")
    print(f"\ntargets: {'all met' if ok else 'NOT all met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
