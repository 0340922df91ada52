"""The Python API (autopar/api/, docs/python.md): the CLI's numbers and keys, typed frozen results,
autopar's own exceptions, an `import autopar` that loads nothing heavy, and `autopar --version`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import autopar
from autopar.cli import app

ROOT = Path(__file__).resolve().parents[3]


def cli_json(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_suggest_is_the_cli_json() -> None:
    r = autopar.suggest("llama3-8b", gpus=8, hardware="h100-sxm", top=5)
    doc = cli_json("suggest", "llama3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--top", "5")
    assert r.to_dict() == doc
    assert r.to_json() == json.dumps(doc, indent=2)
    assert isinstance(r, autopar.SuggestResult) and isinstance(r.recommended, autopar.PlanResult)
    assert len(r.plans) == 5 and r.plans[0] == r.recommended
    assert r.recommended.to_dict() == doc["plans"][0]
    assert (r.model, r.hardware, r.stack, r.gpus) == ("llama3-8b", "h100-sxm", "megatron", 8)
    assert r.recommended.tokens_per_s_per_gpu == doc["tokens_per_s_per_gpu"]
    assert r.recommended.dp * r.recommended.tp * r.recommended.pp * r.recommended.cp == 8


def test_estimate_is_the_cli_json_and_the_readme_figures() -> None:
    """The plan of the README's `estimate --explain` sample: a 1.173 s step, 0.213 s of it bubble."""
    r = autopar.estimate("llama3-8b", gpus=16, tp=2, pp=2, global_batch=16, hardware="h100-sxm")
    doc = cli_json("estimate", "llama3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "16", "--hardware", "h100-sxm")
    assert r.to_dict() == doc
    assert (r.plan.dp, r.plan.tp, r.plan.pp, r.plan.sp) == (4, 2, 2, True)
    assert round(r.plan.step_time_s, 3) == 1.173
    assert round(r.time_breakdown_s["bubble"], 3) == 0.213
    assert r.fits and r.fit_hints == ()


def test_estimate_takes_recompute_modules_as_a_sequence() -> None:
    kw = dict(gpus=64, tp=2, pp=4, vpp=9, ep=16, mbs=4, hardware="h100-sxm", recompute="selective")
    r = autopar.estimate("gpt-oss-120b", recompute_modules=["layernorm", "moe_act"], **kw)
    assert r.plan.recompute_modules == ("moe_act", "layernorm")
    assert r.to_dict() == autopar.estimate("gpt-oss-120b", recompute_modules="moe_act,layernorm", **kw).to_dict()


def test_serve_suggest_is_the_cli_json() -> None:
    """The README's serve sample: agg tp8, KV fp8, concurrency 128 meets TTFT 500 ms and TPOT 30 ms."""
    r = autopar.serve_suggest("llama3.1-70b", gpus=8, hardware="h100-sxm", isl=1024, osl=1024, ttft_ms=500, tpot_ms=30)
    doc = cli_json(
        "serve",
        "suggest",
        "llama3.1-70b",
        "--gpus",
        "8",
        "--hardware",
        "h100-sxm",
        "--isl",
        "1024",
        "--osl",
        "1024",
        "--ttft-ms",
        "500",
        "--tpot-ms",
        "30",
    )
    assert r.to_dict() == doc
    best = r.recommended
    assert (best.mode, best.tp, best.dp, best.kv_dtype, best.concurrency) == ("agg", 8, 1, "fp8", 128)
    assert r.recommended_by == "targets" and best.ttft_ms <= 500 and best.tpot_ms <= 30
    assert best.to_dict() == doc["recommended"]
    assert [p.concurrency for p in r.pareto] == [p["concurrency"] for p in doc["pareto"]]


def test_serve_estimate_is_the_cli_json_with_its_launch() -> None:
    args = dict(gpus=8, tp=4, dp=2, concurrency=64, isl=1024, osl=512, weights="fp8", framework="trtllm", hardware="h100-sxm")
    r = autopar.serve_estimate("qwen3-32b", emit="trtllm", **args)
    doc = cli_json(
        "serve",
        "estimate",
        "qwen3-32b",
        "--gpus",
        "8",
        "--tp",
        "4",
        "--dp",
        "2",
        "--concurrency",
        "64",
        "--isl",
        "1024",
        "--osl",
        "512",
        "--weights",
        "fp8",
        "--framework",
        "trtllm",
        "--hardware",
        "h100-sxm",
        "--emit",
        "trtllm",
    )
    assert r.to_dict() == doc
    assert round(r.ttft_ms) == 215 and round(r.tpot_ms, 1) == 9.0  # the README's serve estimate sample
    assert r.launch is not None and r.launch["framework"] == "trtllm"
    assert autopar.serve_estimate("qwen3-32b", **args).launch is None


def test_results_are_frozen_and_to_dict_is_a_copy() -> None:
    r = autopar.estimate("llama3-8b", gpus=8, tp=2, hardware="h100-sxm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.plan.tp = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.time_breakdown_s["compute"] = 0.0  # type: ignore[index]
    doc = r.to_dict()
    doc["tp"] = 99
    assert r.to_dict()["tp"] == 2


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: autopar.suggest("no-such-model", gpus=8), autopar.SpecError, "no-such-model"),
        (lambda: autopar.suggest("llama3-8b", gpus=8, top=0), autopar.SpecError, "top"),
        (lambda: autopar.estimate("llama3-8b", gpus=8, tp=3), autopar.SpecError, "divisible"),
        (lambda: autopar.suggest("llama3.1-405b", gpus=1, hardware="h100-sxm"), autopar.InfeasibleError, "no plan fits"),
        (lambda: autopar.serve_suggest("llama3-8b", gpus=8, modes=[]), autopar.SpecError, "^`modes` is empty"),
        (lambda: autopar.serve_estimate("llama3-8b", gpus=8), autopar.SpecError, "^`tp` is required"),
    ],
)
def test_errors_are_autopars_own(call, error, words) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=words) as info:
        call()
    assert isinstance(info.value, autopar.AutoparError)


