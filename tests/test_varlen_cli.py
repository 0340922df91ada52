"""--seq-len-dist: the cost model's per-sequence cost, the CLI contract, bad distribution files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import llama70b
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.compute import Shape, layer_time
from autopar.cost.sequence import ModelSeqCost
from autopar.spec.hardware import HardwareProfile
from autopar.spec.plan import Plan

runner = CliRunner()
LONG = str(Path(__file__).resolve().parent.parent / "examples" / "seqlen" / "long_context.yaml")


def test_seqcost_on_grid_is_the_layer_model(toy_hw: HardwareProfile) -> None:
    m = llama70b()
    plan = Plan(dp=2, tp=8, pp=4, cp=2)
    cost = ModelSeqCost.from_model(m, toy_hw, plan, dtype="bf16", max_len=16384, max_cp=4)
    assert cost.cps == (1, 2, 4)
    stage = 20 * layer_time(m, toy_hw, Shape(dtype="bf16", seq_len=4096, mbs=1), Plan(dp=2, tp=8, pp=4, cp=2), "dense").total
    assert cost.time(np.array([4096]), 2)[0] == pytest.approx(stage, rel=1e-9)
    # attention makes long sequences super-linear; CP splits the work
    t = cost.time(np.array([2048, 4096, 8192, 16384]), 1)
    ratios = t[1:] / t[:-1]
    assert all(2.0 < r < 4.0 for r in ratios)
    assert ratios[-1] > ratios[0]
    assert cost.time(np.array([16384]), 4)[0] < cost.time(np.array([16384]), 1)[0]
    with pytest.raises(ValueError, match="not on the grid"):
        cost.time(np.array([4096]), 8)


def test_suggest_with_distribution_json_contract() -> None:
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "16", "--seq-len-dist", LONG,
                            "--global-batch", "128", "--varlen-strategy", "flexible", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["strategy"] == "flexible" and doc["sequences_per_step"] == 128
    assert {"dp", "tp", "pp", "cp", "step_time_s", "tokens_per_s", "mfu", "fits", "memory_gib_per_gpu"} <= doc.keys()
    best = doc["plans"][0]["strategies"]
    assert set(best) == {"naive", "balanced", "dynamic_cp", "flexible"}
    assert doc["tokens_per_s"] == pytest.approx(best["flexible"]["tokens_per_s"])
    # balancing never loses to naive packing, and the pool never loses to balanced packing
    assert best["balanced"]["tokens_per_s"] >= best["naive"]["tokens_per_s"] * 0.999
    assert best["flexible"]["tokens_per_s"] >= best["balanced"]["tokens_per_s"] * 0.999
    steps = [p["strategies"]["flexible"]["step_time_mean_s"] for p in doc["plans"]]
    assert steps == sorted(steps)


def test_distribution_changes_the_recommended_layout() -> None:
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "64", "--seq-len-dist", LONG])
    assert r.exit_code == 0, r.output
    assert "the length distribution picks a different layout" in r.stdout


def test_estimate_with_distribution_draws_rank_loads() -> None:
    r = runner.invoke(app, ["estimate", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "16", "--tp", "2", "--cp", "8",
                            "--seq-len-dist", LONG, "--global-batch", "64", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    loads = doc["rank_loads_s"]
    assert set(loads) == {"naive", "balanced", "dynamic_cp", "flexible"}
    assert len(loads["naive"]) == 1  # one DP replica (16 / (2*8)) of cp 8
    assert len(loads["flexible"]) == 8  # the pool: every GPU of the DP x CP group
    text = runner.invoke(app, ["estimate", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "16", "--tp", "2", "--cp", "8",
                               "--seq-len-dist", LONG, "--global-batch", "64"])
    assert "per-rank load in one sampled step" in text.stdout and "max/mean" in text.stdout


@pytest.mark.parametrize(("content", "message"), [
    ("", "file is empty"),
    ("100\n-5\n", "lengths.txt:2: lengths must be positive, got -5"),
    ("100\n0\n", "lengths.txt:2: lengths must be positive, got 0"),
    ("100\nabc\n", "lengths.txt:2: expected a positive integer length, got 'abc'"),
    ("100\n200000\n", "exceeds llama3.1-8b's max_seq_len (131072)"),
])
def test_bad_distribution_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "lengths.txt"
    path.write_text(content)
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "8", "--seq-len-dist", str(path)])
    assert r.exit_code == 2
    assert message in r.stderr and str(path) in r.stderr
    assert r.stderr.count("\n") == 1 and r.stdout == ""


def test_unknown_strategy() -> None:
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "8", "--seq-len-dist", LONG,
                            "--varlen-strategy", "magic"])
    assert r.exit_code == 2 and "--varlen-strategy must be one of naive, balanced, dynamic_cp, flexible" in r.stderr


@pytest.mark.parametrize(("extra", "message"), [
    (["--seq-len", "4096"], "give --seq-len or --seq-len-dist, not both"),
    (["--plot", "x.svg"], "--plot charts fixed-length plans; it cannot be combined with --seq-len-dist"),
])
def test_options_that_do_not_combine(extra: list[str], message: str) -> None:
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "8", "--seq-len-dist", LONG, *extra])
    assert r.exit_code == 2 and message in r.stderr
