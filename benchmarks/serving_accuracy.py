"""Predicted against measured TTFT and TPOT for the serving calibration rows.

    python benchmarks/serving_accuracy.py [--csv FILE] [--rows] [--list] [--fit FRAMEWORK] [--holdout model|gpu]
        [--refit-holdout] [--rates] [--repeats]

The headline is out of sample (benchmarks/serving_holdout.py): each fitted
framework version's constants refitted without one model's (one GPU's)
calibration rows and scored on them, and the rows of
benchmarks/data/serving_runs_newer.csv, on which nothing is fitted, per engine
and per model: median and mean absolute error of TTFT and TPOT, rows within
15%, the worst ratio; the in-sample scores beside them. Rows autopar cannot
describe as a user would give them are counted on a "skipped: N (why)" line.

Each row of benchmarks/data/serving_runs.csv (see serving_runs.SOURCE.md) is
turned into a deployment (framework, engine layout, weights dtype) and a
workload (isl, osl, concurrency) by benchmarks/serving_rows.py and run through
autopar's serving model (autopar/cost/serve_load.py). Rows are then sorted into three kinds:

- queue-saturated: the model says the KV cache cannot hold the concurrency
  (requests wait for a slot; TTFT of seconds to minutes). Listed, not scored.
- concurrency not reached: the measured latency at the stated concurrency
  would need a prefill rate above the GPU's best sustained GEMM rate, or
  (aggregated) the prompts at that rate plus the decode steps' weight and KV
  read would take longer than the measured request latency, or
  (disaggregated) the decode batch the measured TTFT leaves decoding would
  take longer to read than the measured TPOT, so the benchmark client did not
  hold that many requests in flight. Listed, not scored; a disaggregated row
  is tested for it first (serving_rows.disagg_concurrency: the file does not
  record the concurrency its run held).
- scored: mean absolute percentage error of TTFT and TPOT per framework, GPU
  and mode.

`--repeats` lists the runs measured more than once on one engine release (the
same deployment, workload and release in several campaigns) whose measurements
are more than REPEAT_SPREAD apart: such a row judges the campaign as much as the
model.

`--logo` refits each framework version without one (GPU, model) group of its
aggregated rows and scores the held-out group (leave-one-group-out).

`--fit NAME@VERSION` re-runs the coordinate search that set the framework's fitted
constants in autopar/data/frameworks/NAME-VERSION.yaml on the scored aggregated rows
(disaggregated rows are held out) and prints their `value:` lines to paste into that
file (the rest of the run scores the rows with them); docs/calibration.md keeps the
history of each fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import sys
import textwrap
from collections.abc import Iterable, Iterator
from pathlib import Path

if not __package__:  # run as a file: python benchmarks/serving_accuracy.py
    import _as_script  # noqa: F401

from autopar.cost.flops import matmul_params
from autopar.cost.kernels import sustained
from autopar.cost.serve import decode_step, gemm_dtype, prefill_time
from autopar.cost.serve_load import ServeEstimate, estimate
from autopar.io.frameworks import builtin_frameworks, load_framework
from autopar.render.serve import kv_full
from autopar.spec.framework import Framework
from benchmarks import serving_holdout as ho
from benchmarks.serving_rows import Row, load_hardware, load_rows

HERE = Path(__file__).parent

CALIBRATION = HERE / "data" / "serving_runs.csv"  # the rows the constants are fitted on
NEWER = HERE / "data" / "serving_runs_newer.csv"  # held out: nothing is fitted on them


def _best_flops(row: Row) -> float:
    """One GPU's best sustained GEMM rate in the row's dtype: the largest GEMM of the profile's curve x
    the GPU's sustained share (cost/kernels.py sustained; the dense peak where the profile has no curve)."""
    hw = load_hardware(row.hw_name)
    dtype = gemm_dtype(hw, row.dep.weights)
    return hw.peak(dtype) * hw.gemm_eff[dtype].ys[-1] * sustained(hw, serving=True) if dtype in hw.gemm_eff else hw.peak(dtype)


def measured_latency_s(row: Row) -> float:
    return (row.ttft_ms + (row.wl.osl - 1) * row.tpot_ms) / 1e3


