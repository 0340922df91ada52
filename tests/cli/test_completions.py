"""Shell completion: the scripts in completions/ are current, load in a real bash and complete there,
the callbacks list presets, profiles and files, and Typer's --install-completion still works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autopar import completions
from autopar.io.models import preset_names
from autopar.io.profiles import builtin_names

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "completions"
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def autopar(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autopar", *args], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, timeout=60
    )


def test_completion_scripts_are_current() -> None:
    assert completions.stale(SCRIPTS) == [], "completions/ is stale: run `python -m autopar.completions` and commit"


@pytest.mark.parametrize(("shell", "name"), list(completions.SCRIPTS.items()))
def test_scripts_are_what_show_completion_prints(shell: str, name: str) -> None:
    r = autopar("--show-completion", shell, env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == (SCRIPTS / name).read_text()


def test_check_mode_reports_stale_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert completions.main([str(tmp_path)]) == 0
    assert sorted(os.listdir(tmp_path)) == sorted(completions.SCRIPTS.values())
    assert completions.main(["--check", str(tmp_path)]) == 0
    (tmp_path / "_autopar").write_text("#compdef autopar\n")
    assert completions.main(["--check", str(tmp_path)]) == 1
    assert "stale completion scripts" in capsys.readouterr().err and "_autopar" in completions.stale(tmp_path)


@needs_bash
def test_bash_script_loads_in_a_real_bash() -> None:
    r = subprocess.run(
        ["bash", "-c", "source completions/autopar.bash; complete -p autopar"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert r.stdout.strip() == "complete -o default -F _autopar_completion autopar"


@needs_bash
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("autopar suggest llama3", [n for n in preset_names() if n.startswith("llama3")]),
        ("autopar estimate llama3-8b --hardware h", [n for n in builtin_names() if n.startswith("h")]),
        ("autopar suggest llama3-8b --emit slurm", ["slurm", "slurm-torchtitan"]),
        ("autopar sugg", ["suggest"]),
        # issue 25: these completed nothing
        ("autopar serve suggest llama3-8b --emit s", ["sglang"]),
        ("autopar serve estimate llama3-8b --framework t", ["trtllm"]),
        ("autopar serve suggest llama3-8b --weights f", ["fp8", "fp4"]),
        ("autopar estimate llama3-8b --recompute s", ["selective"]),
        ("autopar schema h", ["hardware"]),
    ],
)
def test_bash_completes_through_the_installed_command(tmp_path: Path, line: str, expected: list[str]) -> None:
    shim = tmp_path / "autopar"  # what `pip install` puts on PATH
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m autopar "$@"\n')
    shim.chmod(0o755)
    words = line.split()
    script = (
        f"source {SCRIPTS / 'autopar.bash'}\nCOMP_WORDS=({' '.join(words)})\nCOMP_CWORD={len(words) - 1}\n"
        "_autopar_completion autopar\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    r = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == expected


def test_model_completion_lists_presets_then_spec_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.yaml").write_text("")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / ".hidden.yaml").write_text("")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "big.yml").write_text("")
    monkeypatch.chdir(tmp_path)
    got = completions.complete_model("")
    assert got[: len(preset_names())] == [(n, "preset") for n in preset_names()]
    assert got[len(preset_names()) :] == [("config.json", "file"), ("mine.yaml", "file"), ("models/", "folder")]
    assert completions.complete_model("mi") == [(n, "preset") for n in preset_names() if n.startswith("mi")] + [("mine.yaml", "file")]
    assert completions.complete_model("models/") == [("models/big.yml", "file")]
    assert completions.complete_model(str(tmp_path / "m")) == [
        (str(tmp_path / "mine.yaml"), "file"),
        (str(tmp_path / "models") + "/", "folder"),
    ]
    assert completions.complete_model("nowhere/x") == []


def test_hardware_and_emit_completion() -> None:
    assert [n for n, _ in completions.complete_hardware("")][: len(builtin_names())] == builtin_names()
    assert completions.complete_hardware("h100-s") == [("h100-sxm", "built-in profile")]
    assert [n for n, _ in completions.complete_emit("")] == [
        "megatron",
        "torchtitan",
        "slurm",
        "slurm-torchtitan",
        "deepspeed",
        "megatron-bridge",
    ]
    assert completions.complete_emit("t") == [("torchtitan", "torchrun, torchtitan")]


def test_install_completion_still_works(tmp_path: Path) -> None:
    r = autopar("--install-completion", "bash", env={"HOME": str(tmp_path), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert r.returncode == 0, r.stderr
    installed = tmp_path / ".bash_completions" / "autopar.sh"
    assert installed.read_text() + "\n" == (SCRIPTS / "autopar.bash").read_text()
    assert f"source '{installed}'" in (tmp_path / ".bashrc").read_text()


def test_help_lists_the_new_options() -> None:
    from typer.testing import CliRunner

    from autopar.cli import app

    runner = CliRunner()
    suggest = runner.invoke(app, ["suggest", "--help"], env={"COLUMNS": "200"}).stdout
    for option in ("--emit", "--emit-out", "--torchtitan-config", "--plot"):
        assert option in suggest
    estimate = runner.invoke(app, ["estimate", "--help"], env={"COLUMNS": "200"}).stdout
    for option in ("--explain", "--no-explain", "--emit", "--emit-out", "--torchtitan-config"):
        assert option in estimate
