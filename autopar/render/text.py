"""Output fits 80 columns: the one console, the one prose wrap, the one table style, the one shell wrap.

Every human-readable line autopar prints goes through here. Piped or captured output is
WIDTH columns wide; on a terminal, the terminal's width up to WIDTH. Prose wraps at word
boundaries with its continuation lines indented; tables are compact (no vertical rules, one
space of padding) and numeric columns never wrap; shell commands break before an option with
`` \\`` and an indented continuation, so that a printed command still pastes and runs.
Below MIN_WIDTH columns (COLUMNS=0 or 1, a tiny pane) lines are laid out MIN_WIDTH wide and the
terminal wraps them. Terminal control characters in anything printed are escaped
(io/reading.py's `printable`), so an input's name cannot drive the terminal.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from autopar.errors import broken_pipe
from autopar.spec.text import printable

WIDTH = 80
MIN_WIDTH = 40  # the narrowest layout: a narrower terminal wraps it (a width of 0 or 1 would never end a wrap)
INDENT = 2  # continuation lines of wrapped prose
SHELL_INDENT = "    "  # continuation lines of a wrapped command


def columns(terminal: int | None) -> int:
    """The width output is laid out to: WIDTH piped (None), else the terminal's between MIN_WIDTH and WIDTH."""
    return WIDTH if terminal is None else max(MIN_WIDTH, min(terminal, WIDTH))


def floor_columns() -> None:
    """Raise a COLUMNS below MIN_WIDTH to MIN_WIDTH, for the consoles autopar does not make (Typer's --help)."""
    value = os.environ.get("COLUMNS", "")
    if value.strip().isdigit() and int(value) < MIN_WIDTH:
        os.environ["COLUMNS"] = str(MIN_WIDTH)


def _escaped(cell: RenderableType | None) -> RenderableType | None:
    """A table cell with its control characters escaped before the table measures it (a `str`, or a `Text`
    rebuilt in its base style: only input with control characters loses its inner styles)."""
    if isinstance(cell, str):
        return printable(cell)
    if isinstance(cell, Text) and printable(cell.plain) != cell.plain:
        return Text(printable(cell.plain), style=cell.style)
    return cell


class _Table(Table):
    """A Table whose cells are escaped when added, so that widths are measured on what is printed."""

    def add_row(self, *renderables: RenderableType | None, **kwargs: Any) -> None:
        super().add_row(*(_escaped(r) for r in renderables), **kwargs)


class _Escaping(Console):
    """A Console whose text segments go through `printable`: every table cell, line and command it prints."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for seg in super().render(renderable, options):
            yield seg if seg.control or not seg.text else Segment(printable(seg.text), seg.style)


def console(*, stderr: bool = False) -> Console:
    """A console WIDTH columns wide (narrower on a narrower terminal), with no soft wrapping of its own."""
    out = _Escaping(highlight=False, soft_wrap=True, stderr=stderr)
    out.width = columns(out.width if out.is_terminal else None)
    setattr(out, "on_broken_pipe", broken_pipe)  # rich would exit 1 silently; cli/run.py ends with 0  # noqa: B010
    return out


def wrap(text: str | Text, *, width: int = WIDTH, indent: int = INDENT, markup: bool = True) -> list[Text]:
    """`text` broken at spaces into lines of at most `width` cells; lines after the first indented by `indent`.

    A word longer than a line is cut where the line ends. Styles (rich markup) survive the cuts. Control
    characters in a `str` are escaped first. Every line has room for a character, so the wrap ends.
    """
    width = max(width, indent + 1)
    if isinstance(text, str):
        text = printable(text)
    t = text if isinstance(text, Text) else (Text.from_markup(text) if markup else Text(text))
    plain = t.plain
    if "\n" in plain:
        out: list[Text] = []
        start = 0
        for part in plain.split("\n"):
            out += wrap(t[start : start + len(part)], width=width, indent=indent)
            start += len(part) + 1
        return out
    cuts: list[int] = []  # offsets where a new line starts
    line_start, room, words = 0, width, 0
    for word in re.finditer(r"\S+", plain):
        start, end = word.span()
        if words and cell_len(plain[line_start:end]) > room:
            cuts.append(start)
            line_start, room, words = start, width - indent, 0
        while cell_len(plain[line_start:end]) > room:  # one word longer than the line: cut it
            cut = line_start + max(1, _fit(plain[line_start:end], room))
            cuts.append(cut)
            line_start, room = cut, width - indent
        words += 1
    lines = t.divide(cuts)
    result = []
    for i, line in enumerate(lines):
        line.rstrip()
        if i:
            line = Text(" " * indent) + line
        result.append(line)
    return result


def _fit(text: str, room: int) -> int:
    """How many characters of `text` fit in `room` cells."""
    used = 0
    for i, char in enumerate(text):
        used += cell_len(char)
        if used > room:
            return i
    return len(text)


def say(out: Console, text: str | Text, *, indent: int = INDENT, markup: bool = True) -> None:
    """Print prose wrapped to the console's width."""
    for line in wrap(text, width=out.width, indent=indent, markup=markup):
        out.print(line, soft_wrap=True)