def stream_rates(rows: Iterable[Row], top: int = 3) -> dict[tuple[str, str], list[tuple[float, Row]]]:
    """Per framework version, the `top` aggregated calibration rows of most output tokens/s per engine,
    C x osl / latency / replicas (the measured latency): where a serving process caps what an engine
    streams (Framework.host_token_s), the rows of most tokens/s stand at the cap, on every TP size alike."""
    acc: dict[tuple[str, str], list[tuple[float, Row]]] = {}
    for r in rows:
        if r.dep.mode == "agg" and not r.held_out:
            rate = r.wl.concurrency * r.wl.osl / measured_latency_s(r) / r.dep.replicas
            acc.setdefault((r.dep.framework, r.dep.framework_version), []).append((rate, r))
    return {k: sorted(v, key=lambda x: -x[0])[:top] for k, v in sorted(acc.items())}


def not_reached(row: Row, est: ServeEstimate) -> bool:
    """The measured latency at the stated concurrency needs more prefill FLOP/s than the GPUs can sustain
    (disaggregated: the prefill pool's GPUs, the only ones that prefill), or, aggregated, more GPU time
    than the request took (gpu_time_needed_s), or, disaggregated, a decode step faster than its batch's
    memory reads (decode_floor_s)."""
    dep = row.dep
    if prefill_need(row) > 1:  # active weights' FLOPs
        return True
    if dep.mode == "disagg":
        return decode_floor_s(row) > REACH_MARGIN * row.tpot_ms / 1e3
    return gpu_time_needed_s(row, est) > REACH_MARGIN * measured_latency_s(row)


def prefill_need(row: Row) -> float:
    """Prefill FLOP/s per prefill-pool GPU the measured latency at the stated concurrency needs, over
    the best the GPU sustains (_best_flops); above 1 the run cannot have held that concurrency."""
    dep = row.dep
    gpus = dep.prefill.gpus * dep.prefill_replicas if dep.prefill is not None else dep.gpus
    flops = row.wl.concurrency / measured_latency_s(row) * row.wl.isl * 2 * matmul_params(row.model)
    return flops / (_best_flops(row) * gpus)


def reach_note(row: Row) -> str:
    """Why a disaggregated row is not reached, with the numbers."""
    need = prefill_need(row)
    if need > 1:
        return f"prefill needs {need:.2f}x the prefill GPUs' sustained rate"
    return f"decode floor {decode_floor_s(row) * 1e3:.1f} ms above the measured TPOT"


def decode_floor_s(row: Row) -> float:
    """Least decode step of a disaggregated row at its stated concurrency, from the measurement itself.

    By Little's law the decode pool holds concurrency x (latency - TTFT) / latency of the requests
    in flight (the rest are queued, prefilling or in transfer), spread over its attention ranks
    (at most the engines' max batch a rank). A step at that batch reads at least the weights its
    tokens touch (MoE: the experts a batch of that size touches under uniform top-k routing,
    whatever Framework.moe_decode_reads says) and the batch's KV cache, once, at the profile's
    bandwidth: the model's memory terms of the step, no communication, compute or fitted constant.
    A measured TPOT below this (less REACH_MARGIN) was not run at that batch. E.g. the vLLM
    Qwen3-235B-A22B-FP8 1P 3D(tp4) row at 72 (3 x 24): TTFT 0.90 s of a 12.27 s request, so 66.7
    decoding, 22.2 per engine, whose 178 top-8 picks a layer touch 75% of the 128 experts: 15.4 ms
    of fp8 weights and 0.8 ms of fp8 KV per step at the H100's 3.35 TB/s x 0.866, 16.3 ms against
    11.4 ms measured (the vLLM 1P 2D(tp4) Qwen3-32B row at 448 would need 13.8 ms against 8.7)."""
    dep, hw = row.dep, load_hardware(row.hw_name)
    fw = dataclasses.replace(dep.framework_for(), moe_decode_reads="touched")
    decoding = row.wl.concurrency * (1 - row.ttft_ms / 1e3 / measured_latency_s(row))
    per_rank = min(decoding / (dep.replicas * dep.engine.dp), fw.max_seqs)
    step = decode_step(
        row.model, hw, dep.engine, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=per_rank, context=row.wl.isl + row.wl.osl / 2, fw=fw
    )
    return step.weights + step.kv


