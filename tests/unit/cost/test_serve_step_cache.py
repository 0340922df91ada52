"""The decode step's kept terms (cost/serve.py _Decode, _Dense), collective lines (cost/comm.py) and curve
tables (spec/hardware.py): each key holds what its value reads, so inputs that differ in one such field
alone give different answers, each the hand-derived one (toy profile: tests/conftest.py) and the one a
fresh process computes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from autopar.cost import comm, serve
from autopar.cost.serve import decode_step
from autopar.io.frameworks import load_framework
from autopar.io.profiles import parse_profile
from autopar.spec.families import MoESpec
from autopar.spec.hardware import Curve, HardwareProfile
from autopar.spec.serve import Engine
from autopar.spec.topology import Group
from tests.conftest import gpt_like, toy_profile_dict

BW = 1e12  # effective toy HBM bandwidth, B/s
PLAIN = dataclasses.replace(load_framework("vllm@0.12"), step_overhead_s=0.0, moe_decode_slowdown=1.0, kv_decode_slowdown=1.0)
B, H = 4096, 1024  # a decode batch where every projection is compute-bound on the toy profile


def _fresh(fn: Any) -> Any:
    """fn() with every kept decode term, collective line and GEMM time dropped first (a fresh process)."""
    from autopar.cost import kernels

    serve._DECODES.clear()
    serve._DENSES.clear()
    comm._LINES.clear()
    kernels._GEMMS.clear()
    return fn.__wrapped__() if hasattr(fn, "__wrapped__") else fn()


def _compute(tp: int, wbytes: float, rate: float) -> float:
    """gpt_like() at B requests of one cached token each: 4 x (attention + MLP excess) + the logits' excess.

    Each GEMM is 2 m n k FLOPs at `rate` (0.5 of the dtype's peak x 0.75 sustained), but QK^T and AV, whose
    2 B x 16/tp heads x 128 FLOPs are below the curve's first point (1 GFLOP): that costs 1 GFLOP's time.
    The weight read (bytes `wbytes` each) and the K/V read (2 B each, 16/tp heads of 64) are taken off."""
    core = 1e9 / rate
    attn = (2 * B * 3 * H * H / tp + 2 * B * H * H / tp) / rate + core - 4 * H * H * wbytes / tp / BW - B * 2 * (16 // tp) * 64 * 2 / BW
    mlp = 2 * 2 * B * 4 * H * H / tp / rate - 8 * H * H * wbytes / tp / BW
    logits = 2 * B * 32000 / tp * H / (1e15 * 0.5 * 0.75) - 32000 / tp * H * 2 / BW  # bf16, the ends bf16
    return 4 * (attn + mlp) + logits


def _step(model: Any, hw: HardwareProfile, engine: Engine, weights: str = "bf16", fw: Any = PLAIN, batch: float = B) -> Any:
    return decode_step(model, hw, engine, weights=weights, kv_bytes=2.0, batch=batch, context=1, fw=fw)


def test_the_tp_split_and_the_dtype_are_in_the_key_of_the_dense_terms(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    bf16_rate, fp8_rate = 1e15 * 0.5 * 0.75, 2e15 * 0.5 * 0.75
    one, two = _step(m, toy_hw, Engine(tp=1)), _step(m, toy_hw, Engine(tp=2))
    fp8 = _step(m, toy_hw, Engine(tp=1), weights="fp8")
    assert one.compute == pytest.approx(_compute(1, 2.0, bf16_rate))
    assert two.compute == pytest.approx(_compute(2, 2.0, bf16_rate))
    assert fp8.compute == pytest.approx(_compute(1, 1.0, fp8_rate))  # fp8 GEMMs (the toy has an fp8 peak)
    assert len({one.compute, two.compute, fp8.compute}) == 3
    assert _fresh(lambda: _step(m, toy_hw, Engine(tp=2))) == two
    # the batch: twice the tokens, twice each GEMM; the weight read stays
    double = _step(m, toy_hw, Engine(tp=1), batch=2 * B)
    assert double.compute > 2 * one.compute
    assert _fresh(lambda: _step(m, toy_hw, Engine(tp=1), batch=2 * B)) == double


def test_the_framework_the_engine_and_the_weights_are_in_the_key_of_a_deployments_terms(toy_hw: HardwareProfile) -> None:
    m = gpt_like(moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512), ffn_activation="swiglu")
    expert, router, attn, lm_head = 3 * 1024 * 512 * 2, 1024 * 8 * 2, 4 * 1024**2 * 2, 32000 * 1024 * 2
    plain = _step(m, toy_hw, Engine(tp=1), batch=1)  # vLLM 0.12 reads every local expert
    slow = _step(m, toy_hw, Engine(tp=1), fw=dataclasses.replace(PLAIN, moe_decode_slowdown=1.5), batch=1)
    ep2 = _step(m, toy_hw, Engine(tp=1, dp=2, ep=2), batch=1)
    fp8 = _step(m, toy_hw, Engine(tp=1), weights="fp8", batch=1)
    assert plain.weights == pytest.approx((4 * (attn + router + 8 * expert) + lm_head) / BW)
    assert slow.weights == pytest.approx((4 * (attn + router + 1.5 * 8 * expert) + lm_head) / BW)
    assert ep2.weights == pytest.approx((4 * (attn + router + 4 * expert) + lm_head) / BW)
    assert fp8.weights == pytest.approx((4 * (attn + router + 8 * expert) / 2 + lm_head) / BW)  # the ends stay bf16
    late = _step(m, toy_hw, Engine(tp=1), fw=dataclasses.replace(PLAIN, step_overhead_s=1e-3), batch=1)
    assert late.overhead == 1e-3 and plain.overhead == 0.0
    assert _fresh(lambda: _step(m, toy_hw, Engine(tp=1, dp=2, ep=2), batch=1)) == ep2


def test_the_kv_bytes_are_read_per_call(toy_hw: HardwareProfile) -> None:
    m, e = gpt_like(), Engine(tp=1)
    bf16 = decode_step(m, toy_hw, e, weights="bf16", kv_bytes=2.0, batch=1, context=1000, fw=PLAIN)
    fp8 = decode_step(m, toy_hw, e, weights="bf16", kv_bytes=1.0, batch=1, context=1000, fw=PLAIN)
    assert bf16.kv == pytest.approx(4 * 1000 * (2 * 16 * 64 * 2) / BW)
    assert fp8.kv == pytest.approx(bf16.kv / 2)


def test_a_collective_line_is_kept_per_profile_kind_and_group(toy_hw: HardwareProfile) -> None:
    # toy fits: intra 10 us + 100 GB/s, inter 20 us + 10 GB/s; all-gather (n-1)/n S / B
    one_node, two_nodes = Group(size=16, per_node=16), Group(size=16, per_node=8)
    s = 1e6
    assert comm.collective_time(toy_hw, "all_gather", s, one_node) == pytest.approx(10e-6 + 15 / 16 * s / 100e9)
    # two nodes of 8: 8 rails of 10 GB/s, under NVLink's 100
    assert comm.collective_time(toy_hw, "all_gather", s, two_nodes) == pytest.approx(20e-6 + 15 / 16 * s / 80e9)
    assert comm.collective_time(toy_hw, "all_reduce", s, one_node) == pytest.approx(10e-6 + 2 * 15 / 16 * s / 100e9)
    slower = parse_profile(toy_profile_dict(), where="toy.yaml")
    slower_intra = {k: tuple(dataclasses.replace(f, latency_s=50e-6) for f in v) for k, v in slower.intra.items()}
    slower = dataclasses.replace(slower, intra=slower_intra)
    assert comm.collective_time(slower, "all_gather", s, one_node) == pytest.approx(50e-6 + 15 / 16 * s / 100e9)
    assert comm.collective_time(toy_hw, "all_gather", 0.0, one_node) == 0.0
    assert comm.collective_time(toy_hw, "all_gather", s, Group(size=1, per_node=1)) == 0.0


def test_a_curve_table_is_kept_per_curve() -> None:
    flat, rising = Curve(xs=(1e9, 1e12), ys=(0.5, 0.5)), Curve(xs=(1e9, 1e12), ys=(0.25, 0.5))
    # 1e10 is a third of the way from 1e9 to 1e12 in log(size)
    assert flat(1e10) == 0.5 and rising(1e10) == pytest.approx(0.25 + 0.25 / 3)
    assert flat.size_per_efficiency_floor(2e9) == 2e9 and rising.size_per_efficiency_floor(2e9) == 4e9
    assert flat.size_per_efficiency_floor(5e8) == 0.0
    # past the first point the interpolated size / efficiency (1e10 / 0.333) is above the first point's 4e9
    assert rising.size_per_efficiency(1e10) == pytest.approx(1e10 / (0.25 + 0.25 / 3))
    # a steeper curve: at 1.1e9 the efficiency is 0.1 + 0.8 log(1.1) / log(10) = 0.133, risen faster than the
    # size, so 1.1e9 / 0.133 = 8.3e9 is below the first point's 1e9 / 0.1: the floor holds
    steep = Curve(xs=(1e9, 1e10), ys=(0.1, 0.9))
    assert steep.size_per_efficiency(1.1e9) == pytest.approx(1e10)
    assert steep.size_per_efficiency(9e9) == pytest.approx(9e9 / (0.1 + 0.8 * 0.954243))  # 1.04e10: above it
