"""What `suggest` and `estimate` load: no numpy on the fixed-length path, no pydantic adapter per option
left at its default or given a plain value (autopar/cli/coerce.py), no rich for `--json`, no config.json
reader for a preset, and only the command that runs built (autopar/cli/__init__.py). Speed itself is
measured in benchmarks/search_speed.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer import BadParameter
from typer._coercion import build_runtime_param, resolve_type_descriptor
from typer.main import get_command
from typer.models import OptionInfo
from typer.testing import CliRunner

import autopar.cli as cli
from autopar.cli import app, run
from autopar.cli import coerce as cli_coerce
from autopar.cli.options import path_text

ROOT = Path(__file__).resolve().parents[2]


def _loaded(args: list[str], prefixes: tuple[str, ...], **env: str) -> list[str]:
    """The modules starting with `prefixes` that `python -m autopar ARGS` (cli.main, as the console script) has
    loaded when it exits, after checking that it succeeded (`env`: variables set for it)."""
    code = (
        "import atexit, json, sys\n"
        "from autopar.cli import main\n"
        f"sys.argv = ['autopar', *{args!r}]\n"
        f"atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))), file=sys.stderr))\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env}, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stderr.strip().splitlines()[-1]))


def test_fixed_length_suggest_and_estimate_never_import_numpy() -> None:
    """numpy serves the variable-length path only (cost/pipeline.py imports it for annotations alone)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from autopar.cli import app\n"
        "for args in (['suggest', 'llama3-8b', '--gpus', '8', '--json'],\n"
        "             ['estimate', 'deepseek-v3', '--gpus', '512', '--tp', '8', '--pp', '8', '--ep', '64', '--json']):\n"
        "    r = CliRunner().invoke(app, [*args, '--hardware', 'h100-sxm'])\n"
        "    assert r.exit_code == 0, r.output\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_training_suggest_loads_no_serving_model_and_no_other_formats() -> None:
    """advise/bands.py names the serving estimate for its annotations only; io/schema/ builds a format's
    pydantic models when a file of that format is read (a training answer reads no framework or
    length distribution). Without the cache of io/cache.py (AUTOPAR_CACHE a file), which reads none."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from autopar.cli import app\n"
        "r = CliRunner().invoke(app, ['suggest', 'llama3-8b', '--gpus', '8', '--json', '--hardware', 'h100-sxm'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.startswith(('autopar.cost.serve', 'autopar.io.schema.'))))\n"
    )
    env = {**os.environ, "AUTOPAR_CACHE": os.devnull}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == str([f"autopar.io.schema.{m}" for m in ("fields", "hardware", "messages", "model", "stack")])


def _descriptor(annotation: Any, **info: Any) -> SimpleNamespace:
    fields = {"min": None, "max": None, "clamp": False, "parser": None, **info}
    return SimpleNamespace(annotation=annotation, file_annotation=None, parameter_info=SimpleNamespace(**fields))


def test_an_option_at_none_builds_nothing_and_plain_types_share_one() -> None:
    built: list[Any] = []

    def build(descriptor: Any) -> Any:
        built.append(descriptor)
        return SimpleNamespace(coerce=lambda value, param, ctx: (descriptor.annotation, value))

    single, multiple = SimpleNamespace(multiple=False, nargs=1), SimpleNamespace(multiple=True, nargs=1)
    a, b = cli_coerce._Lazy(build, _descriptor(float)), cli_coerce._Lazy(build, _descriptor(float))
    assert a.coerce(None, single, None) is None and cli_coerce._Lazy(build, _descriptor(int)).coerce(None, multiple, None) == ()
    assert cli_coerce._Lazy(build, _descriptor(str)).coerce("x", single, None) == "x"
    assert cli_coerce._Lazy(build, _descriptor(int)).coerce("08", single, None) == 8
    assert built == []  # None and plain values (_plain: a str option, ASCII digits) build nothing
    cli_coerce._SHARED.clear()
    assert a.coerce("1.5", single, None) == (float, "1.5") and b.coerce("2", single, None) == (float, "2")
    assert len(built) == 1  # one adapter for every float option
    bounded = cli_coerce._Lazy(build, _descriptor(int, min=1))
    assert bounded.coerce("+3", single, None) == (int, "+3") and len(built) == 2  # bounds are part of the type
    cli_coerce._SHARED.clear()


def test_values_still_go_through_typers_checks() -> None:
    runner = CliRunner()
    low = runner.invoke(app, ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "0"])
    assert low.exit_code == 2 and "Invalid value for '--top'" in low.output
    word = runner.invoke(app, ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "x"])
    assert word.exit_code == 2 and "valid integer" in word.output


SUGGEST = ["suggest", "llama3-70b", "--gpus", "64", "--json", "--hardware", "h100-sxm"]
ESTIMATE = ["estimate", "llama3-8b", "--gpus", "8", "--tp", "2", "--json", "--hardware", "h100-sxm"]
AUTO = ["suggest", "llama3-8b", "--gpus", "auto", "--json", "--hardware", "h100-sxm"]
PLOT = ["suggest", "llama3-8b", "--gpus", "8", "--json", "--hardware", "h100-sxm", "--plot", "{tmp}/p.svg"]


@pytest.mark.parametrize("args", [SUGGEST, ESTIMATE, AUTO, PLOT])
def test_a_json_answer_loads_no_rich_no_adapter_and_no_config_json_reader(args: list[str], tmp_path: Path) -> None:
    """rich draws tables and bars (render/report.py, render/progress.py import it when they draw); typer's
    pydantic adapters (typer/_adapters.py) are built only for values _plain cannot read (a --plot path is
    its parser's); a preset needs none of the Hugging Face readers (io/models.py imports io/hf_config.py
    and io/hf_quant.py for a config.json)."""
    found = _loaded([a.replace("{tmp}", str(tmp_path)) for a in args], ("rich", "typer._adapters", "autopar.io.hf_"))
    assert found == []


def test_a_table_still_loads_rich() -> None:
    """The other side of the test above: without --json the answer is drawn by rich."""
    assert "rich.console" in _loaded(SUGGEST[:-3] + SUGGEST[-2:], ("rich.console",))


def test_main_builds_only_the_command_it_runs() -> None:
    """A command named first is built alone; root options, `serve` alone and unknown words see every command,
    so `autopar --help`, "No such command" and completion are as before."""
    assert [name for _, name, _ in cli.invoked(["suggest", "llama3-8b"])] == ["suggest"]
    assert [(g, n) for g, n, _ in cli.invoked(["serve", "estimate", "x"])] == [("serve", "estimate")]
    for argv in ([], ["--help"], ["--help", "suggest"], ["serve"], ["serve", "--help"], ["sugest"], ["llama3-8b", "suggest"]):
        assert cli.invoked(argv) == list(cli.COMMANDS), argv
    one = get_command(cli.build(cli.invoked(["serve", "suggest"])))
    assert list(one.commands) == ["serve"] and list(one.commands["serve"].commands) == ["suggest"]  # type: ignore[attr-defined]
    every = get_command(app)
    assert list(every.commands) == [n for g, n, _ in cli.COMMANDS if not g] + ["serve"]  # type: ignore[attr-defined]


def test_the_root_help_lists_every_command_through_main() -> None:
    done = subprocess.run([sys.executable, "-m", "autopar", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0
    for _, name, _ in cli.COMMANDS:
        assert f" {name} " in done.stdout, name
    assert " serve " in done.stdout


def test_a_cut_app_still_says_the_flags_of_every_command() -> None:
    """run.flagged reads the running command's options, then every other command's: with the app cut to
    `suggest`, `tp` (an option of estimate only) is said as --tp only through the whole app run() was given."""
    cut = get_command(cli.build(cli.invoked(["suggest"])))
    with cut.make_context("autopar", ["suggest", "llama3-8b"], resilient_parsing=True):
        assert run.flagged("`tp` must divide `gpus`") == "`tp` must divide --gpus"  # the cut app alone
        run._WHOLE[:] = [app]
        try:
            assert run.flagged("`tp` must divide `gpus`") == "--tp must divide --gpus"
        finally:
            run._WHOLE.clear()


def _typers(annotation: type, value: Any, **info: Any) -> tuple[str, Any]:
    """("ok", value) or ("error", message) of typer's own RuntimeParam (its pydantic adapter), as 0.29 builds it."""
    descriptor = resolve_type_descriptor(annotation, OptionInfo(**info))
    param = SimpleNamespace(multiple=False, nargs=1)
    try:
        return "ok", build_runtime_param(descriptor).coerce(value, param=param, ctx=None)  # type: ignore[arg-type]
    except BadParameter as exc:
        return "error", exc.message


