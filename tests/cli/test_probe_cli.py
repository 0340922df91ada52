"""`autopar profile` for real, as a user runs it: gloo processes on CPU, a profile
that `suggest` then reads, one-line errors without torch or without a GPU, and a
dead or hung rank that ends the run instead of hanging it."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from autopar.io.profiles import load_hardware
from autopar.spec.hardware import COLLECTIVES
from tests.conftest import toy_profile_dict

ROOT = Path(__file__).resolve().parents[2]
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")

QUICK_CPU = ("profile", "--device", "cpu", "--nproc", "2", "--quick")
TINY_MODEL = """\
name: tiny
layers: 4
hidden_size: 512
num_attention_heads: 8
ffn_hidden_size: 2048
ffn_activation: swiglu
vocab_size: 32000
seq_len: 1024
"""


def autopar(*args: str, tmp_path: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPAR_PROBE_")}
    full_env = {**inherited, "AUTOPAR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT), "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "autopar", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str], float]:
    """One quick 2-process gloo run shared by the tests below (it takes ~15 s)."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed")
    tmp = tmp_path_factory.mktemp("cpu_run")
    reference = tmp / "reference.yaml"
    reference.write_text(yaml.safe_dump(toy_profile_dict(name="toy-ref")))
    out = tmp / "measured" / "cpu-2proc.yaml"
    start = time.monotonic()
    proc = autopar("profile", "--device", "cpu", "--nproc", "2", "--quick", "--out", str(out), "--compare", str(reference), tmp_path=tmp)
    return out, proc, time.monotonic() - start


@needs_torch
def test_quick_cpu_profile_loads_with_fitted_curves(cpu_run: tuple[Path, subprocess.CompletedProcess[str], float]) -> None:
    out, proc, seconds = cpu_run
    assert proc.returncode == 0, proc.stderr
    assert seconds < 90, f"quick CPU profile took {seconds:.0f} s"
    hw = load_hardware(str(out))
    assert hw.source == "measured" and hw.name == "cpu-2proc" and hw.gpus_per_node == 2
    assert hw.peak("bf16") > 0 and hw.hbm_bytes_per_s > 0 and hw.memory_bytes > 0
    assert len(hw.gemm_eff["bf16"].xs) >= 3 and len(hw.attn_eff["bf16"].xs) >= 3
    assert all(0 < y <= 1 for y in hw.gemm_eff["bf16"].ys + hw.attn_eff["bf16"].ys)
    for tier in (hw.intra, hw.inter):
        for coll in COLLECTIVES:
            fit = tier[coll][0]
            assert fit.group_size == 2 and fit.latency_s > 0 and fit.bw_bytes_per_s > 0
    assert hw.compute_slowdown >= 1 and hw.comm_slowdown >= 1
    for key in ("date", "hostname", "gpu_name", "torch", "tool_version", "world_size", "quick"):
        assert hw.provenance[key], key
    assert hw.provenance["world_size"] == "2" and hw.provenance["quick"] == "true"
    raw = yaml.safe_load(out.read_text())["raw"]
    points = raw["collectives"]["intra"]["all_reduce"][2]
    assert len(points) >= 4 and all(b > 0 and t > 0 for b, t, _ in points)


@needs_torch
def test_quick_cpu_profile_prints_summary_and_comparison(cpu_run: tuple[Path, subprocess.CompletedProcess[str], float]) -> None:
    out, proc, _ = cpu_run
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in " ".join(proc.stdout.split())
    assert "toy-ref" in proc.stdout and "ratio" in proc.stdout and "all_reduce intra n=2" in proc.stdout


