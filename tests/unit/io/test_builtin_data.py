"""The data shipped with autopar: model presets and hardware profiles.

Presets must reproduce the published parameter counts; every number in a
built-in hardware profile must carry a citation.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

import autopar
from autopar.io.models import load_model, preset_names
from autopar.io.profiles import builtin_names, load_hardware
from autopar.spec.hardware import COLLECTIVES

# Published parameter counts (total, including embeddings).
PUBLISHED_PARAMS = {
    "llama3-8b": 8.03e9,  # Llama 3 Herd of Models, Table 3; HF config
    "llama3.1-8b": 8.03e9,  # Llama 3.1 model card: same shape, 128K context
    "llama3.1-70b": 70.55e9,  # Llama 3.1 model card: same shape as Llama 3 70B
    "llama3-70b": 70.6e9,  # idem
    "llama3.1-405b": 405.9e9,  # idem
    "gpt3-175b": 175.0e9,  # Brown et al. 2020, Table 2.1
    "nemotron4-15b": 15.7e9,  # 3.2B embedding + 12.5B non-embedding (arXiv:2402.16819)
    "nemotron4-340b": 341.0e9,  # 9.4B embedding + 331.6B non-embedding (arXiv:2406.11704)
    "bloom-176b": 176.25e9,  # BLOOM paper: 176,247,271,424
    "mixtral-8x7b": 46.7e9,  # mistral.ai/news/mixtral-of-experts (paper: 47B)
    "mixtral-8x22b": 141e9,  # mistral.ai/news/mixtral-8x22b
    "deepseek-v3": 671e9,  # arXiv:2412.19437 Sec. 4.2; the 685B HF checkpoint adds the 14B MTP module (not modelled)
    "qwen3-30b-a3b": 30.5e9,  # Qwen/Qwen3-30B-A3B model card
    "qwen3-235b-a22b": 235e9,  # Qwen/Qwen3-235B-A22B model card
    "qwen3-32b": 32.8e9,  # Qwen/Qwen3-32B model card
    "gpt-oss-120b": 116.83e9,  # gpt-oss model card (arXiv:2508.10925), Table 1
    "gpt-oss-20b": 20.91e9,  # idem
    "qwen3-0.6b": 0.6e9,  # Qwen/Qwen3-0.6B model card; computed 0.596e9
    "qwen3-1.7b": 1.7e9,  # Qwen/Qwen3-1.7B model card; computed 1.72e9
    "qwen3-4b": 4.0e9,  # Qwen/Qwen3-4B model card; computed 4.02e9
    "qwen3-8b": 8.2e9,  # Qwen/Qwen3-8B model card; computed 8.19e9
    "qwen3-14b": 14.8e9,  # Qwen/Qwen3-14B model card; computed 14.77e9
    "qwen3-coder-480b": 480e9,  # Qwen/Qwen3-Coder-480B-A35B-Instruct model card; computed 480.2e9
    "kimi-k2": 1.04e12,  # Kimi K2 report (arXiv:2507.20534): 1.04T; model card: 1T; computed 1.026e12 (1.3% under)
    "llama3.2-1b": 1.23e9,  # meta-llama/Llama-3.2-1B model card; computed 1.236e9
    "llama3.2-3b": 3.21e9,  # meta-llama/Llama-3.2-3B model card; computed 3.213e9
    "nemotron-h-56b": 56e9,  # nominal size (arXiv:2504.03624); computed 56.3e9
    "llama4-scout": 109e9,  # model card: 109B total, with the vision encoder (not modelled); computed 107.8e9 text
    "mamba2-2.7b": 2.7e9,  # nominal size (arXiv:2405.21060); computed 2.70e9
    "nemotron-h-8b": 8e9,  # nominal size (arXiv:2504.03624); computed 8.10e9 (1.3% over)
    "minimax-m2.5": 230e9,  # MiniMaxAI/MiniMax-M2.5 model card: 230B total; computed 228.7e9 (0.6% under)
    "qwen3.5-397b-a17b": 397e9,  # the model's name and card: 397B (with the vision tower); computed 395.8e9 text
    "glm-5": 744e9,  # zai-org/GLM-5 model card: 744B; computed 743.2e9 (indexer and MTP layer not counted)
}

# Published parameters per token, counted as the publisher counts them: (value, includes the input embedding).
# The lookup of the input embedding is no matmul, so gpt-oss and DeepSeek's README count the output head only.
PUBLISHED_ACTIVE = {
    "mixtral-8x7b": (12.9e9, True),  # mistral.ai/news/mixtral-of-experts (paper: 13B)
    "mixtral-8x22b": (39e9, True),  # mistral.ai/news/mixtral-8x22b
    "deepseek-v3": (37e9, True),  # arXiv:2412.19437 abstract and Sec. 4.2
    "qwen3-30b-a3b": (3.3e9, True),  # model card
    "qwen3-235b-a22b": (22e9, True),  # model card
    "gpt-oss-120b": (5.13e9, False),  # model card Table 1: MLP (4 of 128 experts) + attention + unembedding
    "gpt-oss-20b": (3.61e9, False),  # idem (4 of 32 experts)
    "qwen3-coder-480b": (35e9, True),  # model card: 35B activated; computed 35.5e9
    "kimi-k2": (32.6e9, True),  # arXiv:2507.20534: 32.6B activated (model card: 32B); computed 32.9e9
    "llama4-scout": (17e9, True),  # model card: 17B activated (1 of 16 experts + the shared one); computed 17.2e9
    "qwen3.5-397b-a17b": (17e9, True),  # the model's name: A17B; computed 16.8e9
    "glm-5": (40e9, True),  # zai-org/GLM-5 model card: 40B active; computed 41.1e9 (2.6% over)
}

EXPECTED_PROFILES = {
    "a100-sxm-80g",
    "h100-sxm",
    "h200-sxm",
    "h800-sxm",
    "b200",
    "l40s",
    "h100-96g-500w",
    "gb200",
    "h20",
    "h20-3e",
    "h100-pcie",
    "b300",
}
NVLINK_DOMAIN = {"gb200": 72}  # GPUs per node where the NVLink domain is more than one 8-GPU board


def _raw_profile(name: str) -> dict[str, Any]:
    text = (resources.files("autopar") / "data" / "profiles" / f"{name}.yaml").read_text(encoding="utf-8")
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


@pytest.mark.parametrize(("name", "published"), sorted(PUBLISHED_ACTIVE.items()))
def test_preset_active_parameters_match_publication(name: str, published: tuple[float, bool]) -> None:
    spec = load_model(name)
    value, with_embedding = published
    active = spec.active_params() - (0 if with_embedding else spec.embedding_params())
    assert active == pytest.approx(value, rel=0.03)
    assert spec.active_params() < spec.total_params()


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("deepseek-v3", 36.6e9),  # DeepSeek-V3 README_WEIGHTS.md: 36.6B activated, including the 0.9B output head
        ("gpt-oss-120b", 5.13e9),  # model card Table 1
        ("gpt-oss-20b", 3.61e9),  # model card Table 1
    ],
)
def test_active_parameters_without_input_embedding_are_exact(name: str, published: float) -> None:
    """Counted the publisher's way (no input embedding), the active count matches to 0.5%."""
    spec = load_model(name)
    assert spec.active_params() - spec.embedding_params() == pytest.approx(published, rel=0.005)


