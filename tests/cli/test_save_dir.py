"""``--save-dir DIR`` on suggest and serve suggest: the files, their keys, the exit codes."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar.cli import app
from autopar.render.export import csv_text, jsonl_text

runner = CliRunner()
SUGGEST = ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "3"]
SERVE = ["serve", "suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8"]


def test_csv_and_jsonl_hand_case() -> None:
    rows = [{"a": 1, "b": ["x", "y"]}, {"a": 2, "c": True}]
    assert csv_text(rows) == "a,b,c\n1,x+y,\n2,,True\n"
    assert jsonl_text(rows) == '{"a": 1, "b": ["x", "y"]}\n{"a": 2, "c": true}\n'


def test_suggest_writes_the_plans_the_json_and_the_launch(tmp_path: Path) -> None:
    out = tmp_path / "run" / "a"  # made with its parents
    r = runner.invoke(app, [*SUGGEST, "--json", "--emit", "deepspeed", "--save-dir", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    names = ["plans.csv", "plans.jsonl", "suggestion.json", "launch.sh", "ds_config.json"]
    assert doc["saved_files"] == [str(out / n) for n in names]
    assert sorted(os.listdir(out)) == sorted(names)  # no temporary file left
    lines = [json.loads(line) for line in (out / "plans.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in row.items() if k != "plan"} for row in lines] == doc["plans"]
    rows = list(csv.DictReader((out / "plans.csv").open()))
    assert len(rows) == 3 and list(rows[0])[:4] == ["plan", "dp", "tp", "pp"]
    assert [int(row["dp"]) for row in rows] == [p["dp"] for p in doc["plans"]]
    assert rows[0]["plan"].startswith(f"dp{doc['dp']} tp{doc['tp']}") and f"ZeRO-{doc['zero']}" in rows[0]["plan"]
    saved = json.loads((out / "suggestion.json").read_text())
    assert saved["plans"] == doc["plans"] and "saved_files" not in saved
    assert json.loads((out / "ds_config.json").read_text()) == json.loads(doc["launch_files"]["ds_config.json"])
    assert os.access(out / "launch.sh", os.X_OK) and (out / "launch.sh").read_text().startswith("#!/bin/bash\n")


def test_text_output_says_where(tmp_path: Path) -> None:
    r = runner.invoke(app, [*SUGGEST, "--save-dir", str(tmp_path)])
    assert r.exit_code == 0
    assert f"saved in {tmp_path}: plans.csv, plans.jsonl, suggestion.json" in " ".join(r.stdout.split())
    assert sorted(os.listdir(tmp_path)) == ["plans.csv", "plans.jsonl", "suggestion.json"]  # no --emit, no launch


def test_a_file_in_the_way_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    target = tmp_path / "plans"
    target.write_text("mine\n")
    r = runner.invoke(app, [*SUGGEST, "--save-dir", str(target)])
    assert r.exit_code == 2
    assert r.stderr == f"autopar: error: --save-dir {target}: exists and is not a folder\n"
    assert target.read_text() == "mine\n" and r.stdout == ""


def test_a_folder_that_cannot_be_made_exits_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine\n")
    r = runner.invoke(app, [*SUGGEST, "--save-dir", str(tmp_path / "file" / "sub")])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith(f"autopar: error: --save-dir {tmp_path / 'file' / 'sub'}: cannot make the folder: ")
    assert r.stderr.count("\n") == 1 and (tmp_path / "file").read_text() == "mine\n"


def test_an_empty_folder_name_writes_nothing_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # Path("") would be this folder
    r = runner.invoke(app, [*SUGGEST, "--save-dir", ""])
    assert r.exit_code == 2 and "--save-dir" in r.stderr and "is empty" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_cannot_be_written_exits_3(tmp_path: Path) -> None:
    (tmp_path / "plans.jsonl").mkdir()  # a folder where a file must go
    r = runner.invoke(app, [*SUGGEST, "--save-dir", str(tmp_path)])
    assert r.exit_code == 3
    assert r.stderr.count("\n") == 1 and "--save-dir" in r.stderr and "plans.jsonl" in r.stderr
    assert "Traceback" not in r.output


def test_save_dir_is_refused_with_gpus_auto_and_a_length_distribution(tmp_path: Path) -> None:
    r = runner.invoke(app, ["suggest", "llama3-8b", "--gpus", "auto", "--save-dir", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--save-dir" in r.stderr and not (tmp_path / "x").exists()


def test_serve_suggest_writes_the_front_and_the_launch(tmp_path: Path) -> None:
    r = runner.invoke(app, [*SERVE, "--json", "--emit", "vllm", "--save-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [Path(p).name for p in doc["saved_files"]] == ["front.csv", "front.jsonl", "suggestion.json", "launch.txt"]
    front = [json.loads(line) for line in (tmp_path / "front.jsonl").read_text().splitlines()]
    assert len(front) == len(doc["pareto"])
    assert [p["tpot_ms"] for p in front] == [p["tpot_ms"] for p in doc["pareto"]]
    rows = list(csv.DictReader((tmp_path / "front.csv").open()))
    assert list(rows[0]) == [
        "layout",
        "mode",
        "kv_dtype",
        "concurrency",
        "ttft_ms",
        "tpot_ms",
        "output_tokens_per_s_per_gpu",
        "tokens_per_s_per_user",
    ]
    launch = (tmp_path / "launch.txt").read_text()
    assert "vllm serve" in launch and "vllm bench serve" in launch
