"""The CLI package's one error path: every command is registered through run.handled, which says a library
error as one line on stderr and exits with its code; the registration table is the order --help lists."""

from __future__ import annotations

import pytest
import typer
import typer.core
import typer.main
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from autopar.cli import COMMANDS, app
from autopar.cli.run import flagged, handled, options_of
from autopar.errors import AutoparError, InfeasibleError, OutputError, SpecError

runner = CliRunner()


def test_every_registered_command_goes_through_handled() -> None:
    (serve,) = [g.typer_instance for g in app.registered_groups if g.name == "serve"]
    assert serve is not None
    for group in (app, serve):
        for info in group.registered_commands:
            assert getattr(info.callback, "__wrapped__", None) is not None, info.name
    assert [(g, n) for g, n, _ in COMMANDS] == [
        ("", n) for n in ("profile", "calibrate", "suggest", "estimate", "models", "hardware", "stacks", "frameworks", "schema")
    ] + [("serve", "estimate"), ("serve", "suggest")]


def test_help_lists_the_commands_in_the_tables_order() -> None:
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "100"}).stdout
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("│ ") and len(line.split()) > 2]
    names = [n for g, n, _ in COMMANDS if not g]
    assert [n for n in listed if n in {*names, "serve"}] == [*names, "serve"]


@pytest.mark.parametrize(("error", "code"), [(SpecError, 2), (InfeasibleError, 1), (OutputError, 3)])
def test_a_library_error_is_one_line_and_its_exit_code(error: type[AutoparError], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    def command() -> None:
        raise error("gpus (12) must be divisible by tp (8)\nsecond line")

    with pytest.raises(typer.Exit) as info:
        handled(command)()
    assert info.value.exit_code == code
    err = capsys.readouterr().err
    assert err == "autopar: error: gpus (12) must be divisible by tp (8)\\nsecond line\n"


def test_a_long_message_is_cut_to_2000_characters(capsys: pytest.CaptureFixture[str]) -> None:
    def command() -> None:
        raise SpecError("x" * 5000)

    with pytest.raises(typer.Exit):
        handled(command)()
    line = capsys.readouterr().err.rstrip("\n")
    assert line == "autopar: error: " + "x" * 1999 + "…"


def test_handled_keeps_the_commands_name_doc_and_result() -> None:
    def command(n: int) -> int:
        """Doubles."""
        return 2 * n

    wrapped = handled(command)
    assert wrapped(4) == 8 and wrapped.__doc__ == "Doubles." and wrapped.__name__ == "command"


def test_an_error_while_rendering_is_one_line_too() -> None:
    """A --plot path with the wrong suffix is refused by render/ (after the search): exit 2, one line, no traceback."""
    r = runner.invoke(app, ["suggest", "llama3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--plot", "chart.png"])
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert lines == ["autopar: error: --plot chart.png: the file name must end in .svg or .html"]


# (a library message, the line the CLI prints): parameters in backticks said as flags (autopar/errors.py)
FLAGGED = [
    ("`gpus` must be at least 1, got 0", "--gpus must be at least 1, got 0"),
    ("`gpus` (12) disagrees with `nodes` (2)", "--gpus (12) disagrees with --nodes (2)"),
    ("`mode=disagg` needs `prefill_workers`", "--mode disagg needs --prefill-workers"),
    ("use `tp=1` `dp=8` `attention_dp=True`", "use --tp 1 --dp 8 --attention-dp"),
    ("`sp=False` with `sp=True`", "--no-sp with --sp"),
    ("`slurm_*` options need `emit=slurm`", "--slurm-* options need --emit slurm"),
    ("`prefill_*` options", "--prefill-* options"),
    ("see `autopar stacks` or `no_such_option`, `Gpus`, `nothing_*`", "see `autopar stacks` or `no_such_option`, `Gpus`, `nothing_*`"),
    ("no backticks: --gpus stays", "no backticks: --gpus stays"),
]


@pytest.mark.parametrize(("message", "line"), FLAGGED)
def test_the_cli_says_a_named_parameter_as_its_flag(message: str, line: str) -> None:
    root = typer.main.get_command(app)
    assert flagged(message, options_of(root)) == line


def test_every_option_is_said_as_its_own_flag() -> None:
    """The table is read from the Typer options: each option's name in backticks becomes its first long flag."""
    root = typer.main.get_command(app)
    options = options_of(root)
    assert len(options) > 60 and options["json_out"][0] == "--json" and options["sp"][:2] == ("--sp", "--no-sp")
    todo = [root]
    for command in todo:
        todo.extend(getattr(command, "commands", {}).values())
        for param in command.params:
            if isinstance(param, typer.core.TyperOption):
                assert flagged(f"`{param.name}`", options_of(command)) == param.opts[0], param.name


def test_a_library_error_is_said_in_the_running_commands_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """Inside a command (a Click context), handled says `name` as the flag; outside any, as written."""

    def command() -> None:
        raise SpecError("`gpus` (12) must be divisible by `tp=8`")

    with pytest.raises(typer.Exit):
        handled(command)()
    assert capsys.readouterr().err == "autopar: error: `gpus` (12) must be divisible by `tp=8`\n"
    r = runner.invoke(app, ["serve", "estimate", "llama3-8b", "--gpus", "8", "--tp", "4", "--prefill-workers", "1"])
    assert (r.exit_code, r.stderr) == (2, "autopar: error: --prefill-workers needs --mode disagg\n")


ROOT_OPTIONS = options_of(typer.main.get_command(app))
VALUED = sorted(name for name, (_, _, switch) in ROOT_OPTIONS.items() if not switch)


@given(
    before=st.text(alphabet=st.characters(blacklist_characters="`")),
    name=st.sampled_from(VALUED),
    value=st.text(alphabet=st.characters(blacklist_characters="`"), min_size=1),
)
def test_a_setting_becomes_its_flag_and_value_and_the_rest_stays(before: str, name: str, value: str) -> None:
    assert flagged(before, ROOT_OPTIONS) == before
    assert flagged(f"{before}`{name}={value}`{before}", ROOT_OPTIONS) == f"{before}{ROOT_OPTIONS[name][0]} {value}{before}"