# (API call, its message, the CLI's arguments, the CLI's line): the same error in the API's terms and in flags
SAME_ERROR = [
    (
        lambda: autopar.suggest("llama3-8b", gpus=0),
        "`gpus` must be positive, got 0",
        ["suggest", "llama3-8b", "--gpus", "0"],
        "--gpus must be positive, got 0",
    ),
    (
        lambda: autopar.estimate("llama3-8b", gpus=8, recompute="none", recompute_modules="mlp"),
        "`recompute_modules` needs `recompute=selective`, got 'none'",
        ["estimate", "llama3-8b", "--gpus", "8", "--recompute-modules", "mlp"],
        "--recompute-modules needs --recompute selective, got 'none'",
    ),
    (
        lambda: autopar.serve_estimate("llama3-8b", gpus=8, tp=4, mode="agg", prefill_tp=2),
        "`prefill_tp` needs `mode=disagg`",
        ["serve", "estimate", "llama3-8b", "--gpus", "8", "--tp", "4", "--prefill-tp", "2"],
        "--prefill-tp needs --mode disagg",
    ),
    (
        lambda: autopar.suggest("llama3-8b", gpus=8, emit="trtllm"),
        "`emit` must be one of",
        ["suggest", "llama3-8b", "--gpus", "8", "--emit", "trtllm"],
        "--emit must be one of",
    ),
]


@pytest.mark.parametrize(("call", "message", "args", "line"), SAME_ERROR, ids=[s[3][:24] for s in SAME_ERROR])
def test_an_error_names_the_parameter_in_python_and_the_flag_on_the_cli(call, message, args, line) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(autopar.SpecError) as info:
        call()
    assert str(info.value).startswith(message) and "--" not in str(info.value)
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and res.stderr.startswith(f"autopar: error: {line}") and res.stderr.count("\n") == 1


