"""benchmarks/loso.py: leave-one-source-out scoring and the keep rule, on rows with known errors."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import autopar.cost.calibration as cal
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from benchmarks import loso

SHIPPED = cal.SUSTAINED_TENSOR_EFFICIENCY  # the value the tests must leave in place


@dataclass(frozen=True)
class Result:
    id: str
    stack: str
    error: float
    accepted: bool = True


def _rows() -> list[dict[str, Any]]:
    a = {"repo": "a/a", "path": "t.md"}
    return [{"id": "a1", "source": a}, {"id": "a2", "source": a}, {"id": "b1", "source": {"primary": "B et al., 'x'"}}]


def _scorer(errors: dict[bool, dict[str, float]]):  # type: ignore[no-untyped-def]
    """Each row's error with the constant fitted (False) or at its unfitted value (True)."""

    def score(rows: list[dict[str, Any]]) -> list[Result]:
        bare = cal.SUSTAINED_TENSOR_EFFICIENCY == 1.0
        return [Result(id=r["id"], stack="s", error=errors[bare][r["id"]]) for r in rows]

    return score


CONST = loso.Constant(
    name="eff", where={"module": "autopar.cost.calibration", "name": "SUSTAINED_TENSOR_EFFICIENCY"}, value=0.75, unfitted=1.0, rows=("a1",)
)


def test_a_sources_rows_are_scored_without_the_constants_set_on_them() -> None:
    errors = {False: {"a1": 0.01, "a2": -0.03, "b1": 0.10}, True: {"a1": 0.30, "a2": 0.20, "b1": 0.12}}
    score = _scorer(errors)
    doc = loso.leave_one_source_out(_rows(), score, score(_rows()), [CONST])
    s = doc["stacks"]["all"]
    assert s["in_sample"]["mean"] == pytest.approx((0.01 + 0.03 + 0.10) / 3)
    # source a (a1 and a2) at the unfitted value, b1 as fitted: it was not set on b
    assert s["loso"]["mean"] == pytest.approx((0.30 + 0.20 + 0.10) / 3)
    assert s["loso"]["median"] == pytest.approx(0.20)
    rule = doc["rule"][0]
    assert (rule["source"], rule["own_mape"], rule["others_mape_unfitted"]) == ("a/a:t.md", pytest.approx(0.02), 0.12)
    assert rule["dropped"] is False  # it improves its own source and also the others (0.10 < 0.12)
    assert cal.SUSTAINED_TENSOR_EFFICIENCY == SHIPPED  # restored


def test_a_constant_that_helps_its_source_and_hurts_the_others_is_dropped() -> None:
    errors = {False: {"a1": 0.01, "a2": 0.02, "b1": 0.15}, True: {"a1": 0.10, "a2": 0.10, "b1": 0.05}}
    score = _scorer(errors)
    doc = loso.leave_one_source_out(_rows(), score, score(_rows()), [CONST])
    assert doc["rule"][0]["dropped"] is True


def test_a_stack_constant_is_set_to_its_unfitted_value_and_restored() -> None:
    host = loso.Constant(name="h", where={"stack": "megatron", "field": "moe_host_us"}, value=4000, unfitted=0, rows=())
    attn = loso.Constant(
        name="t", where={"stack": "llm-foundry", "field": "attention_vs_fa3", "scale_of": 0.8}, value=0.8, unfitted=0.4, rows=()
    )
    before = load_stack("llm-foundry").attention_vs_fa3.ys
    with loso.unfitted(host), loso.unfitted(attn):
        assert load_stack("megatron").moe_host_us == 0.0
        assert load_stack("llm-foundry").attention_vs_fa3.ys == pytest.approx([y / 2 for y in before])
        assert load_stack("deepspeed").moe_host_us == 0.0  # another stack: untouched (its own 0)
    assert load_stack("megatron").moe_host_us == 4000.0


