"""Serving frameworks as versioned data: the files, their schema, NAME@VERSION and `autopar frameworks`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autopar.cli import app
from autopar.errors import SpecError
from autopar.io.frameworks import builtin_frameworks, load_framework, resolve_framework
from autopar.io.schema import FrameworkFile
from autopar.spec.framework import IDENTITY, Framework, choose_version, parse_ref, version_key

runner = CliRunner()
DATA = Path(__file__).parents[3] / "autopar" / "data" / "frameworks"
ESTIMATE = [
    "serve",
    "estimate",
    "llama3.1-8b",
    "--hardware",
    "h100-sxm",
    "--gpus",
    "8",
    "--tp",
    "8",
    "--concurrency",
    "16",
    "--isl",
    "1024",
    "--osl",
    "256",
]


def test_every_shipped_file_loads_under_its_own_name() -> None:
    shipped = builtin_frameworks()
    assert shipped == [("sglang", "0.5.1"), ("sglang", "0.5.6"), ("trtllm", "1.0"), ("vllm", "0.12"), ("vllm", "0.15")]
    for name, version in shipped:
        fw = load_framework(f"{name}@{version}")
        assert (fw.name, fw.version) == (name, version) and fw.label and fw.description and fw.source


def test_the_file_has_one_key_per_framework_field() -> None:
    # the mapping stays mechanical: a new Framework field is a new key of the same name in every file
    fields = [f.name for f in dataclasses.fields(Framework)]
    assert [k for k in FrameworkFile.model_fields if k != "schema_version"] == fields
    for path in DATA.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        assert [k for k in data if k != "schema_version"] == fields, path.name


def test_every_value_names_its_mechanism_and_source_or_its_fit() -> None:
    for path in DATA.glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        name, version = data["name"], data["version"]
        for key, entry in data.items():
            if key in (*IDENTITY, "schema_version"):
                continue
            assert entry["mechanism"], (path.name, key)
            assert "source" in entry or {"fitted_on", "fitted_by"} <= set(entry), (path.name, key)
            if "fitted_by" in entry and "--fit" in entry["fitted_by"]:  # its own version's fit, or (vllm 0.15)
                # an older version's of the same engine, whose rows fitted_on names
                assert entry["fitted_by"].startswith(f"python benchmarks/serving_accuracy.py --fit {name}@")
                fitted = entry["fitted_by"].rsplit("@", 1)[1]
                assert fitted == version or fitted in entry["fitted_on"], (path.name, key)


def test_the_values_that_set_the_figures() -> None:
    # the values of the serving fits (docs/calibration.md, "Serving frameworks"): a change to one moves the figures
    vllm, trt = load_framework("vllm@0.12"), load_framework("trtllm@1.0")
    assert (vllm.step_overhead_s, vllm.ttft_overhead_s, vllm.prefill_slowdown, vllm.moe_decode_slowdown) == (0.002, 0.0, 2.5, 1.5)
    assert vllm.graph_reserve_bytes == 1.5 * 2**30 and vllm.moe_decode_reads == "local" and vllm.dp_padding
    assert (trt.eager_layer_s, trt.host_token_s, trt.chunked, trt.max_seqs, trt.memory_rule) == (0.0002, 1.02e-4, False, 2048, "free")
    new, old = load_framework("sglang@0.5.6"), load_framework("sglang@0.5.1")
    assert (new.step_overhead_s, new.ttft_overhead_s, new.prefill_slowdown, new.host_request_s) == (0.003, 0.15, 3.0, 5e-5)
    assert (old.step_overhead_s, old.ttft_overhead_s, old.prefill_slowdown, old.host_request_s) == (0.001, 0.08, 1.0, 0.0)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("vllm", ("vllm", "")),
        ("sglang@0.5.1.post1", ("sglang", "0.5.1.post1")),
        ("trtllm@1.0.0rc3", ("trtllm", "1.0.0rc3")),
        (" vllm@v0.12.0 ", ("vllm", "v0.12.0")),
    ],
)
def test_a_framework_reference_is_a_name_and_a_version(ref: str, expected: tuple[str, str]) -> None:
    assert parse_ref(ref) == expected


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        ("tgi", "`framework` must be one of vllm, sglang, trtllm, got 'tgi'"),
        ("tgi@1.0", "`framework` must be one of vllm, sglang, trtllm, got 'tgi'"),
        ("sglang@", "`framework` 'sglang@': malformed version ''"),
        ("sglang@0.5.x", "`framework` 'sglang@0.5.x': malformed version '0.5.x'"),
        ("vllm@0.12@1", "`framework` 'vllm@0.12@1': malformed version '0.12@1'"),
        ("vllm@latest", "`framework` 'vllm@latest': malformed version 'latest'"),
    ],
)
def test_a_malformed_reference_is_refused_naming_it(ref: str, needle: str) -> None:
    with pytest.raises(SpecError, match="^" + needle.replace("(", r"\(").replace(")", r"\)")):
        parse_ref(ref)


@pytest.mark.parametrize(
    ("name", "version", "chosen", "note"),
    [
        ("vllm", "", "0.15", ""),  # the newest known
        ("sglang", "", "0.5.6", ""),
        ("sglang", "0.5.1.post1", "0.5.1", ""),  # a patch release of a known version is that version
        ("trtllm", "1.0.0rc3", "1.0", ""),
        ("vllm", "0.12.0", "0.12", ""),
        ("sglang", "0.5.3", "0.5.1", "no data file for sglang 0.5.3: using 0.5.1, the newest before it"),
        ("sglang", "0.5.8.post1", "0.5.6", "no data file for sglang 0.5.8.post1: using 0.5.6, the newest before it"),
        ("trtllm", "1.2.0rc6.post1", "1.0", "no data file for trtllm 1.2.0rc6.post1: using 1.0, the newest before it"),
        ("sglang", "0.4.9", "0.5.1", "no data file for sglang 0.4.9: using 0.5.1, the oldest known"),
        ("vllm", "0.14.0", "0.12", "no data file for vllm 0.14.0: using 0.12, the newest before it"),
        ("vllm", "0.15.1", "0.15", ""),
        ("vllm", "0.19.0", "0.15", "no data file for vllm 0.19.0: using 0.15, the newest before it"),
    ],
)
def test_a_version_without_its_own_file_uses_the_nearest_before_it(name: str, version: str, chosen: str, note: str) -> None:
    known = [v for n, v in builtin_frameworks() if n == name]
    got = choose_version(name, version, known)
    assert (got.version, got.note) == (chosen, note)


def test_versions_order_as_releases() -> None:
    order = ["0.5.1.dev1", "0.5.1a1", "0.5.1rc2", "0.5.1", "0.5.1.post1", "0.5.2", "0.5.10", "0.6", "1.0"]
    keys = [version_key(v).order for v in order]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


@pytest.mark.parametrize(("spelled", "normal"), [("1.1.0-dev.2", "1.1.0.dev2"), ("1.0.0-rc3", "1.0.0rc3"), ("0.5.6_post2", "0.5.6.post2")])
def test_pep440_separators_read_as_the_normal_form(spelled: str, normal: str) -> None:
    # PEP 440 normalisation: "-", "_" or "." may precede a pre, post or dev label and its number
    assert version_key(spelled) == version_key(normal)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(release=st.lists(st.integers(0, 99), min_size=1, max_size=4), post=st.integers(0, 9))
def test_the_chosen_version_is_known_and_never_newer_unless_none_is_older(release: list[int], post: int) -> None:
    version = ".".join(map(str, release)) + (f".post{post}" if post else "")
    for name in ("vllm", "sglang", "trtllm"):
        known = [v for n, v in builtin_frameworks() if n == name]
        got = choose_version(name, version, known)
        assert got.version in known
        older = [v for v in known if version_key(v).order <= version_key(version).order]
        if older:
            assert version_key(got.version).order <= version_key(version).order


def _write(tmp_path: Path, edit: dict[str, object]) -> Path:
    data = yaml.safe_load((DATA / "vllm-0.12.yaml").read_text())
    for dotted, value in edit.items():
        *parents, last = dotted.split(".")
        holder = data
        for p in parents:
            holder = holder[p]
        if value is None:
            del holder[last]
        else:
            holder[last] = value
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_framework_file_is_accepted_in_place_of_a_name(tmp_path: Path) -> None:
    path = _write(tmp_path, {"label": "vLLM 0.12 (mine)", "step_overhead_s.value": 0.004})
    mine = json.loads(runner.invoke(app, [*ESTIMATE, "--framework", str(path), "--json"]).stdout)
    shipped = json.loads(runner.invoke(app, [*ESTIMATE, "--json"]).stdout)
    assert mine["framework_constants"] == "vLLM 0.12 (mine)" and mine["tpot_ms"] > shipped["tpot_ms"]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ({"max_seqs.typo": 1}, "max_seqs.typo: unknown field"),
        ({"speculative": {"value": 1, "mechanism": "m", "source": "s"}}, "speculative: unknown field"),
        ({"memory_fraction.value": 1.5}, "memory_fraction.value: must be at most 1, got 1.5"),
        ({"step_overhead_s.value": -0.001}, "step_overhead_s.value: must be >= 0, got -0.001"),
        ({"prefill_slowdown.value": ".nan"}, "prefill_slowdown.value: expected a number"),
        ({"chunk_tokens.value": 0}, "chunk_tokens.value: must be >= 1, got 0"),
        ({"policy.value": "fifo"}, "policy.value: must be one of decode_first, prefill_first, got 'fifo'"),
        ({"ttft_overhead_s.fitted_by": None}, "ttft_overhead_s: a fitted value names both fitted_on"),
        ({"chunked.source": None}, "chunked: needs a source, or fitted_on and fitted_by"),
        ({"overlap": None}, "overlap: missing required field"),
        ({"graph_sizes.value": [2, 1]}, "graph_sizes.value: expected distinct batch sizes in increasing order"),
        ({"version": 0.12}, "version: expected a non-empty string"),
        ({"version": "twelve"}, "version: malformed version 'twelve'"),
        ({"schema_version": 2}, "schema_version: framework is from a newer autopar"),
    ],
)
def test_a_hand_edited_file_exits_2_naming_the_file_and_the_field(tmp_path: Path, edit: dict[str, object], needle: str) -> None:
    path = _write(tmp_path, edit)
    r = runner.invoke(app, [*ESTIMATE, "--framework", str(path)])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and str(path) in r.stderr and needle in r.stderr, r.stderr
    assert r.stdout == ""


def test_the_output_says_which_version_a_version_without_a_file_uses() -> None:
    doc = json.loads(runner.invoke(app, [*ESTIMATE, "--framework", "vllm@0.14.0", "--json"]).stdout)
    assert doc["framework_constants"] == "vLLM 0.12"
    assert doc["framework_note"] == "no data file for vllm 0.14.0: using 0.12, the newest before it"
    text = runner.invoke(app, [*ESTIMATE, "--framework", "vllm@0.14.0"]).stdout
    assert [line for line in text.splitlines() if line.startswith("framework: ")] == [
        "framework: no data file for vllm 0.14.0: using 0.12, the newest before it"
    ]
    # no version (the newest file, 0.15), or a version with its own file: no note, the figures of that file
    newest = json.loads(runner.invoke(app, [*ESTIMATE, "--framework", "vllm@0.15", "--json"]).stdout)
    for ref, want in ((None, newest), ("vllm@0.12.0", doc)):
        args = [*ESTIMATE, "--json"] + (["--framework", ref] if ref else [])
        plain = json.loads(runner.invoke(app, args).stdout)
        assert "framework_note" not in plain and plain["ttft_ms"] == want["ttft_ms"]
        assert "framework:" not in runner.invoke(app, args[:-1]).stdout


def test_vllm_015_schedules_one_step_ahead() -> None:
    """vLLM >= 0.14 runs async scheduling by default (vllm/config/vllm.py VllmConfig.__post_init__:
    async_scheduling None -> on), so a new request joins a step later than under 0.12's synchronous
    loop: on a dense model (where the two files differ only in `overlap`) TTFT is longer, TPOT not."""
    assert load_framework("vllm@0.15").overlap and not load_framework("vllm@0.12").overlap
    old, new = (json.loads(runner.invoke(app, [*ESTIMATE, "--framework", ref, "--json"]).stdout) for ref in ("vllm@0.12", "vllm@0.15"))
    assert new["ttft_ms"] > old["ttft_ms"] and new["tpot_ms"] == pytest.approx(old["tpot_ms"], rel=0.02)


def test_suggest_takes_name_at_version_too() -> None:
    args = [
        "serve",
        "suggest",
        "llama3.1-8b",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "2",
        "--modes",
        "agg",
        "--framework",
        "sglang@0.5.3",
        "--json",
    ]
    doc = json.loads(runner.invoke(app, args).stdout)
    assert doc["recommended"]["framework_constants"] == "SGLang 0.5.1"
    assert doc["recommended"]["framework_note"] == "no data file for sglang 0.5.3: using 0.5.1, the newest before it"


def test_frameworks_lists_each_version_with_what_it_is_and_its_source() -> None:
    r = runner.invoke(app, ["frameworks"])
    assert r.exit_code == 0
    rows = [line.split(None, 2) for line in r.stdout.splitlines() if line.split(" ")[0] in ("vllm", "sglang", "trtllm")]
    assert [row[:2] for row in rows] == [["sglang", "0.5.1"], ["sglang", "0.5.6"], ["trtllm", "1.0"], ["vllm", "0.12"], ["vllm", "0.15"]]
    assert "NVIDIA/TensorRT-LLM v1.0.0rc3" in r.stdout and "vllm-project/vllm v0.12.0" in r.stdout
    assert "--framework NAME uses its newest version (sglang 0.5.6, trtllm 1.0, vllm 0.15)" in r.stdout
    assert "default when no --framework and no --emit: vllm" in r.stdout


def test_schema_framework_prints_the_file_schema() -> None:
    r = runner.invoke(app, ["schema", "framework"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["additionalProperties"] is False
    assert set(doc["required"]) == set(FrameworkFile.model_fields) - {"schema_version"} | {"schema_version"}
    fraction = doc["$defs"]["FractionValue"]["properties"]["value"]
    assert (fraction["minimum"], fraction["maximum"]) == (0.05, 1.0)


def test_resolving_a_name_reads_its_newest_file() -> None:
    got = resolve_framework("trtllm")
    assert got.framework.version == "1.0" and got.note == ""


def test_sglang_runs_a_hybrid_mamba_model_without_the_overlap_scheduler() -> None:
    # sglang v0.5.6.post2 server_args.py (Qwen3Next) and v0.5.9 _handle_mamba_radix_cache: with the radix
    # cache on (the default) the overlap schedule is disabled for Mamba hybrids; the other engines keep theirs
    for ref in ("sglang@0.5.1", "sglang@0.5.6"):
        fw = load_framework(ref)
        assert fw.overlap is True and fw.hybrid_overlap is False
    assert all(load_framework(ref).hybrid_overlap for ref in ("vllm@0.12", "vllm@0.15", "trtllm@1.0"))
