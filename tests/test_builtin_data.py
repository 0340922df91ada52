"""The data shipped with autopar: model presets and hardware profiles.

Presets must reproduce the published parameter counts; every number in a
built-in hardware profile must carry a citation.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
import yaml

from autopar.hardware import COLLECTIVES, builtin_names, load_hardware
from autopar.model import load_model, preset_names

# Published parameter counts (total, including embeddings).
PUBLISHED_PARAMS = {
    "llama3-8b": 8.03e9,  # Llama 3 Herd of Models, Table 3; HF config
    "llama3-70b": 70.6e9,  # idem
    "llama3.1-405b": 405.9e9,  # idem
    "gpt3-175b": 175.0e9,  # Brown et al. 2020, Table 2.1
    "nemotron4-15b": 15.7e9,  # 3.2B embedding + 12.5B non-embedding (arXiv:2402.16819)
    "nemotron4-340b": 341.0e9,  # 9.4B embedding + 331.6B non-embedding (arXiv:2406.11704)
    "bloom-176b": 176.25e9,  # BLOOM paper: 176,247,271,424
}

EXPECTED_PROFILES = {"a100-sxm-80g", "h100-sxm", "h200-sxm", "b200", "l40s"}


def _raw_profile(name: str) -> dict[str, Any]:
    text = (resources.files("autopar") / "profiles" / f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def _numeric_leaves(node: Any, path: str = "") -> list[str]:
    """Dotted paths of every int/float leaf; list items appear as `key[i]`."""
    if isinstance(node, bool):
        return []
    if isinstance(node, int | float):
        return [path]
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _numeric_leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _numeric_leaves(value, f"{path}[{i}]")
    return out


def _covers(key: str, path: str) -> bool:
    return path == key or path.startswith(key + ".") or path.startswith(key + "[")


# --- model presets ----------------------------------------------------------------


def test_all_presets_present() -> None:
    assert set(preset_names()) == set(PUBLISHED_PARAMS)


@pytest.mark.parametrize(("name", "published"), sorted(PUBLISHED_PARAMS.items()))
def test_preset_parameter_count_matches_publication(name: str, published: float) -> None:
    spec = load_model(name)
    assert spec.name == name
    assert spec.total_params() == pytest.approx(published, rel=0.03)
    assert spec.source and spec.source != f"preset {name}", "a preset must cite its source"


@pytest.mark.parametrize(
    ("name", "activation", "kv_heads", "tied"),
    [
        ("nemotron4-15b", "relu2", 8, False),
        ("nemotron4-340b", "relu2", 8, False),
        ("gpt3-175b", "gelu", 96, True),
        ("bloom-176b", "gelu", 112, True),
        ("llama3-70b", "swiglu", 8, False),
    ],
)
def test_preset_architecture_details(name: str, activation: str, kv_heads: int, tied: bool) -> None:
    spec = load_model(name)
    assert spec.ffn_activation == activation
    assert spec.num_kv_heads == kv_heads
    assert spec.tie_embeddings is tied


def test_gpt3_and_bloom_shapes() -> None:
    gpt3 = load_model("gpt3-175b")
    assert (gpt3.seq_len, gpt3.ffn_hidden_size) == (2048, 4 * gpt3.hidden_size)
    assert load_model("bloom-176b").vocab_size == 250880


# --- hardware profiles --------------------------------------------------------------


def test_all_profiles_present() -> None:
    assert set(builtin_names()) == EXPECTED_PROFILES


@pytest.mark.parametrize("name", sorted(EXPECTED_PROFILES))
def test_profile_loads(name: str) -> None:
    hw = load_hardware(name)
    assert hw.name == name
    assert hw.source == "datasheet"
    assert hw.gpus_per_node == 8
    for table in (hw.intra, hw.inter):
        assert set(table) == set(COLLECTIVES)
    assert hw.compute_slowdown >= 1 and hw.comm_slowdown >= 1
    assert 0 < hw.memory_efficiency <= 1


@pytest.mark.parametrize("name", sorted(EXPECTED_PROFILES))
def test_every_number_is_cited(name: str) -> None:
    raw = _raw_profile(name)
    citations = raw["citations"]
    assert all(isinstance(v, str) and v.strip() for v in citations.values())
    leaves = _numeric_leaves({k: v for k, v in raw.items() if k != "citations"})
    assert leaves
    uncited = [p for p in leaves if not any(_covers(key, p) for key in citations)]
    assert not uncited, f"{name}: numbers without a citation: {uncited}"
    stale = [key for key in citations if not any(_covers(key, p) for p in leaves)]
    assert not stale, f"{name}: citation keys that match no field: {stale}"


@pytest.mark.parametrize("name", sorted(EXPECTED_PROFILES))
def test_gemm_efficiency_non_decreasing_in_size(name: str) -> None:
    hw = load_hardware(name)
    assert "bf16" in hw.gemm_eff
    for dtype, curve in hw.gemm_eff.items():
        assert list(curve.xs) == sorted(curve.xs)
        assert all(a <= b for a, b in zip(curve.ys, curve.ys[1:], strict=False)), f"{name} {dtype}: {curve.ys}"
        assert curve.xs[0] <= 2 * 1024**3, f"{name} {dtype}: the curve should start at small GEMMs"
        assert curve.ys[0] < curve.ys[-1] / 2, f"{name} {dtype}: small GEMMs must be far less efficient"


@pytest.mark.parametrize("name", sorted(EXPECTED_PROFILES))
def test_attention_efficiency_spans_short_and_long_sequences(name: str) -> None:
    curve = load_hardware(name).attn_eff["bf16"]
    assert curve.xs[0] <= 512 and curve.xs[-1] >= 16384
    assert curve.ys[0] < curve.ys[-1]


def test_h100_bf16_peak_is_the_dense_datasheet_value() -> None:
    hw = load_hardware("h100-sxm")
    assert hw.peak("bf16") == pytest.approx(989.4e12)
    assert hw.peak("fp8") == pytest.approx(1978.9e12)
    assert hw.memory_bytes == pytest.approx(81559 * 2**20, rel=1e-4)


def test_profiles_are_consistent_across_generations() -> None:
    """Sanity: newer GPUs are faster where the datasheets say so."""
    a100, h100, b200 = (load_hardware(n) for n in ("a100-sxm-80g", "h100-sxm", "b200"))
    assert a100.peak("bf16") < h100.peak("bf16") < b200.peak("bf16")
    assert "fp8" not in a100.peak_flops
    for hw in (a100, h100, b200):
        intra8 = {f.group_size: f for f in hw.intra["all_reduce"]}[8]
        inter = hw.inter["all_reduce"][0]
        assert intra8.bw_bytes_per_s > 4 * inter.bw_bytes_per_s
        assert intra8.latency_s < inter.latency_s
