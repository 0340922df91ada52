"""A Hugging Face repo id names a built-in preset (`autopar serve suggest Qwen/Qwen3-32B-FP8`):
the variant suffixes a repo adds (Instruct, FP8, a date, a version) do not change the architecture."""

from __future__ import annotations

import pytest

from autopar.errors import SpecError
from autopar.io.models import load_model, preset_for_hf_id


@pytest.mark.parametrize(
    ("hf_id", "preset"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3.1-8b"),
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "llama3.1-8b"),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "llama3-70b"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3-235b-a22b"),
        ("Qwen/Qwen3-32B", "qwen3-32b"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-v3"),  # the V3 architecture, config.json for config.json
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3.1-70b"),  # the 3.1 70B shape
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("nvidia/Nemotron-H-8B-Base-8K", "nemotron-h-8b"),
        ("Qwen/Qwen3-0.6B", "qwen3-0.6b"),
        ("Qwen/Qwen3-1.7B", "qwen3-1.7b"),
        ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-4b"),
        ("Qwen/Qwen3-4B-Thinking-2507", "qwen3-4b"),
        ("Qwen/Qwen3-8B", "qwen3-8b"),
        ("Qwen/Qwen3-8B-FP8", "qwen3-8b"),
        ("Qwen/Qwen3-14B", "qwen3-14b"),
        ("Qwen/Qwen3-32B-FP8-Static-PerTensor", "qwen3-32b"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"),
        ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-30b-a3b"),
        ("Qwen/Qwen3-235B-A22B-Thinking-2507", "qwen3-235b-a22b"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder-480b"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "qwen3-coder-480b"),
        ("openai/gpt-oss-20b", "gpt-oss-20b"),
        ("moonshotai/Kimi-K2-Instruct", "kimi-k2"),
        ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2"),
        ("moonshotai/Kimi-K2-Thinking", "kimi-k2"),  # config.json: the K2 shape, 256K context, INT4 weights
        ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3"),
        ("nvidia/DeepSeek-V3.1-NVFP4", "deepseek-v3"),
        ("meta-llama/Meta-Llama-3.1-405B", "llama3.1-405b"),
        ("meta-llama/Llama-3.2-1B-Instruct", "llama3.2-1b"),
        ("meta-llama/Llama-3.2-3B", "llama3.2-3b"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4-scout"),
        ("nvidia/Nemotron-H-56B-Base-8K", "nemotron-h-56b"),
    ],
)
def test_a_repo_id_finds_its_preset(hf_id: str, preset: str) -> None:
    assert preset_for_hf_id(hf_id) == preset
    assert load_model(hf_id).name == preset


@pytest.mark.parametrize("hf_id", ["Qwen/Qwen2.5-72B-Instruct", "meta-llama/Llama-3.1-8"])
def test_a_repo_id_without_a_preset_is_a_one_line_error(hf_id: str) -> None:
    assert preset_for_hf_id(hf_id) is None
    with pytest.raises(SpecError, match=r"no built-in preset has this architecture.*config\.json"):
        load_model(hf_id)


def test_a_missing_file_is_named_as_missing_too() -> None:
    assert preset_for_hf_id("org/") is None
    with pytest.raises(
        SpecError,
        match=r"^unknown model 'models/missing': its config.json is not in the Hugging Face "
        r"cache \(.*\) and no built-in preset has this architecture .*`huggingface-cli download "
        r"models/missing config.json`",
    ):
        load_model("models/missing")
