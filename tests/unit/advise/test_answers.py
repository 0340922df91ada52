"""Issue 26.2: every answer is checked before it is rendered (render/answer.py), and the MFU numerator
counts what the time model charges, so no legitimate input gives NaN, a negative time or MFU above 100%."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.flops import matmul_params, model_flops_per_token
from autopar.errors import AnswerError
from autopar.io.profiles import parse_profile
from autopar.render.answer import checked, dumps
from autopar.spec import limits as lim
from autopar.spec.families import MambaSpec
from autopar.spec.model import ModelSpec
from tests.conftest import toy_profile_dict

runner = CliRunner()


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in --json output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ({"step_time_s": math.nan}, "step_time_s (nan) is not a finite number"),
        ({"plans": [{"tokens_per_s": 1.0}, {"tokens_per_s": math.inf}]}, "plans[1].tokens_per_s (inf) is not a finite"),
        ({"time_breakdown_s": {"compute": -4.1e6}}, "time_breakdown_s.compute (-4100000.0) is negative"),
        ({"mfu": 2.85}, "mfu (2.85) is above 100% of the peak"),
    ],
)
def test_a_bad_answer_is_one_line_and_exit_1(doc: dict[str, Any], said: str) -> None:
    with pytest.raises(AnswerError) as err:
        dumps(doc)
    assert err.value.exit_code == 1 and said in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("internal error: ")


def test_good_answers_pass_unchanged() -> None:
    doc = {"mfu": 0.5, "fits": True, "rows": [{"error": -0.12}], "name": "x", "gpus": 8, "hints": []}
    assert checked(doc) is doc
    assert json.loads(dumps(doc)) == doc


def test_mfu_is_stated_against_the_peak_the_gemms_run_against() -> None:
    """fp8 GEMMs run against the fp8 peak (toy: 2,000 against 1,000 TFLOP/s for bf16), so MFU divides by it
    and no answer passes 100%; a dtype whose peak is below bf16's, or missing, divides by bf16's."""
    hw = parse_profile(toy_profile_dict(), where="toy.yaml")
    assert (hw.mfu_peak("bf16"), hw.mfu_peak("fp8"), hw.mfu_peak("fp32")) == (1000e12, 2000e12, 1000e12)
    assert checked({"mfu": 1.0}) == {"mfu": 1.0}
    with pytest.raises(AnswerError, match="above 100% of the peak"):
        checked({"mfu": 1.01})


def test_fp8_on_a_gpu_of_twice_the_bf16_peak_stays_under_100_percent() -> None:
    """H20: 148 bf16 and 296 fp8 dense TFLOP/s; a 32B model's fp8 plans ran at 108-119% of the bf16 peak."""
    base = ["qwen3-32b", "--hardware", "h20", "--dtype", "fp8", "--json"]
    fixed = json.loads(runner.invoke(app, ["estimate", *base, "--gpus", "8", "--tp", "8"]).stdout)
    bf16 = json.loads(runner.invoke(app, ["estimate", *base[:3], "--json", "--gpus", "8", "--tp", "8"]).stdout)
    assert fixed["mfu"] == pytest.approx(fixed["model_tflops_per_gpu"] / 296, rel=1e-3) and fixed["mfu"] < 1
    assert bf16["mfu"] == pytest.approx(bf16["model_tflops_per_gpu"] / 148, rel=1e-3)
    doc = json.loads(runner.invoke(app, ["suggest", *base, "--gpus", "64"]).stdout)
    assert 0 < max(p["mfu"] for p in doc["plans"]) < 1


def _mamba(conv_kernel: int) -> ModelSpec:
    return ModelSpec(
        name="m",
        layers=4,
        hidden_size=1024,
        num_attention_heads=8,
        num_kv_heads=8,
        head_dim=128,
        ffn_hidden_size=4096,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=2048,
        max_seq_len=2048,
        tie_embeddings=False,
        mamba=MambaSpec(state_size=128, head_dim=64, expand=2, layer_pattern="MMMM", conv_kernel=conv_kernel),
    )


def test_mamba_mfu_counts_the_projections_the_time_model_charges() -> None:
    """in_proj h x (2 d_inner + 2 G N + heads) and out_proj d_inner x h (the two GEMMs of cost/compute.py
    _mamba): h 1024, d_inner 2048, G N 8 x 128, 32 heads -> 1024 x 6176 + 2048 x 1024 = 8,421,376. The
    causal conv's weights (d_inner + 2 G N) x (K + 1) stay in the parameter count, not in 6N."""
    m = MambaSpec(state_size=128, head_dim=64, expand=2, layer_pattern="M")
    assert m.matmul_params(1024) == 1024 * 6176 + 2048 * 1024 == 8_421_376
    assert m.params(1024) - m.matmul_params(1024) == (2048 + 2048) * 5 + 3 * 32 + 2048
    small, huge = _mamba(4), _mamba(65536)
    assert matmul_params(small) == matmul_params(huge) == 4 * 8_421_376 + 32000 * 1024
    assert model_flops_per_token(small, 2048) == model_flops_per_token(huge, 2048)
    assert huge.total_params() - small.total_params() == 4 * (2048 + 2048) * 65532