def error(message: str, *, terminal: bool | None = None) -> None:
    """`autopar: error: MESSAGE` on stderr: one line when stderr is piped (logs and scripts read one line
    per error), wrapped at words to the width on a terminal. Newlines in the message are escaped."""
    err = console(stderr=True)
    text = "autopar: error: " + printable(message.replace("\r", "\\r").replace("\n", "\\n"))
    if err.is_terminal if terminal is None else terminal:
        say(err, text, markup=False)
    else:
        print(text, file=sys.stderr)


def table(*columns: str, title: str | None = None, left: Iterable[str] = (), wrap: Iterable[str] = ()) -> Table:
    """A compact table: a rule under the header, no vertical lines, one space each side of a column.

    Columns named in `left` are left-justified, the others (numbers) right-justified; only columns named
    in `wrap` may wrap their cells when the table would be wider than the console."""
    lefts, wraps = set(left), set(wrap)
    t = _Table(
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        title_justify="left",
        title_style="",
        header_style="bold",
    )
    for name in columns:
        t.add_column(
            name, justify="left" if name in lefts else "right", no_wrap=name not in wraps, overflow="fold"
        )  # never "…": a cell too narrow folds, nothing is cut
    return t


# --- shell commands --------------------------------------------------------------------------------


def shell_words(line: str) -> list[str]:
    """`line` split at the spaces the shell splits at, each word kept as written (quotes and all)."""
    return _scan(line)[0]


def _scan(line: str, quote: str = "") -> tuple[list[str], str]:
    """The words of `line` (starting inside `quote`, if given) and the quote still open at its end."""
    words: list[str] = []
    word: list[str] = []
    escaped = False
    for char in line:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == " ":
            if word:
                words.append("".join(word))
                word = []
            continue
        word.append(char)
    if word:
        words.append("".join(word))
    return words, quote


def _items(words: Sequence[str], longest: int) -> list[str]:
    """Words grouped so that an option stays with its value (`--tp-size 8` is one item) where the two fit
    in `longest` columns."""
    items: list[str] = []
    for word in words:
        operator = word in ("&", "&&", ";", "|")  # it ends the line it follows
        value = (
            (
                items[-1].startswith("-")
                and " " not in items[-1]
                and not word.startswith("-")
                and cell_len(items[-1]) + 1 + cell_len(word) <= longest
            )
            if items
            else False
        )
        if items and (operator or value):
            items[-1] += " " + word
        else:
            items.append(word)
    return items


def shell_lines(line: str, *, width: int = WIDTH) -> list[str]:
    """One shell line as continued lines of at most `width` columns where it can.

    Breaks go between items (an option with its value, or one word), outside quotes, where the shell
    reads `` \\``-newline as a plain word break; continuation lines are indented; `&` stays on its line.
    Comments wrap as comments. An item longer than a line stays whole."""
    if cell_len(line) <= width:
        return [line]
    if line.startswith("#"):
        return ["# " + t.plain for t in wrap(line[1:].lstrip(), width=width - 2, indent=0, markup=False)]
    lead = line[: len(line) - len(line.lstrip(" "))]  # a continued line of a script keeps its own indent
    items = _items(shell_words(line), width - 2 - len(lead) - len(SHELL_INDENT))
    out: list[str] = []
    current = ""
    for i, item in enumerate(items):
        room = width - len(lead) - (len(SHELL_INDENT) if out else 0) - (2 if i < len(items) - 1 else 0)  # 2: " \\"
        if current and cell_len(current) + 1 + cell_len(item) > room:
            out.append(current)
            current = item
        else:
            current = f"{current} {item}" if current else item
    out.append(current)
    return [lead + (SHELL_INDENT if i else "") + part + (" \\" if i < len(out) - 1 else "") for i, part in enumerate(out)]


def shell_text(text: str, *, width: int = WIDTH) -> str:
    """Every line of a shell script wrapped by `shell_lines`, except the bodies of here-documents and lines
    that start inside a quoted string (an sbatch script's ``bash -c '...'`` body stays as written)."""
    out: list[str] = []
    end: str | None = None
    quote = ""
    for line in text.split("\n"):
        if end is not None:
            out.append(line)
            if line == end:
                end = None
            continue
        out += shell_lines(line, width=width) if not quote else [line]
        quote = quote if line.lstrip().startswith("#") and not quote else _scan(line, quote)[1]
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)'?\"?\s*$", line)
        if heredoc and not quote:
            end = heredoc.group(1)
    return "\n".join(out)
