"""The one runner of the CLI: every failure is one line on stderr with a documented exit code.

Exit codes (README, "Exit codes"):

    0  success
    1  no plan fits the job (the message says what the smallest plan needs), or the plan
       `estimate` was given does not fit (after its breakdown, which says by how much)
    2  bad input: a usage error, a bad file, a bad value (one line naming it)
    3  the output could not be written: stdout closed, a full disk, or a
       terminal encoding that cannot show the text (set PYTHONIOENCODING=utf-8)
  130  interrupted (Ctrl-C)

A reader that stops early (``| head``) is not an error: the rest is dropped
without a word and the exit code is 0.

stderr is best effort: a message that cannot be written there (``2>/dev/full``,
a closed pipe) is lost, and the exit code stays the command's own.

Usage errors (an unknown option, a bad number) are one line too, not the boxed
panel Click and Typer draw by default. Inside a command, :func:`handled` turns a
library error into its line and exit code; :func:`run` catches what is raised
outside any command (Click's usage errors, Ctrl-C, a closed stdout). Both say
the parameters a library message names (`gpus`) as flags (--gpus): :func:`flagged`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

from autopar.errors import AutoparError, OutputError

if TYPE_CHECKING:
    from rich.console import Console

P = ParamSpec("P")
R = TypeVar("R")

EXIT_USAGE = 2
EXIT_OUTPUT = OutputError.exit_code
EXIT_INTERRUPTED = 130


def say(text: str) -> None:
    """One line on stderr, even when stderr itself is broken (then nothing)."""
    from autopar.io.reading import one_line

    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.write(2, (one_line(text, 2000) + "\n").encode("utf-8", "backslashreplace"))


# a parameter a library message names (autopar/errors.py): `name`, `name=value` or `prefix_*`
_NAMED = re.compile(r"`([a-z][a-z0-9_]*)(\*?)(?:=([^`]*))?`")


Options = dict[str, tuple[str, str | None, bool]]  # parameter name -> (flag, its --no- form, is a switch)


def options_of(*commands: Any) -> Options:
    """The Typer options of Click `commands` and of the commands under them (a group's); the first to name one wins."""
    out: Options = {}
    todo = list(commands)
    for one in todo:  # breadth first: a command's own options before those of the commands under it
        todo.extend(getattr(one, "commands", {}).values())
        for param in one.params:
            flags = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
            if flags and type(param).__name__.endswith("Option"):
                off = [o for o in param.secondary_opts if o.startswith("--")]
                out.setdefault(param.name, (flags[0], off[0] if off else None, bool(param.is_flag)))
    return out


# the whole app, when `run` was given one cut to the command that runs (cli/__init__.py main)
_WHOLE: list[Any] = []


def _every() -> list[Any]:
    """The Click commands of the whole app, where `run` was given one cut to a command; none otherwise."""
    from typer.main import get_command

    return [get_command(whole) for whole in _WHOLE]


def _current() -> Options:
    """The options of the running command first, then those of every other command of the app."""
    import importlib

    clicks = _usage_error().__module__.rpartition(".")[0]  # click, or the copy this Typer bundles
    ctx = importlib.import_module(f"{clicks}.globals").get_current_context(silent=True)
    return {} if ctx is None else options_of(ctx.command, ctx.find_root().command, *_every())


def _flag(match: re.Match[str], options: Options) -> str:
    name, wild, value = match.groups()
    if wild:  # `slurm_*`: the options that start so
        flag = next((f for n, (f, _, _) in options.items() if n.startswith(name)), None)
        return match[0] if flag is None else flag[: 2 + len(name)] + "*"
    if name not in options:
        return match[0]
    flag, off, switch = options[name]
    if value is None or (switch and value == "True"):
        return flag
    if switch and value == "False" and off:
        return off
    return f"{flag} {value}"


def flagged(text: str, options: Options | None = None) -> str:
    """A library message in the CLI's terms: each parameter it names in backticks said as its flag
    (`gpus` -> --gpus, `mode=disagg` -> --mode disagg, `sp=False` -> --no-sp, `slurm_*` -> --slurm-*).
    `options`: those of the running command (default), read from its Typer options, so the names cannot
    drift from the flags. A name that is no option stays as written."""
    if "`" not in text:
        return text
    known = _current() if options is None else options
    return _NAMED.sub(lambda m: _flag(m, known), text)


def fail(exc: AutoparError) -> NoReturn:
    """A library error inside a command: its one line on stderr, in flags, then its exit code."""
    import typer

    from autopar.render.text import error

    text = flagged(str(exc))
    error(text if len(text) <= 2000 else text[:1999] + "…")  # one line piped, whatever a name or path holds
    raise typer.Exit(exc.exit_code)


def handled(command: Callable[P, R]) -> Callable[P, R]:
    """`command` with every AutoparError it raises said by :func:`fail` (the signature and help stay its own)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except AutoparError as exc:
            fail(exc)

    return wrapper


def console() -> Console:
    """The stdout console of every command: 80 columns piped, at most 80 on a terminal."""
    from autopar.render.text import console as make

    return make()


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null, so that the interpreter's last flush cannot fail again."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


class _BestEffort:
    """sys.stderr that never raises: a line that cannot be written is dropped (see the module docstring)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... for rich and Click
        return getattr(self._stream, name)


def _usage_error() -> type[Exception]:
    """Click's UsageError, wherever this Typer keeps Click (bundled since 0.22, a dependency before)."""
    import typer

    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


# pydantic's error types (Typer >= 0.22 coerces option values with a TypeAdapter) -> our words
_PYDANTIC = {
    "int_parsing": "expected a whole number, got {input!r}",
    "int_from_float": "expected a whole number, got {input!r}",
    "float_parsing": "expected a number, got {input!r}",
    "bool_parsing": "expected true or false, got {input!r}",
    "greater_than_equal": "must be at least {ge}, got {input}",
    "less_than_equal": "must be at most {le}, got {input}",
    "greater_than": "must be more than {gt}, got {input}",
    "less_than": "must be less than {lt}, got {input}",
}


def _message(exc: Any) -> str:
    """Click's message, with a pydantic validation text (``Input should be greater than or equal to 1``)
    said as the other messages are (``must be at least 1, got 0``)."""
    text = str(exc.format_message())
    raw, errors = getattr(exc, "message", None), getattr(exc.__cause__, "errors", None)
    try:
        first = errors()[0] if callable(errors) else {}
        form = _PYDANTIC.get(first.get("type", ""))
        if form is not None and raw and raw in text:
            return text.replace(raw, form.format(input=first.get("input"), **(first.get("ctx") or {})), 1)
    except (KeyError, IndexError, TypeError, ValueError):  # another pydantic shape: its own words, as given
        pass
    return text


def _usage(exc: Any) -> int:
    if type(exc).__name__ == "NoArgsIsHelpError":  # plain `autopar`: the help on stdout, nothing on stderr
        # Typer's rich help printed itself when the error was made (ctx.get_help, which then returns ""), where
        # show() would add an empty line on stderr; a plain Click help is the message itself
        if text := exc.format_message().strip():
            print(text)
        return EXIT_USAGE
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    say(f"autopar: error: {_message(exc)}{where}")
    return EXIT_USAGE


def run(app: Any, whole: Any = None) -> NoReturn:
    """Call the Typer `app` and exit with the code the table above gives. `whole`: the app with every
    command, where `app` holds only the one that runs; messages name the flags of all of them."""
    from typer import Abort
    from typer.main import get_command

    usage_error = _usage_error()
    _WHOLE[:] = [] if whole is None or whole is app else [whole]

    if sys.stdout is None:  # started with stdout closed (`autopar ... >&-`): nothing could be shown
        say("autopar: error: stdout is closed; nothing can be printed")
        sys.exit(EXIT_OUTPUT)
    if sys.stderr is not None and not isinstance(sys.stderr, _BestEffort):
        sys.stderr = _BestEffort(sys.stderr)
    reading = sys.modules.get("autopar.io.reading")  # no file is read before it is imported: `--help` loads no YAML
    if reading is not None:
        reading.forget_inputs()
    try:
        rv = app(prog_name="autopar", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
        if code == EXIT_INTERRUPTED:  # Typer turns Ctrl-C into Exit(130) before it reaches the handler below
            say("autopar: interrupted")
        sys.stdout.flush()
    except SystemExit:
        if type(sys.stdout).__name__ != "PacifyFlushWrapper":  # Click's own handling of a broken pipe (exit 1)
            raise
        _silence_stdout()
        code = 0  # the reader stopped early (| head)
    except OutputError as exc:
        _silence_stdout()
        say(f"autopar: error: {flagged(str(exc), options_of(get_command(app), *_every()))}")
        code = EXIT_OUTPUT
    except AutoparError as exc:  # raised while rendering, outside a command's own handler (render/answer.py)
        say(f"autopar: error: {flagged(str(exc), options_of(get_command(app), *_every()))}")
        code = exc.exit_code
    except usage_error as exc:
        code = _usage(exc)
    except (Abort, KeyboardInterrupt):
        say("autopar: interrupted")
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        code = 0
    except UnicodeEncodeError as exc:
        _silence_stdout()
        say(
            f"autopar: error: the output encoding ({exc.encoding}) cannot show {exc.object[exc.start : exc.end]!a}; "
            "set PYTHONIOENCODING=utf-8 or a UTF-8 locale"
        )
        code = EXIT_OUTPUT
    except RuntimeError as exc:  # pathlib's Path.home(), in Typer's --install-completion
        if "home directory" not in str(exc):
            raise
        say("autopar: error: no home folder (HOME is not set and this uid has no passwd entry): set HOME to install shell completion")
        code = EXIT_USAGE
    except OSError as exc:  # writing stdout: a full disk, an I/O error
        _silence_stdout()
        say(f"autopar: error: cannot write the output: {exc.strerror or exc}")
        code = EXIT_OUTPUT
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # already reported (a command's own error line), or nothing left to say
        _silence_stdout()
    sys.exit(code)