@pytest.mark.parametrize(("name", "published"), [("qwen3-30b-a3b", 29.9e9), ("qwen3-235b-a22b", 234e9)])
def test_qwen3_non_embedding_parameters(name: str, published: float) -> None:
    """Model cards: 'Number of Parameters (Non-Embedding)'; Qwen3 MoE unties input and output embeddings."""
    spec = load_model(name)
    non_embedding = spec.total_params() - 2 * spec.embedding_params()
    assert non_embedding == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("qwen3-0.6b", 0.44e9),
        ("qwen3-1.7b", 1.4e9),
        ("qwen3-4b", 3.6e9),
        ("qwen3-8b", 6.95e9),
        ("qwen3-14b", 13.2e9),
    ],
)
def test_qwen3_dense_non_embedding_parameters(name: str, published: float) -> None:
    """Model cards: 'Number of Parameters (Non-Embedding)'. The 0.6B, 1.7B and 4B tie the output head to the
    input embedding (config.json tie_word_embeddings true; report Table 1), the 8B and 14B do not."""
    spec = load_model(name)
    assert spec.tie_embeddings is (name in ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b"))
    embeddings = spec.embedding_params() * (1 if spec.tie_embeddings else 2)
    assert spec.total_params() - embeddings == pytest.approx(published, rel=0.02)


def test_kimi_k2_is_deepseek_v3_with_384_experts_and_64_heads() -> None:
    """moonshotai/Kimi-K2-Instruct config.json against deepseek-ai/DeepSeek-V3's: the same MLA ranks and
    expert width, 384 routed experts instead of 256, 64 heads instead of 128, one dense layer instead of 3."""
    kimi, ds = load_model("kimi-k2"), load_model("deepseek-v3")
    assert kimi.mla == ds.mla and kimi.hidden_size == ds.hidden_size == 7168 and kimi.layers == ds.layers == 61
    assert kimi.moe is not None and ds.moe is not None
    assert (kimi.moe.num_experts, kimi.moe.top_k, kimi.moe.shared_experts, kimi.moe.first_dense_layers) == (384, 8, 1, 1)
    assert kimi.moe.expert_ffn_hidden_size == ds.moe.expert_ffn_hidden_size == 2048
    assert (kimi.num_attention_heads, kimi.num_kv_heads, kimi.vocab_size) == (64, 64, 163840)


def test_dense_presets_are_all_active() -> None:
    for name in set(PUBLISHED_PARAMS) - set(PUBLISHED_ACTIVE):
        spec = load_model(name)
        if spec.moe is None:
            assert spec.active_params() == spec.total_params()


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("mixtral-8x7b", {"moe": 32}),
        ("deepseek-v3", {"dense": 3, "moe": 58}),
        ("qwen3-235b-a22b", {"moe": 94}),
        ("gpt-oss-120b", {"moe": 36}),
        ("gpt-oss-20b", {"moe": 24}),
        ("kimi-k2", {"dense": 1, "moe": 60}),
        ("qwen3-coder-480b", {"moe": 62}),
        ("mamba2-2.7b", {"mamba": 64}),
        ("nemotron-h-8b", {"mamba": 24, "mlp": 24, "attention": 4}),
        ("nemotron-h-56b", {"mamba": 54, "mlp": 54, "attention": 10}),
        ("llama4-scout", {"moe": 48}),
    ],
)
def test_preset_layer_kinds(name: str, kinds: dict[str, int]) -> None:
    spec = load_model(name)
    found = spec.layer_kinds()
    assert {k: found.count(k) for k in set(found)} == kinds