def gpu_time_needed_s(row: Row, est: ServeEstimate) -> float:
    """Least engine time one request's life takes at the stated concurrency, aggregated.

    While a request runs, each of the C requests in flight is replaced about once, so the engines
    prefill about C prompts and run the request's osl - 1 decode steps. The prompts take at least
    their FLOPs at the best sustained GEMM rate on all the deployment's GPUs (the rate the compute
    test above uses; attention left out), and each attention rank's C / ranks prompts their
    collectives: the TP all-reduce of every chunk's activations (and, with attention-DP, the
    MoE dispatch), at the profile's measured collective bandwidth (the model's prefill tp_comm and
    ep_comm; vLLM, SGLang and TensorRT-LLM run them between the GEMMs that need their result).
    A chunked scheduler fits at most chunk_tokens prompt tokens in a step, so at least
    C / ranks x isl / chunk_tokens of the decode steps hold prompt tokens; those are counted by
    their prompts alone. Every other decode step reads the weights and the KV cache of the batch
    at least once: the model's memory terms of the step (est's weights + kv, the profile's
    bandwidth, no fitted constant). By this the 21 vLLM 0.12 Llama-3.1-8B-FP8 rows on H200 need
    1.10-2.21x their measured latency and three Dynamo-campaign Qwen3-32B fp8 4000/1000 rows on
    H100 (qwen3_32b.csv, fp8 KV) 1.10-1.44x: TensorRT-LLM 1.2 tp1 c32, vLLM 0.12 tp1 c24 and tp2
    c48 (the vLLM H200 Llama tp8 4000/100 c80 row measures 8.0 ms TPOT where the TP all-reduce of
    80 prompts alone, 64 x 32.8 MB = 9.7 ms each at 473 GB/s, comes to 7.8 ms a token), so their
    clients did not hold the stated concurrency."""
    dep = row.dep
    fw = dep.framework_for()
    step = est.pools[-1].step
    prompts = row.wl.concurrency * row.wl.isl * 2 * matmul_params(row.model) / (_best_flops(row) * dep.gpus)
    per_rank = row.wl.concurrency / (dep.replicas * dep.engine.dp)
    one = prefill_time(row.model, load_hardware(row.hw_name), dep.engine, weights=dep.weights, tokens=row.wl.isl, seq_len=row.wl.isl, fw=fw)
    decode = max(0, row.wl.osl - 1 - math.ceil(per_rank * row.wl.isl / fw.chunk_tokens))
    return prompts + per_rank * (one.tp_comm + one.ep_comm) + decode * (step.weights + step.kv)


# gpu_time_needed_s may exceed the measured latency by this much before a row is set apart: the rows the
# model predicts well at its own limit sit there (TensorRT-LLM 1.0 Llama-3.1-8B bf16 tp1 on H100 at
# 1024/128 c128 and 2048/128 c64 need 1.00 and 0.99x their latency and are predicted to 2-3% in TPOT)
REACH_MARGIN = 1.05


def worst_queue_s(row: Row, est: ServeEstimate) -> float:
    """The worst prefill queue a free KV slot allows in an aggregated engine: every request in
    flight on the attention rank queued back to back, each prompt's prefill plus one decode step
    (the model's compute and memory terms, no fitted constant). A row whose TTFT is over
    QUEUE_MARGIN times this waited for a KV slot (the framework's own memory accounting held fewer
    requests than the model's): it is queue-saturated. QUEUE_MARGIN covers the model's prefill
    error (SGLang's Qwen3-235B prefill on H200 takes 2x the model's at concurrency 2) and the fixed
    per-request time. Disaggregated rows are left to the model's own test: the file's prefill
    layout for them is ambiguous."""
    hw, dep = load_hardware(row.hw_name), row.dep
    fw = dep.framework_for()
    prefill = prefill_time(row.model, hw, dep.engine, weights=dep.weights, tokens=row.wl.isl, seq_len=row.wl.isl, fw=fw)
    step = est.pools[-1].step
    per_rank = max(1.0, row.wl.concurrency / (dep.replicas * dep.engine.dp))
    return per_rank * (prefill.total + step.total - step.overhead)


def beyond_queue(row: Row, est: ServeEstimate) -> bool:
    return row.dep.mode == "agg" and row.ttft_ms / 1e3 > QUEUE_MARGIN * worst_queue_s(row, est)


QUEUE_MARGIN = 3.0