def test_the_shipped_constants_name_rows_that_exist() -> None:
    import yaml

    data = loso.DATA
    ids = {
        r["id"]
        for f in ("framework_runs.yaml", "heldout_runs.yaml", "published_runs.yaml")
        for r in yaml.safe_load((data / f).read_text())["runs"]
    }
    consts = loso.constants()
    assert {c.name for c in consts} == {
        "sustained_tensor_efficiency",
        "a100_sustained_tensor_efficiency",
        "llm_foundry_triton_attention",
        "megatron_moe_host_us",
    }
    for c in consts:
        assert c.rows and set(c.rows) <= ids, c.name
    sustained = next(c for c in consts if c.name == "sustained_tensor_efficiency")
    assert sustained.value == cal.SUSTAINED_TENSOR_EFFICIENCY and sustained.refit
    # set on every framework and published row (not the held-out ones), of several sources
    from benchmarks import published

    shipped = [r for f in ("framework_runs.yaml", "published_runs.yaml") for r in yaml.safe_load((data / f).read_text())["runs"]]
    scored = {r["id"] for r in shipped if "achieved" not in r or published.usable(r)}
    a100 = next(c for c in consts if c.name == "a100_sustained_tensor_efficiency")
    # the A100 rows set the A100 profile's own value, every other row the global one
    assert set(sustained.rows) | set(a100.rows) == scored and not set(sustained.rows) & set(a100.rows)
    assert set(a100.rows) == {i for i in scored if i.startswith(("lf_a100_", "megatron2021_", "bloom_"))} and a100.refit
    assert a100.value == load_hardware("a100-sxm-80g").sustained_tensor_efficiency
    assert next(c for c in consts if c.name == "megatron_moe_host_us").value == load_stack("megatron").moe_host_us


def test_error_at_is_exact_when_the_step_time_is_affine_in_one_over_f() -> None:
    # t(f) = 1 + 1/f: t(0.5) = 3, t(1) = 2, t(0.8) = 2.25. Published 1/2.25: errors -0.25 at 0.5, +0.125 at 1.
    errors = (2.25 / 3 - 1, 2.25 / 2 - 1)
    assert loso.error_at(0.8, value=0.5, unfitted=1.0, errors=errors) == pytest.approx(0.0)
    assert loso.error_at(0.5, value=0.5, unfitted=1.0, errors=errors) == pytest.approx(-0.25)
    assert loso.error_at(1.0, value=0.5, unfitted=1.0, errors=errors) == pytest.approx(0.125)
    assert loso.error_at(0.6, value=0.5, unfitted=1.0, errors=errors) == pytest.approx(2.25 / (1 + 1 / 0.6) - 1)


# Rows whose tokens/s go as f (all tensor-core time): error(f) = f / wanted - 1. Source a wants 0.8, b and c 0.7.
WANTS = {"a1": 0.8, "b1": 0.7, "b2": 0.7, "c1": 0.7, "c2": 0.7}
REFIT = loso.Constant(
    name="eff",
    where={"module": "autopar.cost.calibration", "name": "SUSTAINED_TENSOR_EFFICIENCY"},
    value=0.75,
    unfitted=1.0,
    rows=tuple(WANTS),
    refit=True,
)


def _by_f(rows: list[dict[str, Any]]) -> list[Result]:
    f = cal.SUSTAINED_TENSOR_EFFICIENCY
    return [Result(id=r["id"], stack="s", error=f / WANTS[r["id"]] - 1) for r in rows]


def test_a_constant_of_several_sources_is_refit_without_each_source_for_its_rows() -> None:
    rows = [{"id": i, "source": {"repo": i[0], "path": "t.md"}} for i in WANTS]
    with loso.at_value(REFIT, 0.75):
        fitted = _by_f(rows)
    doc = loso.leave_one_source_out(rows, _by_f, fitted, [REFIT])
    rule = doc["rule"][0]
    # without a: b and c want 0.7; without b (or c): a1 at 0.8 and two rows at 0.7 -> 0.7 (two errors of 0 beat one)
    assert rule["refit_without"] == {"a:t.md": 0.7, "b:t.md": 0.7, "c:t.md": 0.7}
    assert rule["fit"] == 0.7
    # leave-one-source-out: a1 at 0.7 is 0.7 / 0.8 - 1 = -12.5% off, the others exact
    assert doc["stacks"]["all"]["loso"]["mean"] == pytest.approx(0.125 / 5)
    # in sample at 0.75: a1 -6.25%, the four others +7.14%
    assert doc["stacks"]["all"]["in_sample"]["mean"] == pytest.approx((0.0625 + 4 * (0.75 / 0.7 - 1)) / 5)
    assert rule["source"] == "its 5 rows" and rule["dropped"] is False
    assert cal.SUSTAINED_TENSOR_EFFICIENCY == SHIPPED  # restored