def _write(tmp: Path, name: str, doc: Any) -> str:
    path = tmp / name
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def test_mamba_conv_kernel_65536_keeps_mfu_at_most_100_percent(tmp_path: Path) -> None:
    """Was MFU 285% (issue 26): the numerator counted the conv weights, the time model never charged them."""
    model = {
        "name": "m",
        "layers": 4,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "ffn_hidden_size": 4096,
        "vocab_size": 32000,
        "seq_len": 2048,
        "mamba": {"state_size": 128, "head_dim": 64, "expand": 2, "layer_pattern": "MMMM", "conv_kernel": 65536},
    }
    r = runner.invoke(app, ["estimate", _write(tmp_path, "m.yaml", model), "--hardware", "h100-sxm", "--gpus", "8", "--tp", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert 0 < _strict_json(r.stdout)["mfu"] <= 1


FLOORS = {
    "peak": lim.MIN_TFLOPS,
    "gemm": lim.MIN_EFFICIENCY,
    "attention": lim.MIN_EFFICIENCY,
    "hbm": lim.MIN_HBM_GBPS,
    "memory_efficiency": lim.MIN_EFFICIENCY,
    "bus": lim.MIN_BUS_GBPS,
    "latency": lim.MAX_LATENCY_US,
}


def _extreme_profile(pick: dict[str, bool]) -> dict[str, Any]:
    """The toy profile with some rates at their floor (and latencies at their ceiling)."""
    d = toy_profile_dict()
    g = d["gpu"]
    if pick["peak"]:
        g["peak_tflops"] = {"bf16": FLOORS["peak"], "fp8": FLOORS["peak"]}
    if pick["gemm"]:
        g["gemm_efficiency"] = {"bf16": [[1.0e9, FLOORS["gemm"]]]}
    if pick["attention"]:
        g["attention_efficiency"] = {"bf16": [[128, FLOORS["attention"]]]}
    if pick["hbm"]:
        g["hbm_bw_gbps"] = FLOORS["hbm"]
    if pick["memory_efficiency"]:
        g["memory_efficiency"] = FLOORS["memory_efficiency"]
    for tier in (d["node"]["intra"], d["cluster"]["inter"]):
        for fits in tier.values():
            for fit in fits:
                if pick["bus"]:
                    fit["bw_gbps"] = FLOORS["bus"]
                if pick["latency"]:
                    fit["latency_us"] = FLOORS["latency"]
    return d


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pick=st.fixed_dictionaries({k: st.booleans() for k in FLOORS}),
    command=st.sampled_from(
        [
            ["suggest", "--gpus", "16"],
            ["estimate", "--gpus", "16", "--tp", "2", "--pp", "2"],
            ["serve", "estimate", "--gpus", "2", "--tp", "2"],
        ]
    ),
)
def test_rates_at_their_bounds_give_finite_answers(tmp_path: Path, pick: dict[str, bool], command: list[str]) -> None:
    """Property: whatever mix of rates sits at its floor, --json is valid JSON with finite numbers (or the
    command refuses on one line), never NaN or Infinity."""
    hw = _write(tmp_path, "hw.yaml", _extreme_profile(pick))
    verb, rest = (command[:2], command[2:]) if command[0] == "serve" else (command[:1], command[1:])
    r = runner.invoke(app, [*verb, "llama3.2-1b", "--hardware", hw, *rest, "--json"])
    if r.exit_code == 0:
        doc = _strict_json(r.stdout)
        assert checked(doc) is doc
    else:
        assert r.exit_code in (1, 2) and "Traceback" not in r.output, r.output[-500:]


@pytest.mark.parametrize(
    ("command", "key"),
    [(["estimate", "--gpus", "8", "--tp", "8"], "step_time_s"), (["serve", "estimate", "--gpus", "8", "--tp", "8"], "ttft_ms")],
    ids=["estimate", "serve-estimate"],
)
def test_a_model_at_every_ceiling_gives_finite_answers(tmp_path: Path, command: list[str], key: str) -> None:
    """Layers, widths, heads, vocabulary and sequence at their limits: a training step is over
    6 x 4096 x 12 x 2^40 x 2^25 = 1.1e25 FLOPs, about 1.4e9 s at 8 x 989 TFLOP/s; huge, and finite."""
    model = {
        "name": "huge",
        "layers": lim.MAX_LAYERS,
        "hidden_size": lim.MAX_WIDTH,
        "num_attention_heads": lim.MAX_HEADS,
        "ffn_hidden_size": lim.MAX_WIDTH,
        "vocab_size": lim.MAX_VOCAB,
        "seq_len": lim.MAX_SEQ,
    }
    verb, rest = (command[:2], command[2:]) if command[0] == "serve" else (command[:1], command[1:])
    r = runner.invoke(app, [*verb, _write(tmp_path, "huge.yaml", model), "--hardware", "h100-sxm", *rest, "--json"])
    doc = _strict_json(r.stdout)
    # both estimates exit 1 for a plan that does not fit, still printing the answer (issue 25)
    assert r.exit_code == (0 if doc["fits"] else 1), r.output
    assert checked(doc) is doc
    assert 1e6 < doc[key] < math.inf


def test_a_plan_that_does_not_fit_reports_its_negative_margin() -> None:
    """fit_margin_gib is a difference (GiB left at the peak): negative when the plan does not fit, and the
    answer check lets it through (llama3-70b on one node: about 106 GiB predicted of 79.7)."""
    r = runner.invoke(app, ["estimate", "llama3-70b", "--hardware", "h100-sxm", "--gpus", "8", "--tp", "8", "--json"])
    assert r.exit_code == 1, r.output
    doc = _strict_json(r.stdout)
    assert doc["fits"] is False and doc["fit_margin_gib"] < 0 and doc["fit_confidence"] is None
    assert doc["fit_margin_gib"] == pytest.approx(doc["memory_gib_capacity"] - doc["memory_gib_per_gpu"], abs=0.01)
