"""The newer serving models, the B300 profile, FP4 weights and KV dtype `auto` (issue 23).

Parameter counts are held against the publishers' totals; KV bytes per token, weight bytes and peaks
are derived by hand from the config.json fields and datasheets each preset and profile cites.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.serve import dense_weights, gemm_dtype, kv_bytes_per_token, state_bytes_per_request, weight_bytes_per_gpu
from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.spec.serve import Deployment, Engine, kv_auto

runner = CliRunner()


@pytest.mark.parametrize(
    ("ref", "name", "total", "active"),
    [
        ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5", 230e9, None),  # model card: 230B total
        ("Qwen/Qwen3.5-397B-A17B", "qwen3.5-397b-a17b", 397e9, 17e9),  # the model's name
        ("zhipuai/GLM-5", "glm-5", 744e9, 40e9),  # zai-org/GLM-5 card: 744B, 40B active (the rows' org name)
        ("moonshotai/Kimi-K2.5", "kimi-k2", 1.04e12, 32.6e9),  # Kimi K2's shape (arXiv:2507.20534)
    ],
)
def test_newer_models_find_their_preset_and_published_size(ref: str, name: str, total: float, active: float | None) -> None:
    spec = load_model(ref)
    assert spec.name == name
    assert spec.total_params() == pytest.approx(total, rel=0.015)
    if active is not None:
        assert spec.active_params() == pytest.approx(active, rel=0.03)


def test_kv_bytes_per_token_hand_derived() -> None:
    one = Engine()
    # MiniMax-M2.5: 62 layers x (K + V) x 8 KV heads x 128 x 2 bytes
    assert kv_bytes_per_token(load_model("minimax-m2.5"), one, 2.0) == 62 * 2 * 8 * 128 * 2 == 253_952
    # at tp 8 each GPU holds one KV head
    assert kv_bytes_per_token(load_model("minimax-m2.5"), Engine(tp=8), 2.0) == 62 * 2 * 1 * 128 * 2
    # Qwen3.5-397B: only the 15 full-attention layers cache K and V (2 KV heads of 256)
    qwen = load_model("qwen3.5-397b-a17b")
    assert kv_bytes_per_token(qwen, one, 2.0) == 15 * 2 * 2 * 256 * 2 == 30_720
    assert kv_bytes_per_token(qwen, Engine(tp=4), 1.0) == 15 * 2 * 1 * 256 * 1  # a KV head replicated above tp 2
    # ... and the 45 Gated DeltaNet layers a fixed state per request: conv (8192 + 2 x 16 x 128) x 3 in bf16 and
    # the recurrent state 64 heads x 128 x 128 in float32 (config.json mamba_ssm_dtype; SGLang mamba2_state_dtype)
    assert state_bytes_per_request(qwen, one) == 45 * (2 * (8192 + 2 * 16 * 128) * 3 + 4 * 64 * 128 * 128) == 192_061_440
    assert state_bytes_per_request(qwen, Engine(tp=4)) == 192_061_440 / 4  # 45.8 MiB a request on each of 4 GPUs
    # GLM-5: MLA latent 512 + rope 64 per layer at the KV dtype, plus the DSA indexer key (128 fp8 + one
    # fp32 scale) whatever the KV dtype (vLLM indexer.py, SGLang NSATokenToKVPool)
    glm = load_model("glm-5")
    assert kv_bytes_per_token(glm, one, 2.0) == 78 * (576 * 2 + 132) == 100_152
    assert kv_bytes_per_token(glm, Engine(tp=8), 1.0) == 78 * (576 + 132) == 55_224
    # Kimi-K2.5 (kimi-k2): 61 layers x 576, no indexer
    assert kv_bytes_per_token(load_model("moonshotai/Kimi-K2.5"), one, 2.0) == 61 * 576 * 2


def test_b300_profile_is_nvidia_published_peaks() -> None:
    hw = load_hardware("b300")
    # 275040 MiB (nvidia-smi, 288 GB HBM3e); HGX B300: bf16 36 / fp8 72 PFLOPS sparse for 8 GPUs, fp4 14 PF dense
    assert hw.memory_bytes == pytest.approx(268.59 * 2**30)
    assert (hw.peak("bf16"), hw.peak("fp8"), hw.peak("fp4")) == (2250e12, 4500e12, 14000e12)
    assert hw.hbm_bytes_per_s == pytest.approx(8000e9)
    assert hw.gpus_per_node == 8
    assert load_hardware("b200").peak("fp4") == 9000e12  # HGX B200: 72 PFLOPS FP4 dense / 8
    assert load_hardware("gb200").peak("fp4") == 10000e12  # GB200 NVL72: 1,440 PFLOPS sparse / 72 / 2


def test_fp4_runs_fp4_gemms_where_the_gpu_has_them() -> None:
    assert gemm_dtype(load_hardware("b300"), "fp4") == "fp4"
    assert gemm_dtype(load_hardware("h100-sxm"), "fp4") == "fp8"  # no fp4 tensor cores: the fp8 rate
    assert gemm_dtype(load_hardware("b300"), "int4") == "bf16"  # weight-only
    # B200 has no fp4 GEMM curve of its own: fp4 takes fp8's efficiency
    b200 = load_hardware("b200")
    assert b200.gemm_efficiency("fp4", 1e12) == b200.gemm_efficiency("fp8", 1e12)


def test_b300_curves_are_b200s_times_b300s_measured_speed() -> None:
    """b300.yaml: B200's curves x B300's speed over B200 in aiconfigurator's vLLM 0.19.0 sweeps (same harness,
    095f58a): bf16 GEMMs 1.053-1.079, fp8 1.027-1.092, prefill attention 1.060 (512) to 1.169 (16k); NVFP4 no
    faster than B200 (B200's fp4 rate, 9000 x its fp8 curve, over B300's 14000 peak)."""
    b200, b300 = load_hardware("b200"), load_hardware("b300")
    for dtype, flops, ratio in (("bf16", 2.1475e9, 1.058), ("bf16", 8.7961e12, 1.074), ("fp8", 1.3744e11, 1.027)):
        assert b300.gemm_efficiency(dtype, flops) == pytest.approx(b200.gemm_efficiency(dtype, flops) * ratio, abs=1e-4)
    for seq, ratio in ((512, 1.060), (4096, 1.124), (16384, 1.169)):
        assert b300.attention_efficiency("bf16", seq) == pytest.approx(b200.attention_efficiency("bf16", seq) * ratio, abs=1e-4)
    fp4_rate = b300.peak("fp4") * b300.gemm_efficiency("fp4", 8.7961e12)
    assert fp4_rate == pytest.approx(b200.peak("fp4") * b200.gemm_efficiency("fp4", 8.7961e12), rel=1e-3)


def test_4bit_moe_checkpoints_quantise_the_experts_only() -> None:
    model = load_model("minimax-m2.5")
    assert dense_weights(model, "fp4") == "bf16" and dense_weights(model, "fp8") == "fp8"
    assert dense_weights(load_model("llama3.1-8b"), "fp4") == "fp4"  # a dense model's every linear
    # per layer: attention q/o 3072 x 6144 twice, k/v 3072 x 1024 twice, q/k norms 2 x 128, router 3072 x 256
    # (bf16); 256 experts of 3 x 3072 x 1536 at NVFP4's 4.5 bits; embeddings and the output layer (+ final norm)
    # in bf16
    attn = 2 * 3072 * 6144 + 2 * 3072 * 1024 + 2 * 128
    experts = 256 * 3 * 3072 * 1536
    ends = 200064 * 3072 * 2 + 3072
    want = 62 * ((attn + 3072 * 256) * 2 + experts * 0.5625) + 2 * ends
    assert weight_bytes_per_gpu(model, Engine(), "fp4") == pytest.approx(want)
    assert weight_bytes_per_gpu(model, Engine(), "fp8") == pytest.approx(62 * (attn + 3072 * 256 + experts) + 2 * ends)


# --- KV dtype auto --------------------------------------------------------------------------------------

QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "vocab_size": 151936,
}


def _checkpoint(tmp_path: Path, quant: dict | None = None, **config: object) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_MOE | config))
    if quant is not None:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(quant))
    return tmp_path


NVFP4 = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}


def test_auto_reads_hf_quant_config_of_the_folder(tmp_path: Path) -> None:
    spec = load_model(str(_checkpoint(tmp_path, NVFP4)))
    assert kv_auto(spec) == ("fp8", "hf_quant_config.json kv_cache_quant_algo FP8")
    dep = Deployment(fw=load_framework("vllm"), mode="agg", engine=Engine(), replicas=1, kv_auto=kv_auto(spec)[0])
    assert dep.kv_bytes == 1.0 and dep.kv_resolved == "fp8"
    none = {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}
    assert kv_auto(load_model(str(_checkpoint(tmp_path, none)))) == ("bf16", "hf_quant_config.json kv_cache_quant_algo None")


@pytest.mark.parametrize(
    ("qc", "want"),
    [
        (
            {"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": False}},
            ("fp8", "config.json quantization_config.kv_cache_scheme 8-bit float"),
        ),
        ({"quant_method": "compressed-tensors", "kv_cache_scheme": None}, ("bf16", "config.json quantization_config.kv_cache_scheme null")),
        ({"quant_method": "modelopt", "kv_cache_quant_algo": "FP8"}, ("fp8", "config.json quantization_config.kv_cache_quant_algo FP8")),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, ("bf16", "the activation dtype")),
    ],
)
def test_auto_reads_config_json_quantization_config(tmp_path: Path, qc: dict, want: tuple[str, str]) -> None:
    assert kv_auto(load_model(str(_checkpoint(tmp_path, quantization_config=qc) / "config.json"))) == want


def test_auto_without_a_checkpoint_is_the_activation_dtype_or_the_preset_field(tmp_path: Path) -> None:
    assert kv_auto(load_model("qwen3-32b")) == ("bf16", "the activation dtype")
    spec = tmp_path / "m.yaml"
    spec.write_text(
        "name: m\nlayers: 2\nhidden_size: 256\nnum_attention_heads: 4\nffn_hidden_size: 512\n"
        "vocab_size: 1000\nseq_len: 512\nkv_dtype_default: fp8\n"
    )
    dtype, why = kv_auto(load_model(str(spec)))
    assert dtype == "fp8" and why.endswith("kv_dtype_default")


ESTIMATE = [
    "serve",
    "estimate",
    "--gpus",
    "1",
    "--tp",
    "1",
    "--hardware",
    "h100-sxm",
    "--concurrency",
    "8",
    "--isl",
    "1024",
    "--osl",
    "128",
]


def test_estimate_says_what_auto_resolved_to(tmp_path: Path) -> None:
    folder = str(_checkpoint(tmp_path, NVFP4))
    r = runner.invoke(app, [*ESTIMATE[:2], folder, *ESTIMATE[2:], "--weights", "fp8", "--json"])
    assert r.exit_code == 0, r.output
    auto = json.loads(r.stdout)
    assert auto["kv_dtype"] == "auto"
    assert auto["kv_dtype_auto"] == {"dtype": "fp8", "source": "hf_quant_config.json kv_cache_quant_algo FP8"}
    r = runner.invoke(app, [*ESTIMATE[:2], folder, *ESTIMATE[2:], "--weights", "fp8", "--kv-dtype", "bf16", "--json"])
    bf16 = json.loads(r.stdout)
    # the same pool holds twice the tokens at one byte per element (page rounding aside)
    assert auto["kv_cache_tokens"] == pytest.approx(2 * bf16["kv_cache_tokens"], rel=0.01)
    r = runner.invoke(app, [*ESTIMATE[:2], folder, *ESTIMATE[2:], "--weights", "fp8"])
    assert "KV auto (fp8, from hf_quant_config.json kv_cache_quant_algo FP8)" in " ".join(r.stdout.split())


@pytest.mark.parametrize(
    ("quant", "config", "needle"),
    [
        (
            {"quantization": {"kv_cache_quant_algo": "INT4"}},
            {},
            "hf_quant_config.json: quantization.kv_cache_quant_algo: 'INT4' is not a KV-cache quantisation",
        ),
        ({"quantization": "FP8"}, {}, "hf_quant_config.json: quantization must be a mapping"),
        (
            None,
            {"quantization_config": {"kv_cache_scheme": {"num_bits": 4, "type": "int"}}},
            "config.json: quantization_config.kv_cache_scheme:",
        ),
    ],
)
def test_a_quantisation_config_it_cannot_read_exits_2_naming_file_and_field(
    tmp_path: Path, quant: dict | None, config: dict, needle: str
) -> None:
    folder = str(_checkpoint(tmp_path, quant, **config))
    r = runner.invoke(app, [*ESTIMATE[:2], folder, *ESTIMATE[2:]])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.output


def test_suggest_sweeps_auto_once_when_it_already_is_fp8(tmp_path: Path) -> None:
    folder = str(_checkpoint(tmp_path, NVFP4))
    args = ["serve", "suggest", folder, "--gpus", "1", "--hardware", "h100-sxm", "--isl", "1024", "--osl", "128"]
    fp8 = runner.invoke(app, [*args, "--modes", "agg", "--json"])
    assert fp8.exit_code == 0, fp8.output
    assert {p["kv_dtype"] for p in json.loads(fp8.stdout)["pareto"]} == {"auto"}  # auto is fp8: no second fp8 sweep
    plain = runner.invoke(app, [*args, "--modes", "agg", "--json", "--kv-dtype", "fp8"])
    assert json.loads(plain.stdout)["pareto"][0]["tpot_ms"] == pytest.approx(json.loads(fp8.stdout)["pareto"][0]["tpot_ms"])


@pytest.mark.parametrize("name", ["minimax-m2.5", "qwen3.5-397b-a17b", "glm-5", "kimi-k2", "gpt-oss-120b", "llama3.1-8b"])
@pytest.mark.parametrize("tp", [1, 2, 8])
def test_fewer_weight_bits_never_weigh_more(name: str, tp: int) -> None:
    """bf16 > fp8 > fp4 and int4 per GPU, whichever weights a 4-bit checkpoint leaves in bf16."""
    model, engine = load_model(name), Engine(tp=tp)
    bf16, fp8 = weight_bytes_per_gpu(model, engine, "bf16"), weight_bytes_per_gpu(model, engine, "fp8")
    assert bf16 > fp8 > weight_bytes_per_gpu(model, engine, "fp4") > weight_bytes_per_gpu(model, engine, "int4")


def test_auto_reads_the_cached_snapshot_of_a_hugging_face_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = tmp_path / "models--nvidia--Qwen3-30B-A3B-NVFP4" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("abc")
    _checkpoint(snapshot, NVFP4)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert kv_auto(load_model("nvidia/Qwen3-30B-A3B-NVFP4")) == ("fp8", "hf_quant_config.json kv_cache_quant_algo FP8")