def test_new_family_preset_details() -> None:
    ds = load_model("deepseek-v3")
    assert ds.mla is not None and ds.moe is not None
    assert (ds.mla.q_lora_rank, ds.mla.kv_lora_rank, ds.mla.qk_rope_head_dim) == (1536, 512, 64)
    assert (ds.moe.num_experts, ds.moe.top_k, ds.moe.shared_experts, ds.moe.expert_ffn_hidden_size) == (256, 8, 1, 2048)
    assert ds.ffn_hidden_size == 18432
    mamba = load_model("mamba2-2.7b").mamba
    assert mamba is not None and (mamba.num_groups, mamba.heads(2560), mamba.chunk_size) == (1, 80, 256)
    hybrid = load_model("nemotron-h-8b")
    assert hybrid.mamba is not None and len(hybrid.mamba.layer_pattern) == hybrid.layers == 52
    assert (hybrid.mamba.heads(hybrid.hidden_size), hybrid.mamba.num_groups) == (128, 8)
    for name in ("mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-120b", "gpt-oss-20b", "qwen3-coder-480b"):
        spec = load_model(name)
        assert spec.moe is not None and spec.moe.first_dense_layers == 0
        assert spec.ffn_hidden_size == spec.moe.expert_ffn_hidden_size, "unused dense width is set to the expert width"


