"""Stack versions (--stack NAME@VERSION) and recipe facts (--stack-opt KEY=VALUE, --recipe FILE).

Each option is checked against the mechanism it sets, by hand on the toy profile
(conftest: intra collectives 10 us + 100 GB/s), and the bad-input lines exactly.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar.cli import app
from autopar.cost.comm import Group, collective_time
from autopar.cost.step import _dp_overlap, estimate
from autopar.errors import SpecError
from autopar.io.stacks import builtin_stacks, load_stack, read_options, stack_versions
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.plan import Plan
from tests.conftest import gpt_like

runner = CliRunner()
LLAMA = ["estimate", "llama3-8b", "--gpus", "8", "--tp", "2"]


def _differing(a: object, b: object) -> set[str]:
    skip = {"version", "path", "citations", "description", "applied"}
    return {f.name for f in fields(a) if f.name not in skip and getattr(a, f.name) != getattr(b, f.name)}  # type: ignore[arg-type]


# --- versions ------------------------------------------------------------------------


def test_every_built_in_version_loads_and_the_default_is_the_newest() -> None:
    assert builtin_stacks() == ["deepspeed", "llm-foundry", "megatron", "torchtitan"]
    assert stack_versions("megatron") == ["0.8", "0.16"]  # numeric order, not text order
    assert stack_versions("deepspeed") == ["0.5", "0.14"]
    assert stack_versions("torchtitan") == ["2024.12", "2025.06"]
    for name in builtin_stacks():
        for version in stack_versions(name):
            s = load_stack(f"{name}@{version}")
            assert (s.name, s.version, s.label) == (name, version, f"{name}@{version}")
        assert load_stack(name).version == stack_versions(name)[-1]


def test_an_older_version_differs_only_in_what_its_source_says() -> None:
    # DeepSpeed 0.5's ZeRO-3 fetch_sub_module waits on every gather: no overlap of the parameter all-gather
    old, new = load_stack("deepspeed@0.5"), load_stack("deepspeed@0.14")
    assert _differing(old, new) == {"dp_gather_overlap"}
    assert (old.dp_gather_overlap, old.gather_overlap, new.gather_overlap) == (0.0, 0.0, 0.9)
    # Megatron-Core 0.8 has no --recompute-modules, and scales the expert outputs by the routing probabilities at
    # the unpermute (moe_utils.unpermute at core_r0.8.0), which keeps them for backward
    old, new = load_stack("megatron@0.8"), load_stack("megatron@0.16")
    assert _differing(old, new) == {"recompute_modules", "moe_saves_expert_output"} and old.recompute_modules == ()
    assert (old.moe_saves_expert_output, new.moe_saves_expert_output) == (True, False)
    # torchtitan 2024.12 ran the loss eagerly on fp32 logits; 2025.06 compiles it; 9dec370's generate_split_points
    # gives the extra layers to the middle stages (torchtitan/parallelisms/pipelining_utils.py)
    old, new = load_stack("torchtitan@2024.12"), load_stack("torchtitan@2025.06")
    assert _differing(old, new) <= {"logit_bytes", "logit_peak_bytes", "parallelisms", "pipeline_split"}
    assert (old.logit_bytes, old.logit_peak_bytes, new.logit_bytes, new.logit_peak_bytes) == (10, 14, 4, 4)
    assert "ep" not in old.parallelisms


def test_older_versions_do_not_offer_options_their_framework_lacked() -> None:
    with pytest.raises(SpecError, match=r"stack megatron@0\.8 has no option 'moe_cuda_graphs'; its options: bucket_size"):
        load_stack("megatron@0.8", {"moe_cuda_graphs": "true"})
    with pytest.raises(SpecError, match=r"torchtitan@2024\.12 has no option 'compiled_loss'"):
        load_stack("torchtitan@2024.12", {"compiled_loss": "true"})


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--stack", "megatron@0.9"],
            "autopar: error: --stack megatron@0.9: megatron has no version '0.9'; it has 0.8, 0.16 (default 0.16)",
        ),
        (["--stack", "megatron@"], "autopar: error: --stack megatron@: megatron has no version ''; it has 0.8, 0.16 (default 0.16)"),
        (["--stack-opt", "grad_reduce=fp4"], "autopar: error: --stack-opt grad_reduce: must be bf16 or fp32, got 'fp4'"),
        (["--stack-opt", "grad_reduce"], "autopar: error: --stack-opt grad_reduce: expected KEY=VALUE (e.g. grad_reduce=bf16)"),
        (["--stack-opt", "bucket_size=big"], "autopar: error: --stack-opt bucket_size: must be a number, got 'big'"),
        (
            ["--stack", "llm-foundry", "--tp", "1", "--stack-opt", "async_tp=true"],
            "autopar: error: --stack-opt async_tp: stack llm-foundry@0.3 has no option 'async_tp'; its options: "
            "mixed_precision (see `autopar stacks`)",
        ),
    ],
)
def test_bad_stack_input_is_one_line_and_exit_2(args: list[str], line: str) -> None:
    result = runner.invoke(app, [*LLAMA, *args])
    assert result.exit_code == 2
    assert result.stderr.strip() == line
    assert result.stdout == ""


def test_a_bound_of_the_field_an_option_sets_names_the_option() -> None:
    result = runner.invoke(app, [*LLAMA, "--stack-opt", "bucket_size=-1"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr == (
        "autopar: error: --stack-opt bucket_size=-1: must be >= 0, got -1.0 (it sets collectives.dp_bucket_params of stack megatron@0.16)\n"
    )  # the option's own words, not the stack file's path


# --- options: what each one changes, by hand --------------------------------------


def test_bf16_grad_reduce_halves_the_gradient_buffer_and_the_reduce_bytes(toy_hw: HardwareProfile) -> None:
    # DistributedDataParallelConfig.grad_reduce_in_fp32=False: gradients 2 B instead of 4, in memory and on the wire
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048)
    plan = Plan(dp=8, tp=1, pp=1, zero=0, sp=False)
    fp32 = replace(load_stack("megatron", {"grad_reduce": "fp32", "overlap_grad_reduce": "false"}), fixed_overhead_gib=0)
    bf16 = replace(load_stack("megatron", {"grad_reduce": "bf16", "overlap_grad_reduce": "false"}), fixed_overhead_gib=0)
    assert (fp32.grad_bytes("bf16"), bf16.grad_bytes("bf16"), bf16.grad_bytes("fp8")) == (4, 2, 2)
    a, b = (estimate(m, toy_hw, job, plan, stack=s) for s in (fp32, bf16))
    assert b.memory.grads == pytest.approx(a.memory.grads / 2)
    # ZeRO 0 all-reduces every gradient bucket, nothing hidden (overlap_grad_reduce=false)
    p, group = m.total_params(), Group(size=8, per_node=8)
    k = -(-int(p) // int(fp32.dp_bucket_params))
    for est, nbytes in ((a, 4), (b, 2)):
        assert est.time.dp_comm == pytest.approx(k * collective_time(toy_hw, "all_reduce", nbytes * p / k, group))


def test_a_zero3_gather_that_waits_hides_nothing() -> None:
    # deepspeed@0.5: gather overlap 0. One micro-batch, forward 10 s, backward 20 s, each gather 1 s, reduce 3 s.
    # Overlapped (0.9): the forward gather hides behind 9 s, the backward gather + reduce (4 s) behind 18 s: 0.
    assert _dp_overlap((3.0, 2.0), 3, 1, fwd_s=10, bwd_s=20, overlap=0.9) == (0.0, 5.0)
    # Waited on: both gathers (1 + 1 s) are exposed, the reduce still hides behind the backward.
    assert _dp_overlap((3.0, 2.0), 3, 1, fwd_s=10, bwd_s=20, overlap=0.9, gather_overlap=0.0) == (2.0, 3.0)
    # ZeRO 1: the one gather after the step is exposed whole
    assert _dp_overlap((3.0, 2.0), 1, 4, fwd_s=10, bwd_s=20, overlap=0.9, gather_overlap=0.0) == (2.0, 3.0)


def test_deepspeed_05_zero3_is_slower_by_its_exposed_gathers() -> None:
    args = ["estimate", "llama3-8b", "--gpus", "16", "--zero", "3", "--mbs", "2", "--recompute", "full", "--json"]
    new, old = (json.loads(runner.invoke(app, [*args, "--stack", s]).stdout) for s in ("deepspeed", "deepspeed@0.5"))
    assert old["time_breakdown_s"]["dp_comm"] > new["time_breakdown_s"]["dp_comm"]
    assert old["tokens_per_s"] < new["tokens_per_s"]
    assert old["memory_gib_per_gpu"] == new["memory_gib_per_gpu"]  # the memory is the same


def test_compiled_loss_holds_4_bytes_per_logit_not_14(toy_hw: HardwareProfile) -> None:
    # tp 1: the loss holds logit_peak_bytes x tokens x vocabulary on the last stage
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048)
    plan = Plan(dp=8, tp=1, pp=1, zero=3, sp=False)
    eager, compiled = (
        estimate(m, toy_hw, job, plan, stack=load_stack("torchtitan", {"compiled_loss": v})).memory for v in ("false", "true")
    )
    assert eager.logits - compiled.logits == pytest.approx((14 - 4) * 2048 * m.vocab_size)
    old = estimate(m, toy_hw, job, plan, stack=load_stack("torchtitan@2024.12")).memory
    assert old.logits == eager.logits


def test_tp_comm_overlap_off_exposes_four_times_the_tp_time(toy_hw: HardwareProfile) -> None:
    # --tp-comm-overlap hides 0.75 of the SP collectives: off, all of it is exposed (1 / 0.25 = 4x)
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048)
    plan = Plan(dp=4, tp=2, pp=1, sp=True)
    on, off = (estimate(m, toy_hw, job, plan, stack=load_stack("megatron", {"tp_comm_overlap": v})).time.tp_comm for v in ("true", "false"))
    assert on > 0 and off == pytest.approx(4 * on)


def test_moe_cuda_graphs_remove_4_ms_per_moe_layer_per_micro_batch(toy_hw: HardwareProfile) -> None:
    from tests.unit.cost.test_stack_overlaps import _moe_toy

    m = _moe_toy()
    job = Job(gpus=1, gpus_per_node=8, global_batch=2, seq_len=4096)
    plan = Plan(dp=1, tp=1, pp=1, sp=False, zero=0)
    eager, graphed = (
        estimate(m, toy_hw, job, plan, stack=load_stack("megatron", {"moe_cuda_graphs": v})).step_time_s for v in ("false", "true")
    )
    assert eager - graphed == pytest.approx(2 * 4 * 4e-3)  # 2 micro-batches x 4 MoE layers x 4 ms


def test_fp8_param_gather_moves_one_byte_per_parameter(toy_hw: HardwareProfile) -> None:
    # ZeRO 1 all-gathers the updated weights once per step: bf16 (2 B), or FP8 (1 B) with --fp8-param-gather
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048, dtype="fp8")
    plan = Plan(dp=8, tp=1, pp=1, zero=1, sp=False)
    p, group = m.total_params(), Group(size=8, per_node=8)
    base = {"overlap_grad_reduce": "false", "overlap_param_gather": "false"}
    times = {}
    for v in ("false", "true"):
        stack = load_stack("megatron", {**base, "fp8_param_gather": v})
        times[v] = estimate(m, toy_hw, job, plan, stack=stack).time.dp_comm
    k = -(-int(p) // 40_000_000)
    gather = {n: k * collective_time(toy_hw, "all_gather", n * p / k, group) for n in (2, 1)}
    assert times["false"] - times["true"] == pytest.approx(gather[2] - gather[1])


def test_bucket_size_sets_the_collectives_per_pass() -> None:
    assert load_stack("megatron", {"bucket_size": "1e8"}).dp_bucket_params == 1e8
    assert load_stack("deepspeed", {"bucket_size": "2e8"}).dp_bucket_params == 2e8


def test_composer_pure_mixed_precision() -> None:
    pure = load_stack("llm-foundry", {"mixed_precision": "PURE"})
    assert (pure.grad_reduce_bytes, pure.gather_bytes) == (2, 2)
    assert pure.elementwise_passes == pytest.approx(36 / 44)  # 36h bytes per block against the model's 44h
    default = load_stack("llm-foundry", {"mixed_precision": "DEFAULT"})
    assert _differing(default, load_stack("llm-foundry")) == set()  # DEFAULT is what the file describes


# --- echo and recipe files -----------------------------------------------------------


def test_options_are_echoed_in_the_header_and_in_json(tmp_path: Path) -> None:
    text = runner.invoke(app, [*LLAMA, "--stack-opt", "grad_reduce=bf16", "--no-explain"]).stdout
    assert "stack: megatron@0.16 — default megatron (no --stack); options grad_reduce=bf16\n" in text
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("grad_reduce: bf16\ntp_comm_overlap: true\n")
    doc = json.loads(runner.invoke(app, [*LLAMA, "--recipe", str(recipe), "--stack-opt", "grad_reduce=fp32", "--json"]).stdout)
    assert doc["stack_options"] == {"grad_reduce": "fp32", "tp_comm_overlap": "true"}  # --stack-opt wins
    assert (doc["stack"], doc["stack_version"]) == ("megatron", "0.16")
    plain = json.loads(runner.invoke(app, [*LLAMA, "--json"]).stdout)
    assert plain["stack_options"] == {}
    suggested = json.loads(
        runner.invoke(app, ["suggest", "llama3-8b", "--gpus", "8", "--top", "1", "--json", "--stack-opt", "grad_reduce=bf16"]).stdout
    )
    assert suggested["stack_options"] == {"grad_reduce": "bf16"}


def test_a_recipe_value_must_be_a_scalar(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("grad_reduce: [bf16]\n")
    with pytest.raises(SpecError, match=r"r.yaml: grad_reduce: expected a value"):
        read_options([], str(recipe))


def test_stacks_lists_versions_and_options_and_schema_has_stack() -> None:
    out = runner.invoke(app, ["stacks"]).stdout
    for label in ("deepspeed@0.5", "deepspeed@0.14", "megatron@0.8", "megatron@0.16", "torchtitan@2024.12"):
        assert label in out
    assert "grad_reduce (bf16|fp32)" in out
    schema = json.loads(runner.invoke(app, ["schema", "stack"]).stdout)
    assert "options" in schema["properties"] and "StackOption" in schema["$defs"]


# --- the framework benchmark asks only what the CLI accepts ---------------------------


def _framework():  # type: ignore[no-untyped-def]
    from benchmarks import accuracy

    return accuracy.framework


def _rows() -> list[dict]:
    import yaml

    data = Path(__file__).resolve().parents[3] / "benchmarks" / "data"
    return [r for f in ("framework_runs.yaml", "heldout_runs.yaml") for r in yaml.safe_load((data / f).read_text())["runs"]]


def test_every_benchmark_row_round_trips_through_the_cli_parser() -> None:
    import typer.main

    framework = _framework()
    command = typer.main.get_command(app).commands["estimate"]  # type: ignore[attr-defined]
    rows = _rows()
    assert set(framework.STACK_OPTS) <= {r["id"] for r in rows}  # no option for a row that is not there
    for row in rows:
        args = framework.cli_args(row, "model.yaml")
        assert args[0] == "estimate"
        params = command.make_context("estimate", args[1:]).params
        for key in ("gpus", "tp", "pp", "vpp", "cp", "ep", "mbs", "recompute", "zero", "global_batch", "seq_len", "dtype"):
            assert params[key] == row[key], (row["id"], key)
        assert (params["etp"], params["sp"], params["stack"]) == (row.get("etp", 1), row["tp"] > 1, framework.stack_ref(row))
        assert list(params["stack_opt"] or ()) == list(framework.STACK_OPTS.get(row["id"], ()))
        # each option is one its stack's version offers
        load_stack(params["stack"], read_options(list(params["stack_opt"] or ()), None))


def test_the_benchmark_estimates_through_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    framework = _framework()
    seen: list[list[str]] = []
    real = framework.run_cli

    def spy(args: list[str]) -> tuple[int, str, str]:
        seen.append(args)
        return real(args)

    monkeypatch.setattr(framework, "run_cli", spy)
    row = next(r for r in _rows() if r["id"] == "lf_a100_mpt70b_64_fsdp_ac")
    result = framework.evaluate(row)
    assert len(seen) == 1 and seen[0][2:4] == ["--hardware", "a100-sxm-80g"]
    assert seen[0][1].endswith(".yaml")  # the row's own model, written as a model file
    assert seen[0][seen[0].index("--stack-opt") + 1] == "mixed_precision=PURE"
    assert result.accepted and result.predicted is not None and result.stack == "llm-foundry"


def test_the_python_api_takes_the_same_options() -> None:
    import autopar

    r = autopar.estimate("llama3-8b", gpus=8, tp=2, stack="megatron@0.16", stack_options={"grad_reduce": "bf16"})
    cli = json.loads(runner.invoke(app, [*LLAMA, "--stack", "megatron@0.16", "--stack-opt", "grad_reduce=bf16", "--json"]).stdout)
    assert r.to_dict()["stack_options"] == {"grad_reduce": "bf16"}
    assert r.to_dict()["step_time_s"] == cli["step_time_s"]


def test_a_stack_file_of_your_own_may_extend_a_built_in_version(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: megatron@0.8\noverlap: {tp: 0.5}\n")
    s = load_stack(str(mine))
    assert (s.name, s.version, s.tp_overlap, s.recompute_modules) == ("megatron", "0.8", 0.5, ())
    assert s.path == str(mine)
    mine.write_text("extends: megatron@0.7\n")
    with pytest.raises(SpecError, match=r"`stack` megatron@0\.7: megatron has no version '0\.7'"):
        load_stack(str(mine))


def test_async_tp_off_exposes_the_whole_tp_time(toy_hw: HardwareProfile) -> None:
    # torchtitan's async TP hides 0.6 of the SP collectives: off, 1 / 0.4 = 2.5x as much is exposed
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048)
    plan = Plan(dp=4, tp=2, pp=1, sp=True, zero=3)
    on, off = (estimate(m, toy_hw, job, plan, stack=load_stack("torchtitan", {"async_tp": v})).time.tp_comm for v in ("true", "false"))
    assert on > 0 and off == pytest.approx(2.5 * on)


def test_logit_bytes_sets_what_the_loss_holds(toy_hw: HardwareProfile) -> None:
    # Megatron's vocab-parallel cross-entropy holds 6 B per logit; a fused loss keeping bf16 logits only, 2 B
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048)
    plan = Plan(dp=8, tp=1, pp=1, zero=1, sp=False)
    six, two = (estimate(m, toy_hw, job, plan, stack=load_stack("megatron", {"logit_bytes": v})).memory.logits for v in ("6", "2"))
    assert six - two == pytest.approx(4 * 2048 * m.vocab_size)


@pytest.mark.parametrize(
    ("stack", "option", "dtype"),
    [("deepspeed", "overlap_comm", "bf16"), ("torchtitan", "fp8_all_gather", "fp8"), ("megatron", "overlap_param_gather", "bf16")],
)
def test_switching_a_dp_overlap_or_fp8_gather_off_exposes_more_dp_time(
    toy_hw: HardwareProfile, stack: str, option: str, dtype: str
) -> None:
    m = gpt_like(layers=4)
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=2048, dtype=dtype)
    plan = Plan(dp=8, tp=1, pp=1, zero=3, sp=False)
    on, off = (estimate(m, toy_hw, job, plan, stack=load_stack(stack, {option: v})).time.dp_comm for v in ("true", "false"))
    assert off > on


def test_moe_a2a_overlap_sets_the_ep_overlap() -> None:
    assert load_stack("megatron", {"moe_a2a_overlap": "true"}).ep_overlap is True
    assert load_stack("megatron").ep_overlap is False


def test_the_precision_aware_optimizer_keeps_10_bytes_a_parameter_under_bf16_only() -> None:
    """megatron@0.16 precision_aware_optimizer=true (Megatron-Core 0.16 OptimizerConfig, set for BF16 by the
    NeMo and Megatron-Bridge performance recipes): TE's FusedAdam keeps the fp32 master as the 16 bits the
    bf16 weight lacks (store_param_remainders), 2 + 4 + 4 = 10 B a parameter against 12 (fp32 master, m, v);
    under FP8 recipes Megatron keeps the fp32 master itself: 12. Only the optimizer part moves, by 10/12."""
    base, pao = load_stack("megatron"), load_stack("megatron", {"precision_aware_optimizer": "true"})
    assert (base.optimizer_state_bytes("bf16"), pao.optimizer_state_bytes("bf16"), pao.optimizer_state_bytes("fp8")) == (12, 10, 12)
    args = ["estimate", "nemotron4-15b", "--gpus", "16", "--tp", "2", "--mbs", "2", "--seq-len", "4096", "--json"]
    off = json.loads(runner.invoke(app, args).stdout)["memory_breakdown_gib"]
    doc = json.loads(runner.invoke(app, [*args, "--stack-opt", "precision_aware_optimizer=true"]).stdout)
    on = doc["memory_breakdown_gib"]
    assert doc["stack_options"] == {"precision_aware_optimizer": "true"}
    assert on["optimizer"] == pytest.approx(off["optimizer"] * 10 / 12)
    assert {k: on[k] for k in on if k not in ("optimizer", "total")} == {k: off[k] for k in off if k not in ("optimizer", "total")}
    bad = runner.invoke(app, [*args, "--stack-opt", "precision_aware_optimizer=yes"])
    line = "autopar: error: --stack-opt precision_aware_optimizer: must be false or true, got 'yes'"
    assert (bad.exit_code, bad.stderr.strip()) == (2, line)