def test_refit_results_score_each_source_at_the_refit_without_it_and_leave_one_source_constants() -> None:
    """The error model's training residuals: a refit constant's rows at the refit without their source (as
    the headline), a one-source constant's rows as fitted (error_model.py leaves those rows out itself)."""
    rows = [{"id": i, "source": {"repo": i[0], "path": "t.md"}} for i in [*WANTS, "d1"]]
    wants = WANTS | {"d1": 0.75}
    one = loso.Constant(name="one", where={"module": "benchmarks.loso", "name": "REFIT_GRID"}, value=0, unfitted=0, rows=("d1",))

    def score(rows: list[dict[str, Any]]) -> list[Result]:
        f = cal.SUSTAINED_TENSOR_EFFICIENCY
        return [Result(id=r["id"], stack="s", error=f / wants[r["id"]] - 1) for r in rows]

    with loso.at_value(REFIT, 0.75):
        fitted = score(rows)
        got = {r.id: r.error for r in loso.refit_results(rows, score, fitted, [REFIT, one])}
    # a1 at 0.7 (b and c want it), b1..c2 at 0.7 (refit without b: a1's 0.8 and c's two 0.7), d1 as fitted
    assert got == pytest.approx({"a1": 0.7 / 0.8 - 1, "b1": 0.0, "b2": 0.0, "c1": 0.0, "c2": 0.0, "d1": 0.0})
    assert cal.SUSTAINED_TENSOR_EFFICIENCY == SHIPPED


def test_a_constant_of_several_sources_without_refit_is_refused() -> None:
    rows = [{"id": i, "source": {"repo": i[0], "path": "t.md"}} for i in WANTS]
    plain = loso.Constant(name="eff", where=REFIT.where, value=0.75, unfitted=1.0, rows=tuple(WANTS))
    with pytest.raises(SystemExit, match="set on rows of 3 sources"):
        loso.leave_one_source_out(rows, _by_f, _by_f(rows), [plain])


def test_a_profile_constant_is_set_while_scored_and_restored() -> None:
    c = loso.Constant(
        name="a100", where={"profile": "a100-sxm-80g", "field": "sustained_tensor_efficiency"}, value=0.8, unfitted=0.7, rows=("r",)
    )
    shipped = load_hardware("a100-sxm-80g").sustained_tensor_efficiency
    with loso.at_value(c, 0.61):
        assert load_hardware("a100-sxm-80g").sustained_tensor_efficiency == 0.61
        assert load_hardware("h100-sxm").sustained_tensor_efficiency is None  # only the named profile
    assert load_hardware("a100-sxm-80g").sustained_tensor_efficiency == shipped


def test_a_constant_is_moved_past_a_warm_start_up_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache (io/cache.py) keeps the built-in files' values; a moved constant must not read them back."""
    monkeypatch.setenv("AUTOPAR_CACHE", str(tmp_path))
    host = loso.Constant(name="h", where={"stack": "megatron", "field": "moe_host_us"}, value=4000, unfitted=0, rows=())
    a100 = loso.Constant(
        name="a100", where={"profile": "a100-sxm-80g", "field": "sustained_tensor_efficiency"}, value=0.8, unfitted=0.7, rows=()
    )
    for _ in range(2):  # the second read is the cache's
        assert load_stack("megatron").moe_host_us == 4000.0
        load_hardware("a100-sxm-80g")
    assert any(tmp_path.iterdir())
    with loso.unfitted(host), loso.at_value(a100, 0.61):
        assert load_stack("megatron").moe_host_us == 0.0
        assert load_hardware("a100-sxm-80g").sustained_tensor_efficiency == 0.61
    assert os.environ["AUTOPAR_CACHE"] == str(tmp_path)
    assert load_stack("megatron").moe_host_us == 4000.0
