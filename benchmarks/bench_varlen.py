"""Time the variable-length simulation: 1,000 sampled steps of a 4,096-sequence batch, one plan.

    python benchmarks/bench_varlen.py [--steps 1000] [--batch 4096] [--dist examples/seqlen/long_context.yaml]
    python benchmarks/bench_varlen.py --all [--steps 128]   # CPU of simulate on every example distribution

Prints the wall and CPU seconds of ``simulate`` (every strategy, FAST
greedy), the same with the convergence check (``rel_sem=0.005``), the cost of
each strategy alone, how far FAST is from EXACT LPT on a few steps, and the
strategy comparison itself. The plan and the per-sequence cost are those of the
README example: an 8B-class model per stage (alpha, beta below), dp 8 x cp 4 x
pp 4, 128K tokens per micro-batch (cp sized for the 128K maximum), 32K tokens
of activation memory per GPU.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

if not __package__:  # run as a file: python benchmarks/bench_varlen.py
    import _as_script  # noqa: F401

from autopar.io.distributions import load_distribution
from autopar.varlen import (
    EXACT,
    FAST,
    STRATEGIES,
    QuadraticSeqCost,
    VarlenPlan,
    balanced_packing,
    hdp,
    megatron_dynamic_cp,
    naive_packing,
    simulate,
    step_metrics,
    wlb_packing,
)

# Llama-3-8B-like, per pipeline stage of pp = 4 on an H100-class GPU at ~400 TFLOP/s effective:
# attention 6 * L^2 * d * layers = 6 * 4096 * 32 L^2 FLOPs -> 2.0e-9 s/token^2 for the model, / 4 stages;
# linear 6 * 8e9 FLOPs/token -> 1.2e-4 s/token, / 4 stages; CP ring: 0.2 us/token exposed, 0.5 ms per hop.
COST = QuadraticSeqCost(alpha_s_per_tok2=2.0e-9 / 4, beta_s_per_tok=1.2e-4 / 4, comm_s_per_tok=2e-7, comm_latency_s=5e-4)
T = TypeVar("T")
PLAN: dict[str, Any] = dict(dp=8, cp=4, pp=4, micro_batch_tokens=131072, max_tokens_per_rank=32768)


def timed(fn: Callable[..., T], *args: Any, **kw: Any) -> tuple[T, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kw)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3, help="time the full run this many times, report the best")
    ap.add_argument("--dist", default=str(Path(__file__).resolve().parent.parent / "examples/seqlen/long_context.yaml"))
    ap.add_argument("--all", action="store_true", help="only the CPU of simulate on every examples/seqlen distribution")
    args = ap.parse_args()
    if args.all:
        every_distribution(args.steps, args.batch, args.repeat)
        return
    dist = load_distribution(args.dist)
    print(f"distribution {args.dist}: mean {dist.mean_len:.0f} tokens, max {dist.max_len}")
    print(f"plan {PLAN}, global batch {args.batch} sequences")

    simulate(dist, COST, global_batch=args.batch, steps=8, **PLAN)  # warm-up (imports, allocator)
    runs = [timed(simulate, dist, COST, global_batch=args.batch, steps=args.steps, **PLAN) for _ in range(args.repeat)]
    res = runs[0][0]
    walls, cpus = [r[1] for r in runs], [r[2] for r in runs]
    print(
        f"\nsimulate, {args.steps} steps x {args.batch} sequences, {len(STRATEGIES)} strategies, best of {args.repeat}: "
        f"{min(walls):.2f} s wall, {min(cpus):.2f} s CPU (all: {', '.join(f'{w:.2f}' for w in walls)} s wall)"
    )
    conv, wall_c, cpu_c = timed(simulate, dist, COST, global_batch=args.batch, steps=args.steps, rel_sem=0.005, min_steps=128, **PLAN)
    steps_used = next(iter(conv.values())).steps
    print(f"with the convergence check (SEM < 0.5% of the mean): {steps_used} steps, {wall_c:.2f} s wall, {cpu_c:.2f} s CPU")

    plan = VarlenPlan(**PLAN)
    lengths = dist.sample((128, args.batch), np.random.default_rng(0))
    naive, _, cpu_n = timed(naive_packing, lengths, COST, plan)
    per = {"naive": cpu_n}
    gaps = {}
    for fn in (balanced_packing, wlb_packing, megatron_dynamic_cp, hdp):
        _, _, cpu_f = timed(fn, lengths, COST, plan, n_microbatches=naive.n_microbatches, greedy=FAST)
        per[fn.__name__] = cpu_f
        few = lengths[:8]
        m = naive.n_microbatches[:8]
        exact = step_metrics(fn(few, COST, plan, n_microbatches=m, greedy=EXACT), plan.pp).step_time_s.mean()
        approx = step_metrics(fn(few, COST, plan, n_microbatches=m, greedy=FAST), plan.pp).step_time_s.mean()
        gaps[fn.__name__] = approx / exact - 1
    print("CPU seconds per 128 steps: " + ", ".join(f"{k} {v:.3f}" for k, v in per.items()))
    print("FAST vs EXACT LPT, mean step time over 8 steps: " + ", ".join(f"{k} {v:+.2%}" for k, v in gaps.items()))

    print(
        f"\n{'strategy':<19} {'step s':>8} {'p99 s':>8} {'imbal':>6} {'stall':>6} {'bubble':>6} {'Mtok/s':>7} "
        f"{'vs naive':>8} {'CP avg':>6} {'longest fit':>11}"
    )
    base = res["naive"].step_time_mean_s
    for name in STRATEGIES:
        r = res[name]
        print(
            f"{name:<19} {r.step_time_mean_s:8.2f} {r.step_time_p99_s:8.2f} {r.imbalance_mean:6.3f} "
            f"{r.stall_frac_mean:6.1%} {r.bubble_frac_mean:6.1%} {r.tokens_per_s / 1e6:7.3f} "
            f"{base / r.step_time_mean_s:7.2f}x {r.mean_group_size:6.2f} {r.longest_fit_tokens:>11,}"
        )


def every_distribution(steps: int, batch: int, repeat: int) -> None:
    """simulate (FAST, every strategy) on each example distribution: best CPU seconds of ``repeat`` runs."""
    print(f"plan {PLAN}, {steps} steps x {batch} sequences, best of {repeat}")
    for path in sorted((Path(__file__).resolve().parent.parent / "examples" / "seqlen").glob("*.yaml")):
        if path.name == "papers.yaml":  # the paper setups, not a distribution
            continue
        dist = load_distribution(str(path))
        cpus = [timed(simulate, dist, COST, global_batch=batch, steps=steps, **PLAN)[2] for _ in range(repeat)]
        print(f"{path.name:<18} {min(cpus):7.3f} s CPU")


if __name__ == "__main__":
    main()
