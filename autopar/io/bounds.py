"""The bounds every input file is read within, and how a value or a path is quoted in a message: shared by
io/reading.py (the files) and io/yaml_text.py (the YAML parser), which imports neither yaml nor pydantic
for the other."""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Any

from autopar.spec.text import printable

MAX_SPEC_BYTES = 4 * 2**20  # model specs, HF configs, hardware profiles, histogram files (built-ins: about 12 KB)
MAX_DEPTH = 32  # nesting of lists and mappings (a measured profile uses 6)
MAX_NODES = 200_000  # values in one file, aliases expanded (a measured profile has about 5,000)
_SHOWN = 60  # characters of a value quoted in a message

_repr = reprlib.Repr()
_repr.maxstring = _SHOWN
_repr.maxother = _SHOWN
_repr.maxlong = 40
_repr.maxlist = _repr.maxtuple = _repr.maxset = 6
_repr.maxdict = 4
_repr.maxlevel = 2


def shown(value: Any) -> str:
    """A bounded, one-line repr of `value` for a message."""
    text = _repr.repr(value)
    return one_line(text)


def one_line(text: str, limit: int = 300) -> str:
    """`text` with line breaks and control characters escaped, cut to `limit` characters."""
    text = printable(text.replace("\r", "\\r").replace("\n", "\\n"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def named(path: Path | str) -> str:
    """A path as it appears in messages: newlines escaped, long paths shortened."""
    return one_line(str(path), 160)


class Refused(ValueError):
    """A structural limit of the safe loaders, with the line it was hit on."""