def wave_bound_s(row: Row) -> float:
    """Least mean TTFT of an aggregated row if its requests arrived as one wave (the closed loop's
    clients start C requests at once; with equal lengths they would end and return together).

    The wave's prompts are prefilled one after another on all the engine's GPUs at their dense peak
    (no efficiency loss, no attention, no communication, chunks one token long): request i of the
    wave gets its first token after i prompts, i x isl x 2 x active matmul weights / (GPUs x peak),
    and the mean over i = 1..n is (n + 1) / 2 prompts. A measured TTFT below this bound means the
    requests did not arrive together: they were spread in time (README, "What the rows show
    about TTFT")."""
    hw, eng = load_hardware(row.hw_name), row.dep.engine
    n = row.wl.concurrency / row.dep.replicas
    prompt = row.wl.isl * 2 * matmul_params(row.model) / (eng.gpus * hw.peak(gemm_dtype(hw, row.dep.weights)))
    return (n + 1) / 2 * prompt


def strata(results: list[tuple[Row, ServeEstimate, str]]) -> dict[tuple[str, str, int, int], tuple[int, float, float, float]]:
    """Scored aggregated rows per (framework, GPU, isl, concurrency rounded down to a power of two):
    rows, mean signed TTFT error, TTFT MAPE, TPOT MAPE. Shows where an error comes from."""
    acc: dict[tuple[str, str, int, int], list[tuple[float, float]]] = {}
    for row, est, kind in results:
        if kind == "scored" and row.dep.mode == "agg":
            key = (row.key[0], row.key[1], row.wl.isl, 1 << (row.wl.concurrency.bit_length() - 1))
            acc.setdefault(key, []).append(
                ((est.ttft_s * 1e3 - row.ttft_ms) / row.ttft_ms, abs(est.tpot_s * 1e3 - row.tpot_ms) / row.tpot_ms)
            )
    return {
        k: (len(v), sum(a for a, _ in v) / len(v), sum(abs(a) for a, _ in v) / len(v), sum(b for _, b in v) / len(v))
        for k, v in sorted(acc.items())
    }


REPEAT_SPREAD = 1.5  # repeats of one run further apart than this (max / min) disagree more than a row can judge