@pytest.mark.parametrize(
    ("name", "activation", "kv_heads", "tied"),
    [
        ("mixtral-8x22b", "swiglu", 8, False),
        ("deepseek-v3", "swiglu", 128, False),
        ("qwen3-30b-a3b", "swiglu", 4, False),
        ("gpt-oss-120b", "swiglu", 8, False),
        ("mamba2-2.7b", "swiglu", 40, True),
        ("nemotron-h-8b", "relu2", 8, False),
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
    assert hw.gpus_per_node == NVLINK_DOMAIN.get(name, 8)
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


# Headline numbers copied by hand from the sources each profile cites (dense, no sparsity):
# (memory MiB from nvidia-smi, HBM TB/s, bf16 / fp8 / tf32 / fp32 TFLOPS).
HEADLINE = {
    # nvidia-smi 189471 MiB (aiconfigurator systems/gb200.yaml); GB200 NVL72 page: 576 TB/s, 360 / 720 / 180 PF
    # sparse and 5,760 TF FP32 for 72 GPUs
    "gb200": (189471, 8.0, 2500, 5000, 1250, 80),
    # nvidia-smi 97871 MiB (NVIDIA/nvtrust#128); 96 GB HBM3 at 4.0 TB/s, 148 / 296 / 74 / 44 TFLOPS
    "h20": (97871, 4.0, 148, 296, 74, 44),
    # nvidia-smi 143771 MiB and 4.8 TB/s HBM3e (aiconfigurator systems/h20_3e.yaml at 69513ef); the H20's compute
    "h20-3e": (143771, 4.8, 148, 296, 74, 44),
    # nvidia-smi 81559 MiB; H100 datasheet (2022), H100 PCIe: 2 TB/s, 1,513 / 3,026 / 756 sparse, 51 FP32
    "h100-pcie": (81559, 2.0, 756.5, 1513, 378, 51),
}


@pytest.mark.parametrize(("name", "numbers"), sorted(HEADLINE.items()))
def test_new_profiles_headline_numbers_match_their_sources(name: str, numbers: tuple[float, ...]) -> None:
    mib, tbps, bf16, fp8, tf32, fp32 = numbers
    hw = load_hardware(name)
    assert hw.memory_bytes == pytest.approx(mib * 2**20, rel=1e-4)
    assert hw.hbm_bytes_per_s == pytest.approx(tbps * 1e12)
    assert [hw.peak(d) / 1e12 for d in ("bf16", "fp16", "fp8", "tf32", "fp32")] == pytest.approx([bf16, bf16, fp8, tf32, fp32])


def test_gb200_is_one_72_gpu_nvlink_domain() -> None:
    """NVL72: the 72-GPU all-reduce (NVLS, 839.2 GB/s busbw at 4 GiB, coreweave/nccl-tests#43) is
    NVLink-fast; one rack's rail between racks is 47 GB/s, as on the 8-GPU boards."""
    gb200, b200 = load_hardware("gb200"), load_hardware("b200")
    ar = {f.group_size: f for f in gb200.intra["all_reduce"]}
    assert ar[72].bw_bytes_per_s == pytest.approx(839.2e9)
    assert ar[72].bw_bytes_per_s > 15 * gb200.inter["all_reduce"][0].bw_bytes_per_s
    assert gb200.peak("bf16") > b200.peak("bf16") and gb200.memory_bytes > b200.memory_bytes


def test_gb200_hosts_hold_4_gpus_of_the_72_gpu_node() -> None:
    """A GB200 NVL72 compute tray (one host) holds 4 of the rack's 72 GPUs (aiconfigurator systems/gb200.yaml at
    095f58a51c4c: num_gpus_per_node 4, '18 compute trays x 4 GPUs each'); the cost model's node stays 72."""
    gb200 = load_hardware("gb200")
    assert (gb200.gpus_per_node, gb200.gpus_per_host, gb200.host_gpus) == (72, 4, 4)
    assert all(load_hardware(name).host_gpus == load_hardware(name).gpus_per_node for name in EXPECTED_PROFILES - {"gb200"})


def test_h20_trades_compute_for_bandwidth() -> None:
    """H20: 15% of H100's BF16 peak, 1.19x its HBM bandwidth, more of its peak reached (torch.mm
    142.25 of 148 TFLOPS, zzc0721/torch-performance-test-data#77)."""
    h20, h100 = load_hardware("h20"), load_hardware("h100-sxm")
    assert h20.peak("bf16") / h100.peak("bf16") == pytest.approx(148 / 989.4)
    assert h20.hbm_bytes_per_s > h100.hbm_bytes_per_s
    assert h20.gemm_efficiency("bf16", 2 * 10240**3) == pytest.approx(142.25 / 148, abs=1e-3)
    assert h20.gemm_efficiency("bf16", 2 * 10240**3) > h100.gemm_efficiency("bf16", 2 * 10240**3)


def test_h100_pcie_pairs_are_nvlink_and_the_rest_pcie() -> None:
    hw = load_hardware("h100-pcie")
    ar = {f.group_size: f.bw_bytes_per_s for f in hw.intra["all_reduce"]}
    assert ar[2] == pytest.approx(247e9) and ar[4] == pytest.approx(40e9) and ar[8] == pytest.approx(32e9)


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


def test_every_code_folder_is_a_package():
    """setuptools' find_packages (pyproject: packages.find) ships only folders with an
    __init__.py; a folder of modules without one works in an editable install and is
    missing from a real one (autopar/calibrate was)."""
    root = Path(autopar.__file__).parent
    missing = [str(d.relative_to(root)) for d in root.rglob("*") if d.is_dir() and any(d.glob("*.py")) and not (d / "__init__.py").exists()]
    assert missing == []


SHIPPED = sorted(Path(autopar.__file__).parent.joinpath("data").rglob("*.yaml"))


def test_every_shipped_file_is_parsed_by_libyaml_to_the_values_of_the_slow_parser() -> None:
    """io/reading.py reads autopar/data with libyaml (start-up), any other file with the pure-Python loader
    that tracks lines for messages: on every file we ship the two give equal values of equal types."""
    from autopar.io.reading import parse
    from autopar.io.yaml_text import _load_shipped

    assert len(SHIPPED) > 40 and yaml.__with_libyaml__
    for path in SHIPPED:
        text = path.read_text()
        fast, slow = _load_shipped(text), parse(text, json_text=False)
        assert fast is not None, path
        assert fast == slow and repr(fast) == repr(slow), path


def test_a_shipped_file_with_a_repeated_key_is_still_refused_with_its_line() -> None:
    from autopar.io.reading import parse

    with pytest.raises(ValueError, match=r"duplicate key 'a' \(at line 2\)"):
        parse("a: 1\na: 2\n", json_text=False, shipped=True)
    with pytest.raises(ValueError, match="malformed YAML at line 2"):
        parse("a: [1\nb: 2\n", json_text=False, shipped=True)