def _ours(annotation: type, value: Any, **info: Any) -> tuple[str, Any]:
    descriptor = resolve_type_descriptor(annotation, OptionInfo(**info))
    lazy = cli_coerce._Lazy(build_runtime_param, descriptor)
    try:
        return "ok", lazy.coerce(value, SimpleNamespace(multiple=False, nargs=1), None)
    except BadParameter as exc:
        return "error", exc.message


def test_plain_values_skip_the_adapter_and_the_rest_do_not() -> None:
    """Hand-picked: ASCII digits are int() of them (leading zeros too); what pydantic also reads (" 5", "+5",
    "1_000", "5.0") and what it refuses go to its adapter; a str is returned as given, lone surrogates too."""
    descriptor = resolve_type_descriptor(int, OptionInfo(min=1))
    plain = cli_coerce._plain
    assert plain(descriptor, "064") == 64 and plain(descriptor, 7) == 7
    for value in (" 5", "+5", "1_000", "5.0", "0", "-3", "x", "٣", "9" * 19, True, 5.0):
        assert plain(descriptor, value) is cli_coerce._NOT_PLAIN, value
    assert plain(resolve_type_descriptor(str, OptionInfo()), "a\udcffb") == "a\udcffb"
    assert plain(resolve_type_descriptor(float, OptionInfo()), "1.5") is cli_coerce._NOT_PLAIN
    assert _ours(int, "0", min=1) == _typers(int, "0", min=1) == ("error", "Input should be greater than or equal to 1")


