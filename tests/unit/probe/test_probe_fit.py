"""autopar.probe pure parts: alpha-beta fits, efficiency curves, datasheet lookup,
settings and timing arithmetic. No torch needed."""

from __future__ import annotations

import random

import pytest

from autopar.errors import ProfileError
from autopar.probe.fit import bus_factor, efficiency_curve, fit_alpha_beta, sig
from autopar.probe.peaks import lookup
from autopar.probe.settings import settings_for
from autopar.probe.timing import Timer

SIZES = [4096 * 4**i for i in range(10)]  # 4 KiB .. 1 GiB


@pytest.mark.parametrize(
    ("collective", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 16, 15 / 16),
        ("send_recv", 2, 1.0),
    ],
)
def test_bus_factor_follows_nccl_tests(collective: str, n: int, factor: float) -> None:
    assert bus_factor(collective, n) == pytest.approx(factor)


def test_bus_factor_refuses_bad_input() -> None:
    with pytest.raises(ProfileError, match="at least 2 ranks"):
        bus_factor("all_reduce", 1)
    with pytest.raises(ProfileError, match="unknown collective"):
        bus_factor("broadcast", 4)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "all_to_all", "send_recv"])
@pytest.mark.parametrize("n", [2, 8])
def test_fit_recovers_known_alpha_and_beta(collective: str, n: int) -> None:
    alpha, bw = 25e-6, 360e9
    factor = bus_factor(collective, n)
    points = [(s, alpha + factor * s / bw) for s in SIZES]
    fit = fit_alpha_beta(points, factor=factor)
    assert fit.latency_s == pytest.approx(alpha, rel=1e-9)
    assert fit.bw_bytes_per_s == pytest.approx(bw, rel=1e-9)
    assert fit.max_rel_err < 1e-9 and fit.note == ""
    assert fit.time_s(1e9, factor) == pytest.approx(alpha + factor * 1e9 / bw)


def test_fit_tolerates_noise() -> None:
    rng = random.Random(0)
    alpha, bw = 60e-6, 45e9
    points = [(s, (alpha + s / bw) * rng.uniform(0.95, 1.05)) for s in SIZES for _ in range(3)]
    fit = fit_alpha_beta(points, factor=1.0)
    assert fit.latency_s == pytest.approx(alpha, rel=0.15)
    assert fit.bw_bytes_per_s == pytest.approx(bw, rel=0.10)


def test_fit_weights_small_messages_like_large_ones() -> None:
    # ordinary least squares would be pulled by the 1 GiB point and give a latency far off
    alpha, bw = 5e-6, 100e9
    points = [(s, alpha + s / bw) for s in SIZES]
    points[-1] = (points[-1][0], points[-1][1] * 1.1)  # the largest point 10% slow
    fit = fit_alpha_beta(points, factor=1.0)
    assert fit.latency_s == pytest.approx(alpha, rel=0.2)


def test_fit_clamps_negative_latency() -> None:
    points = [(1e6, 1e-5), (1e7, 1.2e-4), (1e8, 1.2e-3)]  # a line through below the origin
    fit = fit_alpha_beta(points, factor=1.0)
    assert fit.latency_s == pytest.approx(5e-6)  # half the smallest time
    assert fit.bw_bytes_per_s > 0 and "latency" in fit.note


def test_fit_flat_times_give_a_bandwidth_lower_bound() -> None:
    points = [(4096, 1e-3), (65536, 9e-4), (1 << 20, 8e-4)]  # latency-bound and noisy: slope < 0
    fit = fit_alpha_beta(points, factor=1.0)
    assert fit.latency_s > 0
    assert fit.bw_bytes_per_s == pytest.approx((1 << 20) / 8e-4)
    assert "lower bound" in fit.note


def test_fit_needs_two_sizes() -> None:
    with pytest.raises(ProfileError, match="2 or more distinct message sizes"):
        fit_alpha_beta([(4096, 1e-5), (4096, 1.1e-5)], factor=1.0)


def test_efficiency_curve_sorts_merges_and_clamps() -> None:
    points = [(1e12, 8e14), (1e9, 1e14), (1.00001e9, 2e14), (1e13, 1.2e15)]
    curve, clamped = efficiency_curve(points, peak=1e15)
    assert curve == [[1e9, 0.2], [1e12, 0.8], [1e13, 1.0]]
    assert clamped
    with pytest.raises(ProfileError):
        efficiency_curve(points, peak=0)


def test_sig_rounds_to_significant_digits() -> None:
    assert sig(123456.0) == 123500.0
    assert sig(0.000123456, 3) == 0.000123
    assert sig(0.0) == 0.0


@pytest.mark.parametrize(
    ("name", "memory_gib", "key"),
    [
        ("NVIDIA H100 80GB HBM3", 79.6, "h100-sxm"),
        ("NVIDIA H100 PCIe", 79.6, "h100-pcie"),
        ("NVIDIA H100 NVL", 93.0, None),  # not in the table: peaks are measured, not guessed
        ("NVIDIA H200", 139.8, "h200"),
        ("NVIDIA A100-SXM4-80GB", 79.2, "a100-sxm"),
        ("NVIDIA A100-SXM4-40GB", 39.4, "a100-sxm-40gb"),
        ("NVIDIA A100 80GB PCIe", 79.2, "a100-pcie"),
        ("AMD Instinct MI300X", 191.5, "mi300x"),
        ("NVIDIA GeForce RTX 4090", 23.6, None),
    ],
)
def test_datasheet_lookup(name: str, memory_gib: float, key: str | None) -> None:
    sheet = lookup(name, memory_gib)
    assert (sheet.key if sheet else None) == key
    if sheet:
        assert "bf16" in sheet.peaks() and sheet.hbm_bw_gbps > 0 and sheet.citation


def test_settings_quick_is_smaller_and_timeout_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for device in ("cuda", "cpu"):
        quick, full = settings_for(device, True), settings_for(device, False)
        assert len(quick.coll_bytes) <= len(full.coll_bytes) and quick.reps <= full.reps
        assert len(quick.coll_bytes) >= 2  # a fit needs two sizes
    assert max(settings_for("cuda", False).coll_bytes) >= 256 * 2**20  # hundreds of MBs
    monkeypatch.setenv("AUTOPAR_PROBE_TIMEOUT_S", "7")
    assert settings_for("cpu", True).timeout_s == 7
    monkeypatch.setenv("AUTOPAR_PROBE_TIMEOUT_S", "soon")
    with pytest.raises(ProfileError, match="AUTOPAR_PROBE_TIMEOUT_S"):
        settings_for("cpu", True)
    with pytest.raises(ProfileError, match="`device`"):
        settings_for("tpu", True)


def test_timer_loops_enough_and_takes_the_median() -> None:
    timer = Timer(sync=lambda: None, warmup=1, reps=3, target_s=0.01, max_inner=100)
    assert timer.inner_for(0.001) == 10
    assert timer.inner_for(1.0) == 1
    assert timer.inner_for(0.0) == 100
    calls: list[int] = []
    seconds = timer.median_s(lambda: calls.append(1), agree=lambda n: 5)
    assert seconds >= 0 and len(calls) == 1 + 1 + 3 * 5  # warm-up, probe, 3 reps of the agreed 5
