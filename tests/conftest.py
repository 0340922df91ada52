"""Shared fixtures: a hand-made hardware profile with round numbers, small models,
and isolation of the user's saved-profile directory."""

from __future__ import annotations

import os
from typing import Any

import pytest

from autopar.io.profiles import parse_profile
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec


def toy_profile_dict(**overrides: Any) -> dict[str, Any]:
    """A profile with round numbers so hand derivations stay simple.

    1000 TFLOP/s bf16, flat GEMM efficiency 0.5 above 1 GFLOP, attention 0.5, its own
    sustained tensor efficiency 0.75 (not the fitted fallback of cost/calibration.py), HBM
    2000 GB/s at efficiency 0.5 (so 1e12 B/s effective), intra collectives
    10 us + 100 GB/s, inter 20 us + 10 GB/s, no overlap slowdown.
    """
    intra = {
        c: [{"group_size": 8, "latency_us": 10, "bw_gbps": 100}]
        for c in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
    }
    inter = {c: [{"group_size": 16, "latency_us": 20, "bw_gbps": 10}] for c in intra}
    data: dict[str, Any] = {
        "schema_version": 1,
        "name": "toy",
        "description": "round numbers for tests",
        "source": "measured",
        "gpu": {
            "name": "Toy GPU",
            "memory_gib": 80,
            "hbm_bw_gbps": 2000,
            "memory_efficiency": 0.5,
            "peak_tflops": {"bf16": 1000, "fp8": 2000},
            "gemm_efficiency": {"bf16": [[1.0e9, 0.5], [1.0e15, 0.5]]},
            "attention_efficiency": {"bf16": [[128, 0.5], [1048576, 0.5]]},
            "sustained_tensor_efficiency": 0.75,
        },
        "node": {"gpus_per_node": 8, "intra": intra},
        "cluster": {"inter": inter},
        "overlap": {"compute_slowdown": 1.0, "comm_slowdown": 1.0},
    }
    data.update(overrides)
    return data


@pytest.fixture
def toy_hw() -> HardwareProfile:
    return parse_profile(toy_profile_dict(), where="toy.yaml")


def gpt_like(**overrides: Any) -> ModelSpec:
    """GPT-style block (MHA, 4h GELU MLP, dropout), Korthikanti et al.'s shapes."""
    kw: dict[str, Any] = dict(
        name="gpt-toy",
        layers=4,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=16,
        head_dim=64,
        ffn_hidden_size=4096,
        ffn_activation="gelu",
        vocab_size=32000,
        seq_len=2048,
        max_seq_len=2048,
        tie_embeddings=True,
        dropout=True,
    )
    kw.update(overrides)
    return ModelSpec(**kw)


def llama70b() -> ModelSpec:
    return ModelSpec(
        name="llama3-70b",
        layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        head_dim=128,
        ffn_hidden_size=28672,
        ffn_activation="swiglu",
        vocab_size=128256,
        seq_len=8192,
        max_seq_len=131072,
        tie_embeddings=False,
    )


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never read or write the user's real saved profile, nor read their Hugging Face cache, nor their cache of
    the built-in files' values (io/cache.py: off, so every test reads the files; tests/unit/io/test_cache.py and
    tests/cli/test_startup.py turn it on in a folder of their own)."""
    monkeypatch.setenv("AUTOPAR_HOME", str(tmp_path_factory.mktemp("autopar_home")))
    monkeypatch.setenv("AUTOPAR_CACHE", os.devnull)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("hf_hub_cache")))