@settings(max_examples=300, deadline=None)
@given(
    value=st.one_of(st.text(alphabet="0123456789 +-_.e٣x", max_size=22), st.integers(-(10**20), 10**20), st.text(max_size=8)),
    bounds=st.sampled_from([{}, {"min": 1}, {"max": 100}, {"min": 0, "max": 10}]),
    annotation=st.sampled_from([int, str]),
)
def test_coercion_is_typers_for_any_value(value: Any, bounds: dict[str, int], annotation: type) -> None:
    """Whatever the value, the option's result (or its error message) is what typer's adapter gives."""
    bounds = bounds if annotation is int else {}
    if annotation is str and not isinstance(value, str):
        value = str(value)
    assert _ours(annotation, value, **bounds) == _typers(annotation, value, **bounds)


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "\t", "p.svg", " a b ", "x\udcff"])))
def test_a_parsed_option_is_typers_for_any_value(value: str) -> None:
    """A path option (cli/options.py path_option: a parser, path_text) is what the parser returns, as typer's
    adapter returns it, without the adapter; what the parser refuses is refused with typer's message."""
    assert _ours(Path, value, parser=path_text) == _typers(Path, value, parser=path_text)


def test_the_root_help_reads_no_yaml_and_no_pydantic() -> None:
    """run() forgets the files a previous command read (io/reading.py) only where io/reading.py is loaded: before
    that no file can have been read, and importing it would import yaml."""
    assert _loaded(["--help"], ("yaml", "pydantic", "autopar.io")) == []


@pytest.mark.parametrize("args", [SUGGEST, ESTIMATE, [*SUGGEST[:-3], "--stack", "megatron@0.8"]])
def test_built_in_inputs_kept_in_the_cache_load_no_pydantic_and_no_yaml(args: list[str], tmp_path: Path) -> None:
    """Every input a built-in name (preset, profile, stack, the error model): once io/cache.py has kept their
    values, a command builds none of the format models (pydantic, 125 ms) and parses no YAML (docs/performance.md);
    the first run, which fills the cache, reads them as always."""
    prefixes = ("pydantic", "yaml", "autopar.io.schema", "autopar.io.yaml_text")
    first = _loaded(args, prefixes, AUTOPAR_CACHE=str(tmp_path))
    assert "pydantic" in first and "yaml" in first
    assert _loaded(args, prefixes, AUTOPAR_CACHE=str(tmp_path)) == []
