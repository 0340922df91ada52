"""benchmarks/accuracy.py --runs: a user's own runs file is scored, and rows autopar cannot describe
are listed with the reason instead of ending the run."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks import accuracy

ROW = {
    "id": "ok",
    "framework": "torchtitan (FSDP2)",
    "model": "llama3.1-8b",
    "hardware": "h100-sxm",
    "gpus": 8,
    "global_batch": 16,
    "seq_len": 8192,
    "dtype": "bf16",
    "tp": 1,
    "pp": 1,
    "vpp": 1,
    "cp": 1,
    "ep": 1,
    "mbs": 1,
    "recompute": "full",
    "zero": 3,
    "tokens_per_s_per_gpu": 6000.0,
}


def test_rows_it_cannot_describe_are_listed(tmp_path: Path) -> None:
    path = tmp_path / "runs.yaml"
    path.write_text(
        yaml.safe_dump(
            {"runs": [ROW, ROW | {"id": "gpu", "hardware": "mi300x"}, {k: v for k, v in ROW.items() if k != "seq_len"} | {"id": "short"}]}
        )
    )
    results, skipped = accuracy.evaluate_file(path)
    assert [(r.id, r.stack, r.accepted) for r in results] == [("ok", "torchtitan", True)]
    assert results[0].predicted is not None and results[0].published == 6000.0
    assert skipped[0].startswith("gpu: unknown hardware 'mi300x'")
    assert skipped[1] == "short: missing field 'seq_len'"


def test_the_same_row_scores_as_in_the_shipped_file() -> None:
    shipped = yaml.safe_load((accuracy.DATA / "framework_runs.yaml").read_text())["runs"][0]
    assert shipped["id"] == "tt_h100_l31_8b_fsdp8_bf16"
    # the source path, not the id, says the table ran on 96 GB / 500 W H100s (framework.HARDWARE_OF)
    renamed = shipped | {"id": "renamed"}
    assert accuracy.framework.hardware_for(renamed) == "h100-96g-500w"
    assert accuracy.framework.evaluate(renamed).predicted == accuracy.framework.evaluate(shipped).predicted
