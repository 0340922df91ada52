"""benchmarks/serving_accuracy.py: the one-wave TTFT bound and the error strata, hand-derived."""

from __future__ import annotations

import pytest

from autopar.io.models import load_model
from autopar.spec.serve import Deployment, Engine, Workload
from benchmarks import serving_accuracy as sa


def _row(*, tp: int, isl: int, concurrency: int, ttft_ms: float = 100.0) -> sa.Row:
    model = load_model("llama3.1-8b")
    dep = Deployment(framework="vllm", framework_version="0.12", mode="agg", engine=Engine(tp=tp), replicas=1)
    return sa.Row(key=("vllm", "h100_sxm", "agg"), label="test", model=model, model_key="meta-llama/Llama-3.1-8B-Instruct",
                  hw_name="h100-sxm", dep=dep, wl=Workload(isl=isl, osl=128, concurrency=concurrency),
                  ttft_ms=ttft_ms, tpot_ms=10.0)


def test_wave_bound_is_half_the_wave_at_peak() -> None:
    # Llama-3.1-8B active matmul weights: 32 x (attention 4096^2 x 2 + 2 x 4096 x 1024, MLP 3 x 4096 x 14336)
    # + logits 128256 x 4096 = 7,504,658,432; H100 SXM dense bf16 peak 989.4 TFLOP/s (profiles/h100-sxm.yaml)
    params = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 128256 * 4096
    assert params == 7_504_658_432
    prompt = 1024 * 2 * params / 989.4e12  # 15.53 ms on one GPU
    assert sa.wave_bound_s(_row(tp=1, isl=1024, concurrency=8)) == pytest.approx(4.5 * prompt)  # 69.9 ms
    assert sa.wave_bound_s(_row(tp=4, isl=1024, concurrency=8)) == pytest.approx(4.5 * prompt / 4)
    assert sa.wave_bound_s(_row(tp=1, isl=1024, concurrency=1)) == pytest.approx(prompt)


def test_strata_buckets_concurrency_by_powers_of_two() -> None:
    rows = [_row(tp=1, isl=1024, concurrency=c) for c in (8, 12, 16)]
    est = [sa.estimate(r.model, sa.load_hardware(r.hw_name), r.dep, r.wl) for r in rows]
    out = sa.strata([(r, e, "scored") for r, e in zip(rows, est, strict=True)])
    assert sorted(out) == [("vllm", "h100_sxm", 1024, 8), ("vllm", "h100_sxm", 1024, 16)]
    n, bias, mape, _ = out["vllm", "h100_sxm", 1024, 8]
    errs = [(e.ttft_s * 1e3 - 100.0) / 100.0 for e in est[:2]]
    assert n == 2 and bias == pytest.approx(sum(errs) / 2) and mape == pytest.approx(sum(map(abs, errs)) / 2)