@needs_torch
def test_suggest_reads_the_measured_profile(cpu_run: tuple[Path, subprocess.CompletedProcess[str], float], tmp_path: Path) -> None:
    out, proc, _ = cpu_run
    assert proc.returncode == 0, proc.stderr
    model = tmp_path / "tiny.yaml"
    model.write_text(TINY_MODEL)
    args = ("suggest", str(model), "--hardware", str(out), "--gpus", "2", "--global-batch", "8", "--json")
    res = autopar(*args, tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert '"tokens_per_s"' in res.stdout


@needs_torch
@pytest.mark.skipif(HAS_TORCH and __import__("torch").cuda.is_available(), reason="a GPU is visible")
def test_a_cpu_profile_never_becomes_the_default(tmp_path: Path) -> None:
    # issue 25: `profile --quick` without a GPU saved the CPU as every later suggest's hardware
    res = autopar("profile", "--quick", "--nproc", "2", tmp_path=tmp_path)  # --device auto: cpu here
    assert res.returncode == 0, res.stderr
    home = tmp_path / "home"
    assert not (home / "profile.yaml").exists()
    cpu = home / "profile-cpu.yaml"
    assert load_hardware(str(cpu)).name.endswith("-cpu")
    assert f"pass--hardware{cpu}touseit" in "".join(res.stdout.split())  # rich wraps the long path anywhere
    res = autopar("suggest", "llama3-8b", "--gpus", "8", "--json", "--top", "1", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert '"hardware": "h100-sxm"' in res.stdout


@needs_torch
def test_dead_rank_ends_the_run_and_keeps_the_earlier_profile(tmp_path: Path) -> None:
    out = tmp_path / "profile.yaml"
    out.write_text("earlier: profile\n")
    start = time.monotonic()
    res = autopar(*QUICK_CPU, "--out", str(out), tmp_path=tmp_path, env={"AUTOPAR_PROBE_FAULT": "exit:1"})
    assert res.returncode == 2
    assert "rank 1 exited with status 1" in res.stderr and "Traceback" not in res.stderr
    assert time.monotonic() - start < 60
    assert out.read_text() == "earlier: profile\n" and not [f for f in os.listdir(tmp_path) if f.startswith(".")]


@needs_torch
def test_hung_rank_ends_the_run_within_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    env = {"AUTOPAR_PROBE_FAULT": "hang:1", "AUTOPAR_PROBE_TIMEOUT_S": "5"}
    res = autopar("profile", "--device", "cpu", "--nproc", "2", "--quick", "--out", str(tmp_path / "p.yaml"), tmp_path=tmp_path, env=env)
    assert res.returncode == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("autopar: error: rank ") and ("timeout" in last or "no progress" in last)
    assert time.monotonic() - start < 60
    assert not (tmp_path / "p.yaml").exists()


@needs_torch
def test_single_process_profile_names_its_fallbacks(tmp_path: Path) -> None:
    out = tmp_path / "one.yaml"
    res = autopar("profile", "--device", "cpu", "--nproc", "1", "--quick", "--out", str(out), tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    hw = load_hardware(str(out))
    assert "not measured (one process)" in hw.provenance["collectives"] and hw.gpus_per_node == 1


def test_without_torch_one_line_error_with_the_fix(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None; "  # `import torch` now raises ImportError
        "sys.argv = ['autopar', 'profile', '--device', 'cpu']; from autopar.cli import main; main()"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOPAR_HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0
    assert "needs PyTorch" in res.stderr and "pip install torch==2.13.0" in res.stderr and "autopar[profile]" in res.stderr


@pytest.mark.parametrize(
    "args",
    [["calibrate", "llama3.1-8b", "--plan", "dp1", "--device", "cpu"], ["calibrate", "llama3.1-8b", "--top", "1", "--device", "cpu"]],
)
def test_calibrate_without_torch_names_calibrate(tmp_path: Path, args: list[str]) -> None:
    # issue 25: calibrate said "autopar profile needs PyTorch"
    code = f"import sys; sys.modules['torch'] = None; sys.argv = ['autopar', *{args!r}]; from autopar.cli import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOPAR_HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert res.stderr.startswith("autopar: error: autopar calibrate needs PyTorch, which is not installed")


@needs_torch
@pytest.mark.skipif(HAS_TORCH and __import__("torch").cuda.is_available(), reason="a GPU is visible")
def test_device_cuda_without_a_gpu(tmp_path: Path) -> None:
    res = autopar("profile", "--device", "cuda", "--quick", "--out", str(tmp_path / "p.yaml"), tmp_path=tmp_path)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "--device cuda: no CUDA GPU is visible" in res.stderr and "--device cpu" in res.stderr


def test_unknown_compare_profile_fails_before_measuring(tmp_path: Path) -> None:
    res = autopar("profile", "--device", "cpu", "--compare", "no-such-gpu", "--out", str(tmp_path / "p.yaml"), tmp_path=tmp_path)
    assert res.returncode == 2 and "unknown hardware 'no-such-gpu'" in res.stderr


@pytest.mark.skipif(not HAS_TORCH or not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_quick_cuda_profile(tmp_path: Path) -> None:
    out = tmp_path / "gpu.yaml"
    res = autopar("profile", "--device", "cuda", "--quick", "--out", str(out), tmp_path=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr
    hw = load_hardware(str(out))
    assert hw.peak("bf16") > 1e13 and hw.memory_efficiency > 0.3


def test_only_probe_imports_torch_or_probe_at_module_level() -> None:
    """`suggest` must never pay for torch: no module outside autopar/probe and autopar/calibrate
    imports it at top level (calibrate's torch-free modules: test_calibrate_formulas.py)."""
    offenders = []
    for path in (ROOT / "autopar").rglob("*.py"):
        if {"probe", "calibrate"} & set(path.relative_to(ROOT / "autopar").parts):
            continue
        for node in ast.parse(path.read_text()).body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "torch" or n.startswith("autopar.probe")]
    assert offenders == []
