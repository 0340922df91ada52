"""``--save-dir DIR``: write a set of named files into a folder, each atomically.

The folder is made when missing (with its parents); a path that exists and is not a folder, or a
folder that cannot be made or written in, is refused before anything is written (exit 2, as an
unwritable --plot or --emit-out path is). Each file goes through ``write_atomic``, so a reader
never sees half a file; a file that cannot be written (permissions, a full disk) is an
:class:`OutputError` (exit 3) naming it, and files written before it stay.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from autopar.errors import OutputError, SpecError
from autopar.io.files import write_atomic
from autopar.io.reading import named

OPTION = "`save_dir`"


def save_files(folder: Path, files: Mapping[str, str], *, executable: frozenset[str] = frozenset()) -> list[Path]:
    """Write ``files`` (name -> text) into ``folder``; the paths written, in order."""
    if folder.exists() and not folder.is_dir():
        raise SpecError(f"{OPTION} {named(folder)}: exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"{OPTION} {named(folder)}: cannot make the folder: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SpecError(f"{OPTION} {named(folder)}: cannot write in the folder: permission denied")
    written = []
    for name, text in files.items():
        path = folder / name
        write_atomic(path, text, option=OPTION, executable=name in executable, err=OutputError)
        written.append(path)
    return written
