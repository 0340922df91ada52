"""benchmarks/serving_holdout.py and serving_rows.py's newer file: what is skipped (and said), and the
out-of-sample split: no row is scored by constants fitted on it."""

from __future__ import annotations

import csv
import dataclasses
import functools
import statistics
from pathlib import Path

import pytest

from autopar.io.frameworks import load_framework
from autopar.spec.framework import Framework
from benchmarks import serving_accuracy as sa
from benchmarks import serving_holdout as ho
from benchmarks import serving_rows as sr

NEWER = Path(sa.NEWER)


def _write(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    with NEWER.open() as f:
        cols = next(csv.reader(f))
    path = tmp_path / "serving_runs_newer.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows({c: r.get(c, "") for c in cols} for r in rows)
    return path


GOOD = {
    "backend": "vllm",
    "backend_version": "0.19.0",
    "model_path": "MiniMaxAI/MiniMax-M2.5",
    "system": "b300_sxm",
    "precision": "fp4",
    "mode": "agg",
    "isl": "1024",
    "osl": "1024",
    "gemm_quant_mode": "nvfp4",
    "batch_size": "8",
    "tp_size": "4",
    "pp_size": "1",
    "moe_tp_size": "4",
    "moe_ep_size": "1",
    "silicon_ttft_ms": "100",
    "silicon_tpot_ms": "10",
    "silicon_data_source": "db-dump/2026-04-27; config_id=7",
}


def test_rows_the_cli_cannot_express_are_counted_never_silent(tmp_path: Path) -> None:
    bad = [
        GOOD | {"backend_version": "nightly-dev"},
        GOOD | {"backend_version": ""},
        GOOD | {"backend_version": "glm5-hopper"},
        GOOD | {"precision": "int8"},
        GOOD | {"model_path": "zai-org/GLM-4.7"},
        GOOD | {"system": "gb300"},
        GOOD | {"tp_size": "64"},
    ]  # 48 heads are not divisible by tp 64
    rows, notes = sa.load([_write(tmp_path, [GOOD, *bad])])
    assert [(r.model.name, r.hw_name, r.dep.weights, r.dep.kv_dtype, r.held_out) for r in rows] == [
        ("minimax-m2.5", "b300", "fp4", "fp8", True)
    ]
    assert notes[0].startswith("skipped: 7 (rows autopar cannot describe as given):\n  ")
    for why in (
        "vllm version 'nightly-dev' is not a release (1 rows)",
        "vllm version '(blank)' is not a release",
        "vllm version 'glm5-hopper' is not a release",
        "precision 'int8' is not a --weights dtype",
        "no built-in preset for model 'zai-org/GLM-4.7'",
        "no built-in profile for system 'gb300'",
        "a layout serve estimate refuses (e.g. minimax-m2.5: num_attention_heads (48) must be divisible by --tp (64))",
    ):
        assert why in " ".join(notes[0].split())  # wrapped at 80 columns
    # an engine release without its own constants uses the default version's, and says so
    assert notes[1:] == ["vllm 0.19.0 priced at vllm 0.15's constants: 1 rows"]


@pytest.mark.parametrize(
    ("version", "release"),
    [
        ("0.5.10.post1", True),
        ("1.1.0-dev.2", True),
        ("0.19.0", True),
        ("1.2.0rc6.post1", True),
        ("nightly-dev-20260216-d3bae71e", False),
        ("glm5-hopper", False),
        ("", False),
    ],
)
def test_release_versions(version: str, release: bool) -> None:
    assert bool(sr.RELEASE.fullmatch(version)) is release


@functools.cache
def _rows() -> tuple[sr.Row, ...]:
    rows, _ = sa.load(None)
    return tuple(rows)


@pytest.mark.parametrize("axis", sorted(ho.AXES))
def test_no_row_is_scored_by_constants_fitted_on_it(axis: str) -> None:
    rows = list(_rows())
    group_of = ho.AXES[axis]
    folds = ho.folds(rows, axis)
    assert folds, "the calibration rows span more than one model and GPU"
    scored_once: dict[int, int] = {}
    for key, group, train, scored in folds:
        assert scored and train
        assert {group_of(r) for r in scored} == {group} and group not in {group_of(r) for r in train}
        assert not {id(r) for r in scored} & {id(r) for r in train}
        assert not any(r.held_out for r in train + scored), "nothing is fitted or refitted on the newer rows"
        assert all((r.dep.framework, r.dep.framework_version) == key for r in train + scored)
        for r in scored:
            scored_once[id(r)] = scored_once.get(id(r), 0) + 1
    assert set(scored_once.values()) == {1}


def test_the_fit_sees_only_the_fold_s_training_rows() -> None:
    rows = list(_rows())
    seen: list[tuple[tuple[str, str], list[sr.Row]]] = []

    def fake_fit(train: list[sr.Row], key: tuple[str, str], passes: int = 3) -> Framework:
        seen.append((key, train))
        return dataclasses.replace(load_framework("@".join(key)), ttft_overhead_s=9.0)

    data = ho.refit(rows, fake_fit)
    assert all(f["constants"]["ttft_overhead_s"] == 9.0 for f in data["folds"])  # type: ignore[index, union-attr]
    folds = [f for axis in ho.AXES for f in ho.folds(rows, axis)]
    assert len(seen) == len(folds) == len(data["folds"])  # type: ignore[arg-type]
    for (key, train), (fkey, _, fold_train, scored) in zip(seen, folds, strict=True):
        assert key == fkey and train == fold_train[:: ho.EVERY]
        assert not {id(r) for r in train} & {id(r) for r in scored}


def test_held_out_rows_are_scored_with_their_fold_s_constants() -> None:
    rows = [r for r in _rows() if r.dep.framework == "vllm"]
    folds = ho.folds(rows, "gpu")
    cache = {
        "folds": [
            {
                "axis": "gpu",
                "framework": k[0],
                "version": k[1],
                "group": g,
                "constants": {"ttft_overhead_s": 5.0 if g == "h200_sxm" else 0.0},
            }
            for k, g, _, _ in folds
        ]
    }
    out = ho.held_out(rows, "gpu", sa.evaluate, cache)
    ttft: dict[str, list[float]] = {r.key[1]: [] for r, _, _ in out}
    for r, est, _ in out:
        ttft[r.key[1]].append(est.ttft_s)
    assert min(ttft["h200_sxm"]) > 5.0 > statistics.median(ttft["h100_sxm"])  # 5 s added to the H200 fold only
    with pytest.raises(ho.MissingFold, match=r"serving_holdout_fits\.json has no fold gpu vllm@0\.12"):
        ho.held_out(rows, "gpu", sa.evaluate, {"folds": []})


def test_score_counts_medians_within_and_worst() -> None:
    rows = list(_rows())[:3]
    est = sa.evaluate(rows)
    fake = []
    for (row, e, _), ratio in zip(est, (1.1, 0.5, 3.0), strict=True):
        e2 = dataclasses.replace(e, ttft_s=row.ttft_ms * ratio / 1e3, tpot_s=row.tpot_ms / 1e3)
        fake.append((row, e2, "scored"))
    s = ho.score(fake)
    assert s is not None and s.rows == 3
    assert s.ttft_median == pytest.approx(0.5) and s.ttft_mean == pytest.approx((0.1 + 0.5 + 2.0) / 3)
    assert (s.ttft_within, s.tpot_within) == (1, 3) and s.worst == pytest.approx(3.0)
    assert ho.score([(fake[0][0], fake[0][1], "saturated")]) is None
    assert ho.score([(fake[0][0], fake[0][1], "saturated")], every=True) is not None


def test_holdout_option_prints_each_fold(capsys: pytest.CaptureFixture[str]) -> None:
    assert sa.main(["--holdout", "gpu"]) == 0
    out = capsys.readouterr().out
    assert "each fold's left-out rows, scored with the constants fitted without them:" in out
    assert "vllm h100_sxm" in out and "vllm h200_sxm" in out
    # SGLang 0.5.6's rows on other GPUs than the H200 are the six queue-saturated 0.5.8.post1 H100 rows
    assert "not scored, sglang@0.5.6 without h200_sxm: its 3 training rows score none" in out


def test_a_cache_written_for_other_shipped_constants_is_refused() -> None:
    rows = [r for r in _rows() if r.dep.framework == "vllm"]
    cache = ho.load_cache()
    assert cache["shipped"] == ho.shipped(), "the committed cache is the refit of the shipped constants"
    stale = dict(cache, shipped={**ho.shipped(), "vllm@0.12": {**ho.shipped()["vllm@0.12"], "step_overhead_s": 0.5}})
    with pytest.raises(ho.MissingFold, match="written for other shipped constants"):
        ho.held_out(rows, "gpu", sa.evaluate, stale)


def test_a_fold_whose_training_rows_score_none_is_not_fitted() -> None:
    # SGLang 0.5.6 without its H200 rows keeps the six 0.5.8.post1 Qwen3-32B H100 rows
    # (serving_runs.csv), measured at 6.8-88.8 s of TTFT: queue-saturated, none scored, so every trial
    # of the fit tied and it returned the grid's first point (prefill_slowdown 0.5, no ttft_overhead_s)
    rows = [r for r in _rows() if r.dep.framework == "sglang"]
    (fold,) = [f for f in ho.folds(rows, "gpu") if f[1] == "h200_sxm"]
    train = fold[2]
    assert {(r.model.name, r.key[1]) for r in train} == {("qwen3-32b", "h100_sxm")} and len(train) == 6
    assert min(r.ttft_ms for r in train) > 6000
    with pytest.raises(ho.NoScoredRows, match="its 3 training rows score none"):
        sa.fit(train[:: ho.EVERY], ("sglang", "0.5.6"), passes=1)


def test_an_unfitted_fold_is_named_and_its_rows_are_not_scored() -> None:
    rows = [r for r in _rows() if r.dep.framework == "vllm"]

    def fit_but_h200(train: list[sr.Row], key: tuple[str, str], passes: int = 3) -> Framework:
        if all(r.key[1] == "h100_sxm" for r in train):  # the fold without the H200 rows
            raise ho.NoScoredRows("its rows score none")
        return load_framework("@".join(key))

    data = ho.refit(rows, fit_but_h200)
    gpu = {f["group"]: f for f in data["folds"] if f["axis"] == "gpu"}  # type: ignore[index, union-attr]
    assert gpu["h200_sxm"]["constants"] is None and gpu["h200_sxm"]["why"] == "its rows score none"
    assert gpu["h100_sxm"]["constants"] is not None
    out = ho.held_out(rows, "gpu", sa.evaluate, data)
    assert out and {r.key[1] for r, _, _ in out} == {"h100_sxm"}
    assert ho.unfitted("gpu", data) == ["vllm@0.12 without h200_sxm: its rows score none"]
    assert ho.unfitted("model", data) == []


def test_refit_only_keeps_the_other_versions_cached_folds(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = list(_rows())
    cache = ho.load_cache()
    seen: list[tuple[str, str]] = []

    def fake_fit(train: list[sr.Row], key: tuple[str, str], passes: int = 3) -> Framework:
        seen.append(key)
        return dataclasses.replace(load_framework("@".join(key)), ttft_overhead_s=9.0)

    data = ho.refit(rows, fake_fit, only="vllm@0.12")
    assert set(seen) == {("vllm", "0.12")}
    new = {(f["axis"], f["framework"], f["group"]): f for f in data["folds"]}  # type: ignore[index, union-attr]
    old = {(f["axis"], f["framework"], f["group"]): f for f in cache["folds"]}  # type: ignore[index, union-attr]
    assert new.keys() == old.keys()
    for k, f in new.items():
        assert (f["constants"]["ttft_overhead_s"] == 9.0) if k[1] == "vllm" else (f == old[k])  # type: ignore[index]


def test_rates_lists_the_rows_of_most_tokens_per_s() -> None:
    # `--rates` reads a serving process's cap off the rows: SGLang's top row,
    # Llama-3.1-8B fp8 tp8 1000/1000 c512 on H200, 512 x 1000 / (3.177 + 999 x 0.0230 s) = 19.6k tokens/s,
    # then tp8 1000/500 c512 and tp4 1000/1000 c512: two TP sizes at one cap
    top = sa.stream_rates(_rows())
    (first, r), *rest = top["sglang", "0.5.6"]
    assert (r.label, first) == ("llama3.1-8b fp8 tp8 dp1 ep1 1000/1000 c512", pytest.approx(19.6e3, rel=0.005))
    assert [x.label for _, x in rest] == ["llama3.1-8b fp8 tp8 dp1 ep1 1000/500 c512", "llama3.1-8b fp8 tp4 dp1 ep1 1000/1000 c512"]


def test_a_run_measured_thrice_is_judged_against_its_median(tmp_path: Path) -> None:
    """Three campaigns of one run (884/64.0, 196/16.0, 196/16.0 ms: the H200 Kimi-K2.5 int4 c16 case):
    each row is judged against 196 / 16.0, the median; a run measured once keeps its own numbers."""
    runs = [
        GOOD | {"silicon_ttft_ms": "884", "silicon_tpot_ms": "64", "silicon_data_source": "source_file=a.csv"},
        GOOD | {"silicon_ttft_ms": "196", "silicon_tpot_ms": "16", "silicon_data_source": "source_file=b.csv"},
        GOOD | {"silicon_ttft_ms": "196", "silicon_tpot_ms": "16", "silicon_data_source": "source_file=c.csv"},
        GOOD | {"batch_size": "16", "silicon_ttft_ms": "120", "silicon_tpot_ms": "12"},
    ]
    rows = sr.load_rows(_write(tmp_path, runs), held_out=True)
    results = [(r, None, "scored") for r in rows]
    judged, moved = ho.against_repeats(results)  # type: ignore[arg-type]
    assert moved == 1
    assert [(r.ttft_ms, r.tpot_ms) for r, _, _ in judged] == [(196, 16), (196, 16), (196, 16), (120, 12)]
