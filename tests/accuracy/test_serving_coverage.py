"""Coverage of the serving campaigns autopar is scored on: a Hugging Face id of each
added preset runs `autopar serve estimate`, and the benchmark finds a built-in
profile for each system name of the campaign (aiconfigurator's system names)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autopar.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("hf_id", "preset", "args"),
    [
        ("Qwen/Qwen3-0.6B", "qwen3-0.6b", ["--hardware", "h100-sxm", "--gpus", "1", "--tp", "1"]),
        ("Qwen/Qwen3-1.7B", "qwen3-1.7b", ["--hardware", "h200-sxm", "--gpus", "1", "--tp", "1"]),
        ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-4b", ["--hardware", "h100-sxm", "--gpus", "1", "--tp", "1"]),
        ("Qwen/Qwen3-8B", "qwen3-8b", ["--hardware", "h100-sxm", "--gpus", "2", "--tp", "2"]),
        ("Qwen/Qwen3-14B-FP8", "qwen3-14b", ["--hardware", "h200-sxm", "--gpus", "1", "--tp", "1", "--weights", "fp8"]),
        ("meta-llama/Llama-3.2-1B-Instruct", "llama3.2-1b", ["--hardware", "l40s", "--gpus", "1", "--tp", "1"]),
        ("meta-llama/Llama-3.2-3B-Instruct", "llama3.2-3b", ["--hardware", "a100-sxm-80g", "--gpus", "1", "--tp", "1"]),
        ("openai/gpt-oss-20b", "gpt-oss-20b", ["--hardware", "h100-sxm", "--gpus", "1", "--tp", "1"]),
        (
            "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",
            "qwen3-coder-480b",
            ["--hardware", "h200-sxm", "--gpus", "8", "--tp", "8", "--ep", "8", "--weights", "fp8"],
        ),
        (
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
            "llama4-scout",
            ["--hardware", "h100-sxm", "--gpus", "4", "--tp", "4", "--ep", "4", "--weights", "fp8"],
        ),
        ("nvidia/Nemotron-H-56B-Base-8K", "nemotron-h-56b", ["--hardware", "h200-sxm", "--gpus", "2", "--tp", "2"]),
        (
            "moonshotai/Kimi-K2-Instruct-0905",
            "kimi-k2",
            ["--hardware", "b200", "--gpus", "8", "--tp", "1", "--dp", "8", "--attention-dp", "--ep", "8", "--weights", "fp8"],
        ),
    ],
)
def test_serve_estimate_runs_on_a_repo_id_of_each_added_preset(hf_id: str, preset: str, args: list[str]) -> None:
    r = runner.invoke(app, ["serve", "estimate", hf_id, *args, "--concurrency", "16", "--isl", "1024", "--osl", "256", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["model"] == preset and doc["fits"] is True
    assert doc["ttft_ms"] > 0 and doc["tpot_ms"] > 0


@pytest.mark.parametrize("hardware", ["gb200", "h20", "h20-3e", "h100-pcie"])
def test_serve_estimate_runs_on_each_added_profile(hardware: str) -> None:
    r = runner.invoke(
        app,
        [
            "serve",
            "estimate",
            "Qwen/Qwen3-32B",
            "--hardware",
            hardware,
            "--gpus",
            "2",
            "--tp",
            "2",
            "--concurrency",
            "32",
            "--isl",
            "2048",
            "--osl",
            "256",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["hardware"] == hardware and doc["fits"] is True


def test_h20_decodes_faster_than_it_prefills_relative_to_h100() -> None:
    """H20 has 1.19x H100's HBM bandwidth and 15% of its BF16 peak: alone, a request's
    prefill is slower on H20 and its weight-bound decode step faster."""

    def run(hardware: str) -> dict:
        r = runner.invoke(
            app,
            [
                "serve",
                "estimate",
                "Qwen/Qwen3-8B",
                "--hardware",
                hardware,
                "--gpus",
                "1",
                "--tp",
                "1",
                "--concurrency",
                "1",
                "--isl",
                "4096",
                "--osl",
                "64",
                "--json",
            ],
        )
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    h20, h100 = run("h20"), run("h100-sxm")
    assert h20["ttft_ms"] > 3 * h100["ttft_ms"]
    assert h20["tpot_ms"] < h100["tpot_ms"]


def test_the_hardware_list_shows_the_added_profiles() -> None:
    r = runner.invoke(app, ["hardware"])
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.strip()}
    assert rows["gb200"][-1] == "72" and rows["h20"][-1] == "8" and rows["h100-pcie"][-1] == "8"
