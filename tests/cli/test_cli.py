"""The command-line contract: commands, JSON keys, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from autopar.cli import app
from tests.conftest import toy_profile_dict

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

PLAN_KEYS = {
    "step_time_s",
    "tokens_per_s",
    "tokens_per_s_per_gpu",
    "model_tflops_per_gpu",
    "mfu",
    "memory_gib_per_gpu",
    "fits",
    "dp",
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "mbs",
    "recompute",
    "zero",
}

MODEL = """\
name: tiny
layers: 8
hidden_size: 1024
num_attention_heads: 16
num_kv_heads: 4
ffn_hidden_size: 4096
vocab_size: 32000
seq_len: 2048
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(toy_profile_dict()))
    (tmp_path / "tiny.yaml").write_text(MODEL)
    return {"hw": str(tmp_path / "toy.yaml"), "model": str(tmp_path / "tiny.yaml"), "dir": str(tmp_path)}


def run(*args: str) -> tuple[int, str, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_suggest_json_contract(files: dict[str, str]) -> None:
    code, out, _ = run("suggest", files["model"], "--hardware", files["hw"], "--gpus", "16", "--global-batch", "64", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc.keys() >= PLAN_KEYS
    assert doc["plans"][0].keys() >= PLAN_KEYS
    assert doc["gpus"] == 16 and doc["global_batch"] == 64 and doc["hardware"] == "toy"
    assert doc["dp"] * doc["tp"] * doc["pp"] * doc["cp"] == 16
    assert doc["plans"][0]["tokens_per_s"] >= doc["plans"][-1]["tokens_per_s"]
    assert doc["tokens_per_s"] == pytest.approx(doc["tokens_per_s_per_gpu"] * 16)
    assert doc["tokens_per_s"] == pytest.approx(64 * 2048 / doc["step_time_s"])


def test_suggest_table_names_profile_and_recommendation(files: dict[str, str]) -> None:
    code, out, _ = run("suggest", files["model"], "--hardware", files["hw"], "--gpus", "16", "--top", "3")
    assert code == 0
    assert f"--hardware {files['hw']}" in " ".join(out.split())  # prose wraps at 80 columns
    assert "recommended:" in out and "MFU" in out and "tokens/s" in out


def test_estimate_json_breakdowns(files: dict[str, str]) -> None:
    code, out, _ = run(
        "estimate", files["model"], "--hardware", files["hw"], "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "64", "--json"
    )
    assert code == 0
    doc = json.loads(out)
    assert doc.keys() >= PLAN_KEYS
    assert (doc["dp"], doc["tp"], doc["pp"]) == (4, 2, 2)
    assert sum(doc["time_breakdown_s"].values()) == pytest.approx(doc["step_time_s"])
    mem = doc["memory_breakdown_gib"]
    assert mem["total"] == pytest.approx(doc["memory_gib_per_gpu"])
    assert set(mem) >= {"weights", "grads", "optimizer", "activations", "buffers"}


def test_estimate_over_budget_says_what_fits(files: dict[str, str], tmp_path: Path) -> None:
    small = toy_profile_dict()
    small["gpu"]["memory_gib"] = 4
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(small))
    code, out, _ = run(
        "estimate",
        files["model"],
        "--hardware",
        str(tmp_path / "small.yaml"),
        "--gpus",
        "8",
        "--mbs",
        "8",
        "--global-batch",
        "64",
        "--zero",
        "0",
    )
    assert code == 1  # as suggest's "no plan fits" (issue 25: it was 0), with the breakdown still printed
    assert "does not fit" in out and "what would fit" in out and "memory" in out
    code, out, _ = run(
        "estimate",
        files["model"],
        "--hardware",
        str(tmp_path / "small.yaml"),
        "--gpus",
        "8",
        "--mbs",
        "8",
        "--global-batch",
        "64",
        "--zero",
        "0",
        "--json",
    )
    assert code == 1 and json.loads(out)["fits"] is False
    code, out, _ = run("estimate", files["model"], "--hardware", files["hw"], "--gpus", "8", "--global-batch", "64")
    assert code == 0 and "does not fit" not in out


def test_suggest_infeasible_exit_1_with_reason(files: dict[str, str], tmp_path: Path) -> None:
    tiny = toy_profile_dict()
    tiny["gpu"]["memory_gib"] = 1
    (tmp_path / "tiny_hw.yaml").write_text(yaml.safe_dump(tiny))
    code, _, err = run("suggest", files["model"], "--hardware", str(tmp_path / "tiny_hw.yaml"), "--gpus", "8")
    assert code == 1
    assert "no plan fits: the smallest of" in err and "GiB per GPU" in err and "but one Toy GPU has 1.0 GiB" in err


BAD_ARGS = [
    (["--gpus", "12"], "--gpus (12) must be a multiple of the node size (8 GPUs per node)"),
    (["--gpus", "0"], "--gpus must be positive, got 0"),
    (["--gpus", "-8"], "--gpus must be positive, got -8"),
    ([], "give --gpus N or --nodes N"),
    (["--gpus", "16", "--seq-len", "4096"], "exceeds tiny's max_seq_len (2048)"),
    (["--gpus", "16", "--dtype", "fp64"], "--dtype must be one of bf16, fp16"),
]


@pytest.mark.parametrize(("extra", "message"), BAD_ARGS)
def test_bad_job_arguments(files: dict[str, str], extra: list[str], message: str) -> None:
    code, out, err = run("suggest", files["model"], "--hardware", files["hw"], *extra)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_bad_files_exit_2(files: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(MODEL + "layerz: 3\n")
    for args, message in [
        (["suggest", str(tmp_path / "bad.yaml"), "--hardware", files["hw"], "--gpus", "8"], "unknown field (did you mean 'layers'?)"),
        (["suggest", str(tmp_path / "missing.yaml"), "--gpus", "8"], "file not found"),
        (["suggest", files["model"], "--hardware", "h100-sxn", "--gpus", "8"], "unknown hardware 'h100-sxn'"),
        (["estimate", files["model"], "--hardware", files["hw"], "--gpus", "16", "--tp", "3"], "divisible by tp*pp*cp"),
        (
            ["estimate", files["model"], "--hardware", files["hw"], "--gpus", "16", "--tp", "8", "--recompute", "some"],
            "--recompute must be one of none, selective, full",
        ),
    ]:
        code, _, err = run(*args)
        assert code == 2, args
        assert message in err, (args, err)
        assert "Traceback" not in err


def test_saved_profile_is_used_by_default(files: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "profile.yaml").write_text(Path(files["hw"]).read_text())
    monkeypatch.setenv("AUTOPAR_HOME", str(home))
    code, out, _ = run("suggest", files["model"], "--gpus", "8", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["hardware"] == "toy" and "saved by `autopar profile`" in doc["hardware_source"]


def test_no_plan_fits_names_the_profile_it_used(files: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # issue 25: a saved profile (a CPU one, say) silently became the hardware and "no plan fits" did not say so
    home = tmp_path / "home"
    home.mkdir()
    (home / "profile.yaml").write_text(Path(files["hw"]).read_text())
    monkeypatch.setenv("AUTOPAR_HOME", str(home))
    code, _, err = run("suggest", "llama3-70b", "--gpus", "1")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("autopar: error: no plan fits: ")
    assert err.rstrip().endswith(f"; hardware: profile saved by `autopar profile` ({home / 'profile.yaml'})")
    code, _, err = run("suggest", "llama3-70b", "--gpus", "1", "--hardware", "h100-sxm")
    assert code == 1 and err.rstrip().endswith("; hardware: --hardware h100-sxm")


@pytest.mark.parametrize(
    "args",
    [
        ["suggest", "llama3-8b", "--gpus", "8"],
        ["suggest", "llama3-8b", "--gpus", "8", "--json"],
        ["estimate", "llama3-8b", "--gpus", "8", "--tp", "2"],
        ["models"],
    ],
)
def test_a_reader_that_stops_early_gets_no_error_line(args: list[str]) -> None:
    # issue 25: `| head` printed "autopar: error: the output was closed early (broken pipe)" and exited 3
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    cmd = f"{shlex.quote(sys.executable)} -m autopar {shlex.join(args)} | head -n 1; exit ${{PIPESTATUS[0]}}"
    res = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (res.returncode, res.stderr) == (0, "") and res.stdout.count("\n") == 1


def test_suggest_and_estimate_never_import_torch(files: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from autopar.cli import app\n"
        f"r = CliRunner().invoke(app, ['suggest', {files['model']!r}, '--hardware', {files['hw']!r}, '--gpus', '8'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"r = CliRunner().invoke(app, ['estimate', {files['model']!r}, '--hardware', {files['hw']!r}, '--gpus', '8'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('torch' in sys.modules, 'autopar.probe' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["estimate", "mixtral-8x7b", "--hardware", "h100-sxm", "--gpus", "24", "--ep", "3"],
            "moe.num_experts (8) must be divisible by ep (3)",
        ),
        (["estimate", "mixtral-8x7b", "--hardware", "h100-sxm", "--gpus", "8", "--tp", "2", "--etp", "4"], "etp (4) must be 1 or tp (2)"),
        (
            ["estimate", "mamba2-2.7b", "--hardware", "h100-sxm", "--gpus", "8", "--tp", "2"],
            "Mamba heads (80) and groups (1) must be divisible by tp (2)",
        ),
        (["estimate", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--ep", "2"], "ep (2) needs an MoE model"),
    ],
)
def test_bad_family_plans_exit_2(args: list[str], message: str) -> None:
    code, out, err = run(*args)
    assert code == 2 and message in err and out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["suggest", "llama3-8b", "--gpus", "8", "--top", "0"], "Invalid value for '--top': must be at least 1, got 0"),
        (["suggest", "llama3-8b", "--gpus", "8", "--top", "many"], "Invalid value for '--top': expected a whole number, got 'many'"),
        (["serve", "suggest", "llama3-8b", "--gpus", "auto"], "Invalid value for '--gpus': expected a whole number, got 'auto'"),
    ],
)
def test_option_values_are_refused_in_our_words(args: list[str], message: str) -> None:
    # issue 25: Typer's pydantic coercion printed "Input should be greater than or equal to 1"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-m", "autopar", *args], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    assert res.stderr.startswith(f"autopar: error: {message} (see `autopar ") and "Input should" not in res.stderr


@pytest.mark.parametrize("args", [[], ["serve"]])
def test_a_command_without_arguments_prints_its_help_once_and_nothing_on_stderr(args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-m", "autopar", *args], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and res.stderr == ""  # an empty line there before
    assert res.stdout.count("Usage: autopar") == 1 and "Commands" in res.stdout


def test_counts_of_one_are_singular() -> None:
    # issue 25: "top 1 layouts by tokens/s", "launch: Megatron-LM torchrun command (1 node, 1 GPUs)"
    out = runner.invoke(app, ["suggest", "llama3.2-1b", "--hardware", "h100-sxm", "--gpus", "1", "--top", "1", "--emit", "megatron"]).stdout
    assert "the best layout by tokens/s" in out and "(its best variant; --json keeps the variants):" in out
    assert "(1 node, 1 GPU)" in out and "1 GPUs" not in out and "top 1 layouts" not in out
    out = runner.invoke(app, ["suggest", "llama3.2-1b", "--hardware", "h100-sxm", "--gpus", "2", "--top", "2"]).stdout
    assert "top 2 layouts by tokens/s" in out and "(the best variant of each; --json keeps the variants):" in out


def test_the_plan_notation_is_explained_where_it_is_used() -> None:
    # issue 25: "+sp", "cp2(ag)", "adp" were never explained
    from autopar.render.labels import legend

    assert legend(["dp4 tp2+sp pp1", "dp1 tp1 pp1 cp8(ag)"]) == (
        "+sp: sequence parallelism with tp; cpN(ag): context parallelism that all-gathers K/V (cpN: a ring exchange)"
    )
    assert legend(["dp8 tp1 pp1"]) is None
    out = runner.invoke(app, ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "16", "--top", "3"]).stdout
    assert "\n+sp: sequence parallelism with tp\nrecommended: " in out and "cpN(ag)" not in out  # only what is shown


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command under `cmd` (typer vendors its own click: the groups are read by their methods)."""
    out: list[tuple[tuple[str, ...], Any]] = [(path, cmd)]
    if hasattr(cmd, "list_commands"):
        ctx = typer.Context(cmd)
        for name in cmd.list_commands(ctx):
            out += _commands(cmd.get_command(ctx, name), (*path, name))
    return out


def test_no_option_help_is_eaten_as_markup() -> None:
    """Typer renders help with rich markup: '[ratio x osl, osl]' reads as a tag and vanishes from --help
    ('drawn from , as'). Every option's help must survive rich's markup parser word for word."""
    from rich.text import Text

    commands = _commands(typer.main.get_command(app))
    assert ("serve", "estimate") in [path for path, _ in commands]
    eaten = [
        f"{' '.join(path)} {param.opts[0]}"
        for path, cmd in commands
        for param in getattr(cmd, "params", [])
        if getattr(param, "help", None) and Text.from_markup(param.help).plain != param.help
    ]
    assert eaten == []
