"""What `suggest` and `estimate` load: no numpy on the fixed-length path, no pydantic adapter per option
left at its default (autopar/cli/coerce.py). Speed itself is measured in benchmarks/search_speed.py."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from typer.testing import CliRunner

from autopar.cli import app
from autopar.cli import coerce as cli_coerce


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
    length distribution)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from autopar.cli import app\n"
        "r = CliRunner().invoke(app, ['suggest', 'llama3-8b', '--gpus', '8', '--json', '--hardware', 'h100-sxm'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.startswith(('autopar.cost.serve', 'autopar.io.schema.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
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
    a, b = cli_coerce._Lazy(build, _descriptor(str)), cli_coerce._Lazy(build, _descriptor(str))
    assert a.coerce(None, single, None) is None and cli_coerce._Lazy(build, _descriptor(int)).coerce(None, multiple, None) == ()
    assert built == []
    cli_coerce._SHARED.clear()
    assert a.coerce("x", single, None) == (str, "x") and b.coerce("y", single, None) == (str, "y")
    assert len(built) == 1  # one adapter for every str option
    bounded = cli_coerce._Lazy(build, _descriptor(int, min=1))
    assert bounded.coerce("3", single, None) == (int, "3") and len(built) == 2  # bounds are part of the type
    cli_coerce._SHARED.clear()


def test_values_still_go_through_typers_checks() -> None:
    runner = CliRunner()
    low = runner.invoke(app, ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "0"])
    assert low.exit_code == 2 and "Invalid value for '--top'" in low.output
    word = runner.invoke(app, ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8", "--top", "x"])
    assert word.exit_code == 2 and "valid integer" in word.output