def repeats(rows: Iterable[Row]) -> list[tuple[float, list[Row]]]:
    """The deployments and workloads measured more than once on one engine release (key, label, release),
    each with its spread, the larger of max / min over the measured TTFT and over the TPOT; widest first.
    A row whose repeats disagree by more than REPEAT_SPREAD measures the campaign as much as the engine."""
    groups: dict[tuple[str, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((*r.key, r.label, r.release), []).append(r)
    out = []
    for same in groups.values():
        if len(same) > 1:
            spread = max(max(v) / min(v) for v in ([r.ttft_ms for r in same], [r.tpot_ms for r in same]))
            out.append((spread, same))
    return sorted(out, key=lambda s: -s[0])


def evaluate(rows: Iterable[Row]) -> list[tuple[Row, ServeEstimate, str]]:
    """Each row with its estimate and kind: scored | saturated | not-reached."""
    out = []
    for row in rows:
        est = estimate(row.model, load_hardware(row.hw_name), row.dep, row.wl)
        saturated = est.saturated or beyond_queue(row, est)
        if row.dep.mode == "disagg" and not_reached(row, est):
            # the measured run did not hold the stated concurrency: the model's saturation at that
            # concurrency (a prefill queue of seconds) is not what was measured
            kind = "not-reached"
        else:
            kind = "saturated" if saturated else "not-reached" if not_reached(row, est) else "scored"
        out.append((row, est, kind))
    return out


def errors(results: list[tuple[Row, ServeEstimate, str]]) -> dict[tuple[str, str, str], tuple[int, float, float]]:
    """Per (framework, GPU, mode): rows, TTFT MAPE, TPOT MAPE over the scored rows."""
    acc: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for row, est, kind in results:
        if kind == "scored":
            acc.setdefault(row.key, []).append(
                (abs(est.ttft_s * 1e3 - row.ttft_ms) / row.ttft_ms, abs(est.tpot_s * 1e3 - row.tpot_ms) / row.tpot_ms)
            )
    return {k: (len(v), sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v)) for k, v in sorted(acc.items())}


FIT_GRID = {
    "step_overhead_s": (0.0, 1e-3, 2e-3, 3e-3, 4e-3, 6e-3),
    "ttft_overhead_s": (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15),
    "prefill_slowdown": (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0),
    "moe_decode_slowdown": (1.0, 1.25, 1.5, 1.75, 2.0, 2.5),  # vLLM only
    "kv_decode_slowdown": (1.0, 1.25, 1.5, 1.75, 2.0, 2.5),  # vLLM only
    "eager_layer_s": (0.0, 1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4),  # only where the framework lists graph_sizes
    "host_request_s": (0.0, 2e-5, 3e-5, 4e-5, 5e-5, 6e-5, 7e-5),  # SGLang only
}


def with_framework(rows: list[Row], fw: Framework) -> list[Row]:
    """`rows` with the deployments of fw's name and version run on `fw` (the others unchanged)."""
    key = (fw.name, fw.version)
    return [
        dataclasses.replace(r, dep=dataclasses.replace(r.dep, fw=fw)) if (r.dep.framework, r.dep.framework_version) == key else r
        for r in rows
    ]


def fit(rows: list[Row], key: tuple[str, str], passes: int = 3) -> Framework:
    """Coordinate search of one framework version's fitted constants: mean over its scored rows of the TTFT
    plus the TPOT relative error. Only aggregated rows are fitted; the disaggregated ones are held out.
    The search starts from a coarse grid over the two constants that trade TTFT against TPOT, from the
    values of the version's data file. Raises serving_holdout.NoScoredRows when no row is scored at those
    values: every trial would tie and the grid's first point would be returned (it was, for SGLang 0.5.6
    without its H200 rows: the six 0.5.8.post1 H100 rows left are all queue-saturated)."""
    name, version = key
    mine = [r for r in rows if (r.dep.framework, r.dep.framework_version) == key and r.dep.mode == "agg" and not r.held_out]

    def loss(fw: Framework) -> float:
        errs = [
            abs(est.ttft_s * 1e3 - row.ttft_ms) / row.ttft_ms + abs(est.tpot_s * 1e3 - row.tpot_ms) / row.tpot_ms
            for row, est, kind in evaluate(with_framework(mine, fw))
            if kind == "scored"
        ]
        return sum(errs) / max(1, len(errs))

    start = load_framework(f"{name}@{version}")
    if not any(kind == "scored" for _, _, kind in evaluate(with_framework(mine, start))):
        raise ho.NoScoredRows(f"its {len(mine)} training rows score none (queue-saturated or not reached)")
    best, current = float("inf"), start
    for slow, over in itertools.product(FIT_GRID["prefill_slowdown"], FIT_GRID["ttft_overhead_s"]):
        trial = dataclasses.replace(start, prefill_slowdown=slow, ttft_overhead_s=over)
        score = loss(trial)
        if score < best:
            best, current = score, trial
    for _, field in itertools.product(range(passes), fitted_fields(start)):
        for value in FIT_GRID[field]:
            trial = dataclasses.replace(current, **{field: value})
            score = loss(trial)
            if score < best:
                best, current = score, trial
        print(f"  {name} {version} {field} = {getattr(current, field)}  (loss {best:.3f})", file=sys.stderr)
    return current


def fitted_fields(fw: Framework) -> list[str]:
    """The FIT_GRID fields fitted for fw's framework: eager_layer_s where it lists graph_sizes, host_request_s
    for SGLang (its per-request Python walk after each step), moe_decode_slowdown and kv_decode_slowdown for
    vLLM (its expert and KV-cache reads; the other frameworks read them at the profile's copy rate)."""
    skip = {
        "eager_layer_s": not fw.graph_sizes,
        "host_request_s": fw.name != "sglang",
        "moe_decode_slowdown": fw.name != "vllm",
        "kv_decode_slowdown": fw.name != "vllm",
    }
    return [field for field in FIT_GRID if not skip.get(field, False)]


def fitted_yaml(fw: Framework) -> str:
    """The `value:` lines of the fitted constants, to paste into autopar/data/frameworks/NAME-VERSION.yaml."""
    lines = [f"# autopar/data/frameworks/{fw.name}-{fw.version}.yaml, fitted values:"]
    for field in fitted_fields(fw):
        lines += [f"{field}:", f"  value: {getattr(fw, field)!r}"]
    return "\n".join(lines)


def leave_one_group_out(rows: list[Row]) -> list[tuple[str, str, int, float, float]]:
    """Each framework version's constants refitted without one (GPU, model) group of its aggregated rows,
    then scored on that group: (version, held-out group, rows, TTFT MAPE, TPOT MAPE). A version measured
    on one (GPU, model) only (SGLang 0.5.1) is split by input length instead."""
    out = []
    for key, group, results in held_out_results(rows):
        for _, (n, ttft, tpot) in errors(results).items():
            out.append((f"{key[0]}@{key[1]}", " ".join(group), n, ttft, tpot))
    return out


def folds(rows: list[Row]) -> list[tuple[tuple[str, str], tuple[str, ...], list[Row], list[Row]]]:
    """leave_one_group_out's folds: (framework version, held-out group, rows fitted on, rows held out), for
    each version with two groups or more."""
    out = []
    for key in builtin_frameworks():
        mine = [r for r in rows if (r.dep.framework, r.dep.framework_version) == key and r.dep.mode == "agg" and not r.held_out]
        by_isl = len({(r.key[1], r.model.name) for r in mine}) < 2

        def group_of(r: Row, by_isl: bool = by_isl) -> tuple[str, ...]:
            return (r.key[1], r.model.name, f"isl{r.wl.isl}") if by_isl else (r.key[1], r.model.name)

        groups = sorted({group_of(r) for r in mine})
        if len(groups) < 2:
            continue
        for group in groups:
            out.append((key, group, [r for r in mine if group_of(r) != group], [r for r in mine if group_of(r) == group]))
    return out


def held_out_results(
    rows: list[Row], only: int | None = None, *, passes: int = 3, every: int = 1
) -> Iterator[tuple[tuple[str, str], tuple[str, ...], list[tuple[Row, ServeEstimate, str]]]]:
    """Each fold (or the `only`-th): the version's constants fitted (`passes` coordinate passes, on every
    `every`-th of the fold's other rows) and the held-out group evaluated with them. The fitted constants are
    restored after each fold."""
    for i, (key, group, train, held) in enumerate(folds(rows)):
        if only is not None and i != only:
            continue
        try:
            fitted = fit(train[::every], key, passes=passes)
        except ho.NoScoredRows:
            continue
        yield key, group, evaluate(with_framework(held, fitted))


def load(paths: list[Path] | None) -> tuple[list[Row], list[str]]:
    """The rows of `paths` (default: the calibration file and the newer, held-out one) and the skipped lines."""
    skipped: list[str] = []
    priced: dict[str, int] = {}
    rows: list[Row] = []
    for path in paths or [CALIBRATION, NEWER]:
        rows += load_rows(path, skipped, held_out=path.name == NEWER.name, priced=priced)
    total = sum(int(line.rsplit("(", 1)[1].split()[0]) for line in skipped)
    reasons = [textwrap.fill(why, 78, initial_indent="  ", subsequent_indent="    ") for why in skipped]
    notes = ["\n".join([f"skipped: {total} (rows autopar cannot describe as given):", *reasons])] if skipped else []
    notes += [f"{why}: {n} rows" for why, n in sorted(priced.items())]
    return rows, notes


def headline_groups(rows: list[Row], results: list[tuple[Row, ServeEstimate, str]]) -> list[tuple[str, dict[str, ho.Score] | str]]:
    """The headline's tables, out of sample first (leave one model out, leave one GPU out, the newer rows),
    in-sample last: (title, scores per group, or why the table is missing)."""
    engine, model, gpu = (lambda r: r.dep.framework), (lambda r: r.model.name), (lambda r: r.key[1])
    calib = [r for r in rows if not r.held_out]
    out: list[tuple[str, dict[str, ho.Score] | str]] = []
    for axis, title in (("model", "leave-one-model-out"), ("gpu", "leave-one-GPU-out")):
        try:
            out.append((f"out of sample, {title} (calibration rows), per engine", ho.by(ho.held_out(calib, axis, evaluate), engine)))
            out += [(f"not scored {title}", why) for why in ho.unfitted(axis)]
        except ho.MissingFold as exc:
            out.append((f"out of sample, {title}", str(exc)))
    newer, moved = ho.against_repeats([res for res in results if res[0].held_out])
    if newer:
        out += [
            ("held out, serving_runs_newer.csv (nothing fitted on it), every row, per engine", ho.by(newer, engine, every=True)),
            ("the same, per model", ho.by(newer, model, every=True)),
            ("the same, per GPU", ho.by(newer, gpu, every=True)),
            ("its scored rows (not queue-saturated, concurrency reached), per engine", ho.by(newer, engine)),
            ("each row judged against the median of its run's repeats (serving_holdout.against_repeats)", f"{moved} rows moved"),
        ]
    inside = [res for res in results if not res[0].held_out and res[0].dep.mode == "agg"]
    out.append(("in sample (calibration rows, the shipped constants), per engine", ho.by(inside, engine)))
    return out


def repeats_report(results: list[tuple[Row, ServeEstimate, str]]) -> list[str]:
    """--repeats: how many runs were measured more than once, and those whose measurements disagree by
    more than REPEAT_SPREAD, each row's predicted / measured TTFT and TPOT (as --rows prints them)."""
    est = {id(r): e for r, e, _ in results}
    found = repeats(r for r, _, _ in results)
    wide = [(s, same) for s, same in found if s > REPEAT_SPREAD]
    out = [
        f"\nmeasured more than once: {len(found)} runs ({sum(len(same) for _, same in found)} rows);",
        f"{len(wide)} apart by more than {REPEAT_SPREAD}x (max / min; rows predicted / measured):",
    ]
    for spread, same in wide:
        r0 = same[0]
        out.append(f"  {spread:.2f}x {' '.join(r0.key)} {r0.release} {r0.label}")
        out += [f"    {r.source}: {predicted_measured(r, est[id(r)])}" for r in same]
    return out


def predicted_measured(r: Row, e: ServeEstimate) -> str:
    """A row's predicted / measured TTFT (ms) and TPOT (ms), as --rows and --repeats print them."""
    return f"TTFT {e.ttft_s * 1e3:.0f}/{r.ttft_ms:.0f} TPOT {e.tpot_s * 1e3:.1f}/{r.tpot_ms:.1f}"


def headline(rows: list[Row], results: list[tuple[Row, ServeEstimate, str]]) -> list[str]:
    out = []
    for title, groups in headline_groups(rows, results):
        out += ["", f"{title}: {groups}"] if isinstance(groups, str) else ["", *ho.table(f"{title}:", groups)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--csv", type=Path, action="append", help="a rows file (default: serving_runs.csv, and serving_runs_newer.csv held out)"
    )
    ap.add_argument("--rows", action="store_true", help="print every row's prediction")
    ap.add_argument("--list", action="store_true", help="list the queue-saturated and not-reached rows")
    ap.add_argument(
        "--repeats", action="store_true", help=f"runs measured more than once, those further apart than {REPEAT_SPREAD}x listed"
    )
    ap.add_argument(
        "--fit",
        choices=[f"{n}@{v}" for n, v in builtin_frameworks()],
        action="append",
        default=[],
        help="refit one framework version's constants, e.g. sglang@0.5.1",
    )
    ap.add_argument("--strata", action="store_true", help="errors per framework, GPU, input length and concurrency (powers of two)")
    ap.add_argument("--rates", action="store_true", help="per framework version, the rows of most output tokens/s (host_token_s)")
    ap.add_argument("--waves", action="store_true", help="per group, the rows whose TTFT is below the one-wave bound (wave_bound_s)")
    ap.add_argument("--logo", action="store_true", help="leave one (GPU, model) group out of each fit and score it (minutes)")
    ap.add_argument(
        "--holdout",
        choices=sorted(ho.AXES),
        help="per fold of leave-one-model-out (model) or leave-one-GPU-out (gpu), from the cached refits",
    )
    ap.add_argument(
        "--refit-holdout",
        action="store_true",
        help=f"refit every leave-one-model-out and leave-one-GPU-out fold into {ho.CACHE.name} (long)",
    )
    ap.add_argument(
        "--only",
        choices=[f"{n}@{v}" for n, v in builtin_frameworks()],
        help="with --refit-holdout: refit this framework version's folds, keep the cached others",
    )
    args = ap.parse_args(argv)
    rows, notes = load(args.csv)
    for note in notes:
        print(note)
    for item in args.fit:  # the fitted values, as YAML to paste; the rest of the run uses them
        name, version = item.split("@")
        fitted = fit(rows, (name, version))
        print(fitted_yaml(fitted))
        rows = with_framework(rows, fitted)
    if args.refit_holdout:
        ho.write_cache(ho.refit(rows, fit, only=args.only))
        print(f"wrote {ho.CACHE}")
        return 0
    if args.holdout:
        group_of = ho.AXES[args.holdout]
        held = ho.held_out([r for r in rows if not r.held_out], args.holdout, evaluate)
        fold = ho.by(held, lambda r: f"{r.dep.framework} {group_of(r)}")  # one version of each has folds
        print("\n".join(ho.table("each fold's left-out rows, scored with the constants fitted without them:", fold)))
        for why in ho.unfitted(args.holdout):
            print(f"not scored, {why}")
        return 0
    if args.logo:
        print(f"{'fitted on all but':18} {'held-out group':28} {'rows':>4} {'TTFT MAPE':>10} {'TPOT MAPE':>10}")
        for version, group, n, ttft, tpot in leave_one_group_out(rows):
            print(f"{version:18} {group:28} {n:4} {ttft:10.1%} {tpot:10.1%}")
        return 0
    if args.rates:
        for (fw, version), top in stream_rates(rows).items():
            print(f"{fw} {version}: " + "; ".join(f"{r.label} {rate / 1e3:.2f}k tokens/s" for rate, r in top))
        return 0
    results = evaluate(rows)
    if args.csv is None:
        print("\n".join(headline(rows, results)))
    for kind in ("saturated", "not-reached"):
        listed = [(r, e) for r, e, k in results if k == kind]
        newer = sum(r.held_out for r, _ in listed)
        print(
            f"{kind} rows, not scored: {len(listed) - newer} calibration, {newer} held out" + ("" if args.list else " (--list names them)")
        )
        for r, e in listed if args.list else ():
            why = (
                reach_note(r)
                if r.dep.mode == "disagg" and kind == "not-reached"
                else f"the prefill pool paces it at {e.requests_per_s:.1f} requests/s"
                if r.dep.mode == "disagg" and not kv_full(e)
                else f"model holds {e.pools[-1].max_concurrency} requests"
                if kind != "saturated" or e.saturated
                else f"worst prefill queue {worst_queue_s(r, e) * 1e3:.0f} ms"
            )
            print(f"  {' '.join(r.key)} {r.label}: measured TTFT {r.ttft_ms:.0f} ms, TPOT {r.tpot_ms:.1f} ms; {why}")
    if args.rows:
        for r, e, k in results:
            print(f"  {k:11} {' '.join(r.key)} {r.label}: {predicted_measured(r, e)}")
    if args.repeats:
        print("\n".join(repeats_report(results)))
    if args.strata:
        print(f"\n{'framework':9} {'GPU':9} {'ISL':>5} {'conc':>5} {'rows':>4} {'TTFT bias':>10} {'TTFT MAPE':>10} {'TPOT MAPE':>10}")
        for (fw, gpu, isl, conc), (n, bias, ttft, tpot) in strata(results).items():
            print(f"{fw:9} {gpu:9} {isl:5} {conc:5} {n:4} {bias:+10.1%} {ttft:10.1%} {tpot:10.1%}")
    if args.waves:
        print("\nmeasured TTFT below the one-wave bound (scored aggregated rows):")
        below: dict[tuple[str, str], list[float]] = {}
        for r, _, k in results:
            if k == "scored" and r.dep.mode == "agg":
                below.setdefault(r.key[:2], []).append(r.ttft_ms / 1e3 / wave_bound_s(r))
        for (fw, gpu), ratios in sorted(below.items()):
            ratios.sort()
            print(
                f"  {fw:9} {gpu:9} {sum(x < 1 for x in ratios):3} of {len(ratios):3} rows;"
                f" measured / bound median {ratios[len(ratios) // 2]:.2f}, least {ratios[0]:.2f}"
            )
    for held, title in ((False, ""), (True, "\nheld out, serving_runs_newer.csv, its scored rows:")):
        part = [res for res in results if res[0].held_out is held]
        if part:
            print(f"{title}\n{'framework':9} {'GPU':9} {'mode':6} {'rows':>4} {'TTFT MAPE':>10} {'TPOT MAPE':>10}")
        for (fw, gpu, mode), (n, ttft, tpot) in errors(part).items():
            print(f"{fw:9} {gpu:9} {mode:6} {n:4} {ttft:10.1%} {tpot:10.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
