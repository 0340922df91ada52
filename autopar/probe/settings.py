"""What a run measures, and how carefully: one frozen value per (device, quick).

The numbers are chosen so that a quick run takes about 30 s on an 8-GPU node
and well under a minute with two gloo processes on two CPU cores; a full run
sweeps more sizes, from KBs to hundreds of MBs, with more repetitions.
``AUTOPAR_PROBE_TIMEOUT_S`` overrides the per-step timeout (tests use it): seconds,
a finite number from ``MIN_TIMEOUT_S`` to ``MAX_TIMEOUT_S``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from autopar.errors import ProfileError

MIN_TIMEOUT_S = 1.0  # below this, process start-up alone trips the watchdog
MAX_TIMEOUT_S = 86400.0  # a day: longer is a hang, not a step
KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The sweep and the timing discipline of one run."""

    device: str  # cuda | cpu
    quick: bool  # fewer sizes and repetitions
    gemm_sizes: tuple[int, ...]  # M = N = K of the square GEMMs
    gemm_dtypes: tuple[str, ...]  # dtypes to try (those the device lacks are skipped)
    attn_seq_lens: tuple[int, ...]  # causal attention sequence lengths
    attn_head_dims: tuple[int, ...]  # the first one makes the curve, the others go to raw
    attn_heads: int  # attention heads per call
    attn_tokens: int  # batch * seq_len per call (batch = max(1, tokens // seq_len))
    hbm_bytes: int  # size of the buffer copied to measure memory bandwidth
    coll_bytes: tuple[int, ...]  # collective message sizes
    warmup: int  # untimed calls before timing
    reps: int  # timed repetitions; the median is kept
    target_s: float  # each repetition loops the op until it lasts about this long
    max_inner: int  # at most this many calls per repetition
    overlap_target_s: float  # duration of each side of the overlap measurement
    timeout_s: float  # a step (or a collective) that takes longer ends the run


def step_timeout(default: float) -> float:
    """AUTOPAR_PROBE_TIMEOUT_S if set (checked), else ``default``; seconds."""
    return _timeout(default)


def _timeout(default: float) -> float:
    raw = os.environ.get("AUTOPAR_PROBE_TIMEOUT_S")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ProfileError(f"AUTOPAR_PROBE_TIMEOUT_S: expected seconds, got {raw[:40]!r}") from None
    if not (math.isfinite(value) and MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S):
        raise ProfileError(
            f"AUTOPAR_PROBE_TIMEOUT_S: must be a number of seconds from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:g}, got {raw[:40]!r}"
        )
    return value


def _geometric(lo: int, hi: int, step: int) -> tuple[int, ...]:
    out, x = [], lo
    while x <= hi:
        out.append(x)
        x *= step
    return tuple(out)


def settings_for(device: str, quick: bool) -> Settings:
    if device == "cuda":
        return Settings(
            device=device,
            quick=quick,
            gemm_sizes=(512, 1024, 2048, 4096, 8192) if quick else (256, 512, 1024, 2048, 4096, 6144, 8192, 12288, 16384),
            gemm_dtypes=("bf16", "fp16", "fp8", "tf32", "fp32"),
            attn_seq_lens=(1024, 4096, 8192) if quick else (512, 1024, 2048, 4096, 8192, 16384, 32768),
            attn_head_dims=(128,) if quick else (128, 64),
            attn_heads=16,
            attn_tokens=16384 if quick else 32768,
            hbm_bytes=(512 if quick else 2048) * MIB,
            coll_bytes=(8 * KIB, 128 * KIB, 2 * MIB, 32 * MIB, 128 * MIB) if quick else _geometric(4 * KIB, 256 * MIB, 4),
            warmup=3 if quick else 5,
            reps=5 if quick else 10,
            target_s=0.005 if quick else 0.02,
            max_inner=200 if quick else 1000,
            overlap_target_s=0.1 if quick else 0.3,
            timeout_s=_timeout(120.0),
        )
    if device == "cpu":
        return Settings(
            device=device,
            quick=quick,
            gemm_sizes=(128, 256, 512) if quick else (64, 128, 256, 512, 1024, 2048),
            gemm_dtypes=("bf16", "fp32"),
            attn_seq_lens=(128, 256, 512) if quick else (128, 256, 512, 1024, 2048),
            attn_head_dims=(64,),
            attn_heads=4,
            attn_tokens=512 if quick else 2048,
            hbm_bytes=(32 if quick else 256) * MIB,
            coll_bytes=(4 * KIB, 64 * KIB, 1 * MIB, 4 * MIB) if quick else _geometric(4 * KIB, 64 * MIB, 4),
            warmup=1 if quick else 3,
            reps=5 if quick else 9,
            target_s=0.02 if quick else 0.05,
            max_inner=50 if quick else 500,
            overlap_target_s=0.1 if quick else 0.3,
            timeout_s=_timeout(120.0),
        )
    raise ProfileError(f"`device`: expected cuda or cpu, got {device!r}")