def test_to_pandas_has_one_row_per_plan_or_point() -> None:
    pd = pytest.importorskip("pandas")
    r = autopar.suggest("llama3-8b", gpus=8, hardware="h100-sxm", top=3)
    frame = r.to_pandas()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 3
    assert list(frame.columns) == list(r.to_dict()["plans"][0])
    assert frame["tokens_per_s_per_gpu"].tolist() == [p.tokens_per_s_per_gpu for p in r.plans]
    s = autopar.serve_suggest("llama3.1-8b", gpus=8, hardware="h100-sxm", isl=1024, osl=128, modes="agg")
    assert len(s.to_pandas()) == len(s.pareto)


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    r = autopar.estimate("llama3-8b", gpus=8, hardware="h100-sxm")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        r.to_pandas()


def test_import_autopar_loads_nothing_heavy() -> None:
    """`import autopar` is the errors module only; the API loads on first use of autopar.suggest & co."""
    code = (
        "import sys, autopar; heavy = ('typer', 'rich', 'numpy', 'pydantic', 'yaml', 'autopar.api', 'torch'); "
        "print([m for m in heavy if m in sys.modules]); autopar.suggest; print('autopar.api' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"]


def test_version_is_the_package_metadata() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output == f"autopar {version('autopar')}\n"
    assert autopar.__version__ == version("autopar")
    with pytest.raises(AttributeError, match="no_such_name"):
        autopar.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", ["README.md", "docs/python.md"])
def test_the_python_samples_run(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every ```python block of the page runs as printed (the values in its comments are the CLI samples')."""
    pytest.importorskip("pandas")
    blocks = python_blocks(ROOT / page)
    assert blocks
    namespace: dict[str, object] = {}  # one page, one session: later blocks use the first one's import
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)
    if page == "docs/python.md":
        assert capsys.readouterr().out.startswith("no plan fits: the smallest of 30 plans needs 6845.5 GiB per GPU")


TINY = """\
name: tiny
layers: 8
hidden_size: 1024
num_attention_heads: 16
num_kv_heads: 4
ffn_hidden_size: 4096
vocab_size: 32000
seq_len: 2048
"""


@pytest.fixture(scope="module")
def toy_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    import yaml

    from tests.conftest import toy_profile_dict

    folder = tmp_path_factory.mktemp("api")
    (folder / "tiny.yaml").write_text(TINY)
    (folder / "toy.yaml").write_text(yaml.safe_dump(toy_profile_dict()))
    return str(folder / "tiny.yaml"), str(folder / "toy.yaml")


@settings(
    max_examples=int(os.environ.get("AUTOPAR_EXAMPLES", "8")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    gpus=st.sampled_from([1, 2, 4, 8, 16]),
    seq_len=st.sampled_from([512, 1024, 2048]),
    batch=st.one_of(st.none(), st.sampled_from([16, 24, 64])),
    stack=st.sampled_from([None, "torchtitan", "deepspeed"]),
    dtype=st.sampled_from(["bf16", "fp8"]),
)
def test_suggest_equals_the_cli_json_for_any_small_job(
    toy_files: tuple[str, str], gpus: int, seq_len: int, batch: int | None, stack: str | None, dtype: str
) -> None:
    """Invariant: for the same inputs, the API's to_dict() is the CLI's --json, or both refuse with one message."""
    model, hw = toy_files
    args = [
        "suggest",
        model,
        "--hardware",
        hw,
        "--gpus",
        str(gpus),
        "--seq-len",
        str(seq_len),
        "--dtype",
        dtype,
        "--top",
        "3",
        *(["--global-batch", str(batch)] if batch else []),
        *(["--stack", stack] if stack else []),
    ]
    res = CliRunner().invoke(app, [*args, "--json"])
    try:
        got = autopar.suggest(model, hardware=hw, gpus=gpus, seq_len=seq_len, dtype=dtype, top=3, global_batch=batch, stack=stack).to_dict()
    except autopar.AutoparError as exc:
        assert res.exit_code == exc.exit_code and str(exc) in " ".join(res.output.split()), res.output
        return
    assert res.exit_code == 0, res.output
    assert got == json.loads(res.output)


def test_the_api_names_are_importable_from_autopar_api() -> None:
    """docs/python.md: the package root's API names are autopar.api's, the same objects."""
    from autopar import api

    assert set(api.__all__) == set(autopar._API)
    assert all(getattr(api, name) is getattr(autopar, name) for name in api.__all__)
