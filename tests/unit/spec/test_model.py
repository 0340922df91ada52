"""Model specs: YAML and HF config.json loading, parameter counts, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopar.errors import SpecError
from autopar.io.models import from_hf_config, load_model
from tests.conftest import gpt_like, llama70b

GOOD = """\
name: tiny
layers: 2
hidden_size: 256
num_attention_heads: 8
num_kv_heads: 2
ffn_hidden_size: 1024
ffn_activation: swiglu
vocab_size: 1000
seq_len: 512
"""


def write(tmp_path: Path, text: str | bytes, name: str = "m.yaml") -> str:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return str(p)


def test_yaml_spec_defaults(tmp_path: Path) -> None:
    m = load_model(write(tmp_path, GOOD))
    assert (m.layers, m.head_dim, m.num_kv_heads, m.max_seq_len, m.tie_embeddings) == (2, 32, 2, 512, False)


def test_param_count_hand_derived() -> None:
    # h=1024, a*d=1024, MHA: attention 4h^2 = 4,194,304; GELU MLP 2*h*4h = 8,388,608;
    # norms 2h = 2,048 -> block 12,584,960. Embedding 32000*1024 = 32,768,000, tied, final norm 1024.
    m = gpt_like()
    assert m.layer_params() == 12_584_960
    assert m.total_params() == 4 * 12_584_960 + 32_768_000 + 1024


def test_llama70b_params_match_published() -> None:
    # Meta reports 70.6B for Llama 3 70B (model card).
    assert llama70b().total_params() == pytest.approx(70.55e9, rel=0.005)


BAD = [
    ("missing field", GOOD.replace("layers: 2\n", ""), "layers: missing required field"),
    ("extra field", GOOD + "layerz: 3\n", "layerz: unknown field (did you mean 'layers'?)"),
    ("wrong type", GOOD.replace("layers: 2", "layers: two"), "layers: expected an integer, got 'two'"),
    ("zero size", GOOD.replace("hidden_size: 256", "hidden_size: 0"), "hidden_size: must be >= 1, got 0"),
    ("negative size", GOOD.replace("seq_len: 512", "seq_len: -5"), "seq_len: must be >= 1, got -5"),
    ("heads vs kv", GOOD.replace("num_kv_heads: 2", "num_kv_heads: 3"), "num_attention_heads (8) must be divisible by num_kv_heads (3)"),
    ("activation", GOOD.replace("swiglu", "swish"), "ffn_activation: must be one of swiglu, gelu, relu2"),
    ("malformed", "name: [unclosed\n", "malformed YAML at line 2"),
    ("empty", "  \n", "file is empty"),
    ("python tag", "!!python/object/apply:os.system ['echo hi']\n", "YAML tags that construct objects are not allowed"),
    ("not a mapping", "- 1\n- 2\n", "expected a mapping of fields at the top level, got a list"),
    ("moe missing", GOOD + "moe: {num_experts: 8}\n", "moe.top_k: missing required field"),
    (
        "moe top_k",
        GOOD + "moe: {num_experts: 8, top_k: 9, expert_ffn_hidden_size: 64}\n",
        "moe.top_k (9) must not exceed moe.num_experts (8)",
    ),
    (
        "moe typo",
        GOOD + "moe: {num_experts: 8, top_k: 2, expert_ffn_hidden_size: 64, topk: 2}\n",
        "moe.topk: unknown field (did you mean 'top_k'?)",
    ),
    (
        "pattern char",
        GOOD + "mamba: {state_size: 128, head_dim: 64, layer_pattern: 'M*X'}\n",
        "mamba.layer_pattern: unknown character(s) 'X'",
    ),
    (
        "pattern length",
        GOOD + "mamba: {state_size: 128, head_dim: 64, layer_pattern: 'M*M'}\n",
        "mamba.layer_pattern has 3 layers but layers is 2",
    ),
    (
        "pattern E without moe",
        GOOD + "mamba: {state_size: 128, head_dim: 64, layer_pattern: 'ME'}\n",
        "uses E (MoE) but the spec has no moe section",
    ),
]


@pytest.mark.parametrize(("case", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_yaml_specs(tmp_path: Path, case: str, text: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        path = write(tmp_path, text)
        load_model(path)
    assert message in str(err.value)
    assert str(err.value).startswith(f"{path}: ")  # the spec's own checks too name the file that gave it
    assert "\n" not in str(err.value)


def test_non_utf8(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not UTF-8 text"):
        load_model(write(tmp_path, b"name: \xff\xfe\n"))


def test_missing_file_and_unknown_preset() -> None:
    with pytest.raises(SpecError, match="file not found"):
        load_model("/nonexistent/model.yaml")
    with pytest.raises(SpecError, match="unknown model 'llama3-7b'"):
        load_model("llama3-7b")


HF_LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
}


def test_hf_llama_config(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(HF_LLAMA))
    m = load_model(str(folder))
    assert (m.layers, m.num_kv_heads, m.ffn_activation, m.seq_len) == (32, 8, "swiglu", 8192)
    assert m.total_params() == pytest.approx(8.03e9, rel=0.005)  # Llama 3 8B


def test_hf_qwen3_head_dim_and_gpt2() -> None:
    qwen = dict(HF_LLAMA, model_type="qwen3", head_dim=128, hidden_size=2560, num_attention_heads=32)
    assert from_hf_config(qwen, where="q.json").q_width == 4096
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "vocab_size": 50257}
    m = from_hf_config(gpt2, where="g.json")
    assert (m.ffn_hidden_size, m.ffn_activation, m.tie_embeddings) == (3072, "gelu", True)
    assert m.total_params() == pytest.approx(124.4e6, rel=0.01)  # GPT-2 small, without position embeddings


def test_hf_unsupported_type() -> None:
    with pytest.raises(SpecError, match="unsupported model_type 'mamba'"):
        from_hf_config({"model_type": "mamba"}, where="c.json")


def test_family_labels() -> None:
    assert [load_model(n).family() for n in ("llama3-8b", "gpt3-175b", "deepseek-v3", "mixtral-8x7b", "mamba2-2.7b", "nemotron-h-8b")] == [
        "dense GQA",
        "dense",
        "MoE MLA",
        "MoE GQA",
        "Mamba-2",
        "hybrid Mamba-2",
    ]
