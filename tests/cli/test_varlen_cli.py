"""--seq-len-dist: the cost model's per-sequence cost, the CLI contract, bad distribution files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.comm import Group, collective_time
from autopar.cost.compute import layer_time
from autopar.cost.sequence import ModelSeqCost
from autopar.cost.shape import Shape
from autopar.errors import SpecError
from autopar.io.profiles import load_hardware
from autopar.spec.plan import Plan
from autopar.varlen import STRATEGIES
from tests.conftest import llama70b

runner = CliRunner()
LONG = str(Path(__file__).resolve().parents[2] / "examples" / "seqlen" / "long_context.yaml")


def test_seqcost_is_the_layer_model_for_one_sequence() -> None:
    """A sequence alone in its CP group costs what the layer model says (20 of 80 layers per stage)."""
    m = llama70b()
    hw = load_hardware("h100-sxm")
    cost = ModelSeqCost.from_model(m, hw, Plan(dp=2, tp=8, pp=4, cp=2), dtype="bf16")
    # 8,192 tokens per rank: the linear rate's own reference; 4,096: GEMMs priced at a full micro-batch's
    # efficiency (packing gives short documents the whole micro-batch's GEMM shapes), 1.5% cheaper
    for length, cp, rel in ((8192, 1, 0.001), (16384, 2, 0.001), (65536, 4, 0.005), (131072, 16, 0.005), (4096, 1, 0.02)):
        stage = 20 * layer_time(m, hw, Shape(dtype="bf16", seq_len=length, mbs=1), Plan(dp=2, tp=8, pp=4, cp=cp), "dense").total
        assert cost.time(np.array([length]), cp)[0] == pytest.approx(stage, rel=rel), (length, cp)
    # attention is quadratic per document; the linear part is exactly linear
    a = cost.attention(np.array([16384, 32768]), 1)
    assert 3.9 < a[1] / a[0] < 4.1
    assert cost.linear(np.array([3000]), 2)[0] == pytest.approx(1.5 * cost.linear(np.array([1000]), 1)[0])
    # many integer lengths are read from a table of every length: the same numbers as one by one
    lengths = np.random.default_rng(0).integers(0, 20000, size=(4, 5000))
    for cp in (1, 4):
        table = cost.attention(lengths, cp)
        assert np.array_equal(table, cost.attention(lengths.astype(np.float64), cp))
        assert table[0, 7] == cost.attention(np.array([lengths[0, 7]]), cp)[0]


def test_packed_exchange_is_one_ring_of_the_micro_batch() -> None:
    """The ring of a packed micro-batch: (c - 1) send/recv steps of its K/V chunk, forward, twice backward."""
    m = llama70b()
    hw = load_hardware("h100-sxm")
    cost = ModelSeqCost.from_model(m, hw, Plan(dp=1, tp=8, pp=4, cp=4), dtype="bf16")
    kv = 2 * 2 * 8 * 128 / 8  # K and V, bf16, 8 KV heads of 128 over tp 8: 512 bytes per token per rank
    pair = Group(size=2, per_node=1)  # cp 4 x tp 8 spans nodes
    step = collective_time(hw, "send_recv", kv * 131072 / 4, pair)
    ring = 3 * step
    assert cost.exposed(np.array([131072]), 4, np.array([0.0]))[0] == pytest.approx(
        20 * (3 * ring + 0.0), rel=1e-3
    )  # nothing to hide behind: forward ring + 2x backward, 20 layers


def test_suggest_with_distribution_json_contract() -> None:
    r = runner.invoke(
        app,
        [
            "suggest",
            "llama3.1-8b",
            "--hardware",
            "h100-sxm",
            "--gpus",
            "16",
            "--seq-len-dist",
            LONG,
            "--global-batch",
            "128",
            "--varlen-strategy",
            "hdp",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["strategy"] == "hdp" and doc["sequences_per_step"] == 128
    assert {"dp", "tp", "pp", "cp", "step_time_s", "tokens_per_s", "mfu", "fits", "memory_gib_per_gpu"} <= doc.keys()
    best = doc["plans"][0]["strategies"]
    assert set(best) == set(STRATEGIES)
    assert doc["tokens_per_s"] == pytest.approx(best["hdp"]["tokens_per_s"])
    assert doc["mfu"] == pytest.approx(best["hdp"]["mfu"]) and 0.0 < doc["mfu"] < 1.0
    assert doc["speedup_over_naive"] == pytest.approx(best["hdp"]["tokens_per_s"] / best["naive"]["tokens_per_s"])
    for r in best.values():
        assert {
            "tokens_per_s",
            "mfu",
            "imbalance",
            "step_time_p50_s",
            "step_time_p90_s",
            "step_time_p99_s",
            "token_room",
            "models",
            "launchable",
        } <= r.keys()
        assert r["step_time_p50_s"] <= r["step_time_p90_s"] <= r["step_time_p99_s"]
    # balancing never loses to naive packing
    assert best["balanced"]["tokens_per_s"] >= best["naive"]["tokens_per_s"] * 0.999
    steps = [p["strategies"]["hdp"]["step_time_mean_s"] for p in doc["plans"]]
    assert steps == sorted(steps)


def test_distribution_changes_the_recommended_layout() -> None:
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "64", "--seq-len-dist", LONG])
    assert r.exit_code == 0, r.output
    assert "the length distribution picks a different layout" in " ".join(r.stdout.split())


@pytest.mark.parametrize("strategy", ["wlb", "hdp_no_balance"])
def test_estimate_reports_the_strategy_asked_for(strategy: str) -> None:
    r = runner.invoke(
        app,
        [
            "estimate",
            "llama3.1-8b",
            "--hardware",
            "h100-sxm",
            "--gpus",
            "16",
            "--tp",
            "2",
            "--cp",
            "8",
            "--seq-len-dist",
            LONG,
            "--global-batch",
            "64",
            "--varlen-strategy",
            strategy,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["strategy"] == strategy
    assert doc["tokens_per_s"] == pytest.approx(doc["strategies"][strategy]["tokens_per_s"])
    assert doc["step_time_s"] == pytest.approx(doc["strategies"][strategy]["step_time_mean_s"])
    loads = doc["rank_loads_s"]
    assert set(loads) == set(STRATEGIES)
    assert len(loads["naive"]) == 1  # one DP replica (16 / (2*8)) of cp 8
    assert len(loads["hdp"]) == 8  # the pool: every GPU of the DP x CP group
    text = runner.invoke(
        app,
        [
            "estimate",
            "llama3.1-8b",
            "--hardware",
            "h100-sxm",
            "--gpus",
            "16",
            "--tp",
            "2",
            "--cp",
            "8",
            "--seq-len-dist",
            LONG,
            "--global-batch",
            "64",
        ],
    )
    assert "per-rank load in one sampled step" in text.stdout and "Megatron DCP *" in text.stdout
    # the header suggest prints: model, GPUs, hardware and why (issue 25: estimate began at "stack:")
    assert text.stdout.startswith("llama3.1-8b on 16 x NVIDIA H100 80GB HBM3; hardware: h100-sxm — --hardware")
    assert all(len(line) <= 80 for line in text.stdout.splitlines() if line[:1] in "┏┃┡│└")  # the table


def test_estimate_packs_a_small_batch_for_the_plans_dp_and_says_whether_it_fits(tmp_path: Path) -> None:
    """16 sequences of about 840 tokens pack into 4 windows of 4,096: the fixed plan (dp 8) runs the packed
    batch rounded up to its dp x mbs, 8, not an error about a batch of 4 the user never gave."""
    lengths = tmp_path / "l.txt"
    lengths.write_text("100\n200\n3000\n50\n")
    base = ["estimate", "llama3.1-8b", "--hardware", "h100-sxm", "--seq-len-dist", str(lengths), "--global-batch"]
    r = runner.invoke(app, [*base, "16", "--gpus", "8", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert (doc["global_batch"], doc["sequences_per_step"], doc["dp"]) == (8, 16, 8)
    r = runner.invoke(app, [*base, "4", "--gpus", "4"])  # 8B on 4 GPUs at ZeRO-1: over the 80 GB
    assert r.exit_code == 1 and "does not fit: " in r.stdout and "--zero 3 -> " in r.stdout
    assert "fits in memory: " in runner.invoke(app, [*base, "16", "--gpus", "8"]).stdout


def test_emit_megatron_carries_hybrid_cp_or_says_it_cannot() -> None:
    base = [
        "estimate",
        "llama3.1-8b",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "16",
        "--tp",
        "2",
        "--cp",
        "8",
        "--seq-len-dist",
        LONG,
        "--global-batch",
        "64",
        "--emit",
        "megatron",
        "--json",
    ]
    doc = json.loads(runner.invoke(app, base).stdout)  # megatron_dynamic_cp, pp 1: launchable
    assert "--hybrid-context-parallel" in doc["launch"]
    assert "--max-seqlen-per-dp-cp-rank 16384" in doc["launch"]  # 131,072-token window / cp 8
    assert "--calculate-per-token-loss" in doc["launch"] and "--dataloader-type single" in doc["launch"]
    piped = json.loads(runner.invoke(app, [*base[:-3], "--pp", "2", "--cp", "4", "--emit", "megatron", "--json"]).stdout)
    assert "--hybrid-context-parallel" not in piped["launch"]
    assert "not launchable here" in piped["launch_note"] and "pipeline parallelism (pp = 2)" in piped["launch_note"]
    # torchtitan's own CP all-gathers K/V and it shards with FSDP2 (--emit torchtitan costs as its stack)
    titan = json.loads(
        runner.invoke(
            app, [*base[:-3], "--cp-comm", "allgather", "--zero", "3", "--emit", "torchtitan", "--torchtitan-config", "llama3_8b", "--json"]
        ).stdout
    )
    assert titan["launch_note"] == ("megatron_dynamic_cp is not launchable with torchtitan: the command runs the fixed plan (as naive)")
    hdp = json.loads(runner.invoke(app, [*base, "--varlen-strategy", "hdp"]).stdout)
    assert "--hybrid-context-parallel" not in hdp["launch"]
    assert hdp["launch_note"].startswith("hdp is not launchable with Megatron-LM as pinned")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("lengths.txt", "", "file is empty"),
        ("lengths.txt", "100\n-5\n", "lengths.txt:2: lengths must be positive, got -5"),
        ("lengths.txt", "100\n0\n", "lengths.txt:2: lengths must be positive, got 0"),
        ("lengths.txt", "100\nabc\n", "lengths.txt:2: expected a positive integer length, got 'abc'"),
        ("lengths.txt", "100\n200000\n", "exceeds llama3.1-8b's max_seq_len (131072)"),
        (
            "dist.yaml",
            "lognormal: {median: 1e3, sigma: 1, max: 4096}\n",
            "lognormal.median: expected a number, got '1e3' (YAML reads an exponent without a dot as text: write 1.0e+03)",
        ),
        ("dist.yaml", "lognormal: {median: 10, sigma: 1, min: 100, max: 10}\n", "lognormal.min (100) must not exceed max (10)"),
        ("dist.yaml", "null\n", "expected a mapping of fields at the top level, got nothing (null)"),
    ],
)
def test_bad_distribution_files(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "8", "--seq-len-dist", str(path)])
    assert r.exit_code == 2
    assert message in r.stderr and r.stderr.startswith(f"autopar: error: {path}")
    assert r.stderr.count("\n") == 1 and r.stdout == ""


def test_unknown_strategy() -> None:
    r = runner.invoke(
        app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "8", "--seq-len-dist", LONG, "--varlen-strategy", "magic"]
    )
    assert r.exit_code == 2 and "--varlen-strategy must be one of " + ", ".join(STRATEGIES) in r.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seq-len", "4096"], "give --seq-len or --seq-len-dist, not both"),
        (["--plot", "x.svg"], "--plot charts fixed-length plans; it cannot be combined with --seq-len-dist"),
        (["--save-dir", "out"], "--save-dir saves fixed-length plans; it cannot be combined with --seq-len-dist"),
    ],
)
def test_options_that_do_not_combine(extra: list[str], message: str) -> None:
    r = runner.invoke(app, ["suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "8", "--seq-len-dist", LONG, *extra])
    assert r.exit_code == 2 and message in r.stderr


def test_allgather_plans_gather_the_micro_batch_and_pipelines_pay_p2p() -> None:
    """cp_comm allgather: the plan's own group gathers K/V (not hidden); pp > 1: p2p per micro-batch."""
    m = llama70b()
    hw = load_hardware("h100-sxm")
    ag = ModelSeqCost.from_model(m, hw, Plan(dp=1, tp=8, pp=4, cp=4, cp_comm="allgather"), dtype="bf16")
    ring = ModelSeqCost.from_model(m, hw, Plan(dp=1, tp=8, pp=4, cp=4), dtype="bf16")
    t = np.array([131072])
    big_attn = np.array([1e3])  # enough attention to hide any ring
    assert ring.exposed(t, 4, big_attn)[0] == pytest.approx(
        20 * (hw.compute_slowdown - 1) * 3 * (ring.exposed(t, 4, np.array([0.0]))[0] / 20 / 3)
    )  # a hidden ring only slows the compute it overlaps
    assert ag.exposed(t, 4, big_attn)[0] == pytest.approx(ag.exposed(t, 4, np.array([0.0]))[0])  # never hidden
    assert ag.exposed(t, 2, big_attn)[0] == pytest.approx(ring.exposed(t, 2, big_attn)[0])  # other sizes: ring
    per_mb, fill = ring.p2p(np.array([0.0, 32768.0]))
    assert per_mb[1] > per_mb[0] > 0.0 and fill[1] == 0.0  # 1F1B: both transfers on every stage, none extra
    inter = ModelSeqCost.from_model(m, hw, Plan(dp=1, tp=8, pp=4, vpp=5, cp=4), dtype="bf16")
    per_mb_v, fill_v = inter.p2p(np.array([32768.0]))
    assert fill_v[0] > 0.0 and per_mb_v[0] > 0.0  # interleaved: latency per chunk, and the fill path waits
    flat = ModelSeqCost.from_model(m, hw, Plan(dp=4, tp=8, pp=1, cp=4), dtype="bf16")
    assert flat.p2p(np.array([32768.0]))[0].tolist() == [0.0]


