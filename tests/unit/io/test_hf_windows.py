"""Hugging Face configs of gemma2, gemma3 and phi3; sliding-window attention in the spec and the costs;
repo ids read from the local Hugging Face cache (issue 25 item 5).

The config.json files are written here with the fields of the public configs (google/gemma-2-9b,
google/gemma-3-4b-it, microsoft/Phi-3-mini-4k-instruct, mistralai/Mistral-7B-v0.1); parameter counts
are the model cards' (Gemma 2 9B: 9.24B; Gemma 3 4B text stack: 3.88B; Phi-3-mini: 3.8B).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.flops import attention_fwd_flops
from autopar.errors import SpecError
from autopar.io.hf_config import from_hf_config
from autopar.io.models import hf_cache_dir, load_model

runner = CliRunner()

GEMMA2_9B = {
    "architectures": ["Gemma2ForCausalLM"],
    "model_type": "gemma2",
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
    "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "vocab_size": 256000,
}
GEMMA3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "mm_tokens_per_image": 256,
    "text_config": {
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "model_type": "gemma3_text",
        "num_hidden_layers": 34,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model", "num_hidden_layers": 27},
}
PHI3_MINI = {
    "architectures": ["Phi3ForCausalLM"],
    "model_type": "phi3",
    "hidden_act": "silu",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 2047,
    "tie_word_embeddings": False,
    "vocab_size": 32064,
}
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}


def read(data: dict) -> object:
    return from_hf_config(json.loads(json.dumps(data)), where="config.json")


def test_gemma2_gemma3_phi3_are_read_with_their_windows() -> None:
    g2 = read(GEMMA2_9B)  # every other layer windowed (Gemma2Config: layer i sliding iff (i + 1) % 2)
    assert (g2.layers, g2.head_dim, g2.tie_embeddings, g2.ffn_activation) == (42, 256, True, "swiglu")
    assert round(g2.total_params() / 1e9, 2) == 9.24
    assert (g2.sliding_window, g2.window_layers) == (4096, 21)
    g3 = read(GEMMA3_4B)  # the text_config, transformers' defaults for what it leaves out; 5 of 6 layers windowed
    assert (g3.num_attention_heads, g3.num_kv_heads, g3.vocab_size, g3.qk_norm) == (8, 4, 262208, True)
    assert round(g3.total_params() / 1e9, 2) == 3.88
    assert (g3.sliding_window, g3.window_layers) == (1024, 34 - 34 // 6)
    phi = read(PHI3_MINI)  # Phi-3: every layer
    assert round(phi.total_params() / 1e9, 2) == 3.82 and (phi.sliding_window, phi.window_layers) == (2047, 32)
    m = read(MISTRAL_7B)
    assert (m.sliding_window, m.window_layers) == (4096, 32)
    assert read({**MISTRAL_7B, "sliding_window": None}).window_layers == 0  # Mistral v0.2+: no window


def test_layer_types_and_qwen_windows() -> None:
    kinds = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"] * 8
    m = read({**MISTRAL_7B, "layer_types": kinds})
    assert m.window_layers == 24
    with pytest.raises(SpecError, match=r"config.json: layer_types: unsupported kind\(s\) 'chunked_attention'"):
        read({**MISTRAL_7B, "layer_types": ["chunked_attention"] * 32})
    with pytest.raises(SpecError, match="layer_types: has 3 entries but num_hidden_layers is 32"):
        read({**MISTRAL_7B, "layer_types": kinds[:3]})
    qwen = {**MISTRAL_7B, "model_type": "qwen2", "max_window_layers": 28, "sliding_window": 131072}
    assert read(qwen).window_layers == 0  # use_sliding_window false, as in every Qwen2.5 config
    assert read({**qwen, "use_sliding_window": True, "sliding_window": 4096}).window_layers == 32 - 28
    # a window at least the context long is full attention: read as no window (a model YAML is refused)
    assert read({**qwen, "use_sliding_window": True}).window_layers == 0


def test_window_shares_by_hand() -> None:
    m = read(MISTRAL_7B)  # every layer windowed at 4096
    assert m.kv_share(2048) == 1.0 and m.kv_share(8192) == 0.5  # 4096 of 8192 tokens kept
    # causal pairs: s*w - w^2/2 of s^2/2 -> 2w/s - (w/s)^2 = 1 - 0.25 at s = 2w
    assert m.causal_attention_share(8192) == pytest.approx(0.75)
    g2 = read(GEMMA2_9B)  # half the layers: 1 - 0.5 + 0.5 x 0.75
    assert g2.causal_attention_share(8192) == pytest.approx(0.875)
    full = replace(m, sliding_window=0, window_layers=0)
    ratio = attention_fwd_flops(m, seq_len=32768, batch=1, tp=1, cp=1) / attention_fwd_flops(full, seq_len=32768, batch=1, tp=1, cp=1)
    assert ratio == pytest.approx(2 * 4096 / 32768 - (4096 / 32768) ** 2)  # 0.234375


def test_windows_in_the_training_and_serving_estimates(tmp_path: Path) -> None:
    windowed, full = tmp_path / "w" / "config.json", tmp_path / "f" / "config.json"
    for path, data in ((windowed, MISTRAL_7B), (full, {**MISTRAL_7B, "sliding_window": None})):
        path.parent.mkdir()
        path.write_text(json.dumps(data))
    args = ["estimate", "--hardware", "h100-sxm", "--gpus", "8", "--tp", "8", "--seq-len", "32768", "--json"]
    w, f = (json.loads(runner.invoke(app, [args[0], str(p), *args[1:]]).stdout) for p in (windowed, full))
    assert w["step_time_s"] < 0.8 * f["step_time_s"]  # attention is most of a 32K step; the window cuts it to 23%
    serve = [
        "serve",
        "estimate",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "1",
        "--tp",
        "1",
        "--isl",
        "16384",
        "--osl",
        "1024",
        "--concurrency",
        "8",
        "--json",
    ]
    w, f = (json.loads(runner.invoke(app, [serve[0], serve[1], str(p), *serve[2:]]).stdout) for p in (windowed, full))
    assert w["kv_cache_tokens"] == f["kv_cache_tokens"]  # the same pool, in tokens of one layer
    # a request keeps 4096 of its 17,408 tokens in every layer: 17408 / 4096 = 4.25x the requests
    assert w["max_concurrency"] == pytest.approx(4.25 * f["max_concurrency"], rel=0.05)
    assert w["tpot_breakdown_ms"]["kv"] < 0.3 * f["tpot_breakdown_ms"]["kv"]  # decode reads the window only


def test_model_yaml_takes_window_fields(tmp_path: Path) -> None:
    preset = Path(__file__).resolve().parents[3] / "autopar" / "data" / "presets" / "llama3-8b.yaml"
    path = tmp_path / "m.yaml"
    path.write_text(preset.read_text() + "sliding_window: 4096\nwindow_layers: 16\n")
    m = load_model(str(path))
    assert (m.sliding_window, m.window_layers) == (4096, 16)
    path.write_text(preset.read_text() + "sliding_window: 4096\nwindow_layers: 40\n")
    with pytest.raises(SpecError, match=r"window_layers \(40\) exceeds layers \(32\)"):
        load_model(str(path))
    # a window longer than the context is refused, one line naming it (llama3-8b: max_seq_len 8192)
    path.write_text(preset.read_text() + "sliding_window: 16384\nwindow_layers: 16\n")
    r = runner.invoke(app, ["serve", "estimate", str(path), "--gpus", "1", "--tp", "1"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "sliding_window (16384) exceeds max_seq_len (8192)" in r.stderr


def _cache(root: Path, repo: str, config: dict, *, ref: bool = True) -> Path:
    folder = root / f"models--{repo.replace('/', '--')}"
    snap = folder / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    if ref:
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text("0123abcd")
    return snap / "config.json"


def test_repo_ids_read_from_the_hugging_face_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hf_cache_dir() == tmp_path / "hf" / "hub"
    _cache(tmp_path / "hf" / "hub", "mistralai/Mistral-7B-v0.1", MISTRAL_7B)
    m = load_model("mistralai/Mistral-7B-v0.1")
    assert (m.name, m.layers, m.sliding_window) == ("mistral-7b-v0.1", 32, 4096)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub2"))  # HF_HUB_CACHE wins over HF_HOME
    _cache(
        tmp_path / "hub2",
        "Qwen/Qwen2.5-72B-Instruct",
        {
            **MISTRAL_7B,
            "model_type": "qwen2",
            "num_hidden_layers": 80,
            "hidden_size": 8192,
            "num_attention_heads": 64,
            "intermediate_size": 29568,
            "vocab_size": 152064,
        },
        ref=False,
    )  # no refs/main: the snapshot there is
    assert load_model("Qwen/Qwen2.5-72B-Instruct").layers == 80
    assert load_model("meta-llama/Llama-3.1-8B-Instruct").name == "llama3.1-8b"  # not cached: the preset
    r = runner.invoke(app, ["suggest", "mistralai/Mistral-7B-v0.1", "--gpus", "8"])  # not in this cache
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert r.stderr.startswith(
        f"autopar: error: unknown model 'mistralai/Mistral-7B-v0.1': its config.json is not in the Hugging Face cache ({tmp_path / 'hub2'})"
    )
    assert "get it with `huggingface-cli download mistralai/Mistral-7B-v0.1 config.json`, or pass a config.json" in r.stderr