def test_hybrid_cp_flags_follow_the_pinned_megatron() -> None:
    from autopar.emit.megatron import megatron_hybrid_cp_args

    words = megatron_hybrid_cp_args(Plan(dp=2, tp=2, pp=1, cp=8), 16384)
    assert words == [
        "--hybrid-context-parallel",
        "--max-seqlen-per-dp-cp-rank",
        "16384",
        "--calculate-per-token-loss",
        "--dataloader-type",
        "single",
    ]
    with pytest.raises(SpecError, match="pipeline parallelism"):
        megatron_hybrid_cp_args(Plan(dp=2, tp=2, pp=2, cp=4), 16384)
    with pytest.raises(SpecError, match="Megatron-FSDP"):
        megatron_hybrid_cp_args(Plan(dp=2, tp=2, pp=1, cp=8, zero=3), 16384)


def test_json_charges_communicator_memory() -> None:
    r = runner.invoke(
        app,
        [
            "estimate",
            "llama3.1-8b",
            "--hardware",
            "h100-sxm",
            "--gpus",
            "16",
            "--tp",
            "2",
            "--cp",
            "8",
            "--seq-len-dist",
            LONG,
            "--global-batch",
            "64",
            "--json",
        ],
    )
    s = json.loads(r.stdout)["strategies"]
    # 7.5 GB of HDP communicators, 3 x 0.5 GB for Megatron's groups of 2, 4 and 8: less room than the static mesh
    assert s["hdp"]["token_room"] < s["megatron_dynamic_cp"]["token_room"] < s["naive"]["token_room"]
    assert s["naive"]["token_room"] == s["wlb"]["token_room"]


def test_strategy_completion() -> None:
    from autopar.completions import complete_strategy

    assert [n for n, _ in complete_strategy("")] == list(STRATEGIES)
    assert complete_strategy("hdp") == [("hdp_no_balance", "HDP w/o bal"), ("hdp", "HDP")]
