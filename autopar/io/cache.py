"""The values autopar's own data files give, kept between runs: a command whose inputs are all built-in
(a preset, a hardware profile, a stack, a framework, the error model) imports neither pydantic nor yaml.

Reading a built-in through pydantic costs about 125 ms of a 0.45 s `suggest` (its import, its plugin
loader, building the format models; docs/performance.md "Start-up"). The first run reads the file as
always and keeps the frozen value it built (a pickle) in a per-user folder; later runs read the value
back after checking that every file it was built from has the bytes it had (a BLAKE2b digest of each),
so an edited data file is read again. Where:

- $AUTOPAR_CACHE, else $XDG_CACHE_HOME/autopar, else ~/.cache/autopar (XDG Base Directory spec); no
  home, a folder that cannot be made or written, a path that is a file, a FIFO or a device: no cache,
  the value is built as without one (silently: the cache only saves time). AUTOPAR_CACHE=/dev/null
  turns it off.
- An entry's name holds the kind, the built-in name, where autopar/data is and the size and mtime of
  every module of io/ and spec/ (the code that builds the values and their classes): another checkout,
  another version or an edited loader uses other entries. autopar's version itself is not read: that
  is importlib.metadata, 37 ms.
- Never trusted blindly: an entry is read only if it is a regular file (not followed through a
  symlink) of this user, writable by no one else, at most MAX_ENTRY_BYTES; it is unpickled with only
  autopar.spec's dataclasses and enums as classes (no other callable can be named), and must give a
  value of the type asked for; anything else (truncated, corrupt, stale) is ignored and rewritten.
- Written atomically (io/files.py write_atomic), mode 0600, in a folder made 0700.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import os
import pickle
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from autopar.errors import AutoparError
from autopar.io.files import xdg_folder
from autopar.io.reading import SHIPPED, read_bytes, recorded, unrecord

ENV = "AUTOPAR_CACHE"
FORMAT = 1  # of an entry: (FORMAT, ((absolute path, digest), ...), value)
MAX_ENTRY_BYTES = 2**20  # the largest entry, a measured hardware profile, is about 20 KB
_CODE = Path(__file__).resolve().parent.parent  # autopar/
_SOURCES = ("io", "io/schema", "spec")  # the modules that build the values and define their classes
T = TypeVar("T")

try:  # BLAKE2 without hashlib, whose import loads OpenSSL (15 ms)
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - CPython always builds _blake2
    from hashlib import blake2b as _blake2b


def cache_dir() -> Path | None:
    """$AUTOPAR_CACHE, else $XDG_CACHE_HOME/autopar, else ~/.cache/autopar; None when there is no home."""
    return xdg_folder(ENV, "XDG_CACHE_HOME", ".cache")


def _digest(data: bytes) -> str:
    return _blake2b(data, digest_size=16).hexdigest()


_CODE_SEEN: list[str] = []  # _code() once per process


def _code() -> str:
    """The size and mtime of every module of `_SOURCES`: a changed module changes every entry's name."""
    if _CODE_SEEN:
        return _CODE_SEEN[0]
    parts = []
    for sub in _SOURCES:
        with os.scandir(_CODE / sub) as found:
            for entry in found:
                if entry.name.endswith(".py"):
                    info = entry.stat()
                    parts.append(f"{sub}/{entry.name} {info.st_size} {info.st_mtime_ns}")
    _CODE_SEEN.append("\n".join(sorted(parts)))
    return _CODE_SEEN[0]


def _entry(folder: Path, kind: str, name: str) -> Path:
    key = _digest(f"{FORMAT}\n{kind}\n{name}\n{SHIPPED}\n{_code()}".encode("utf-8", "backslashreplace"))
    return folder / f"{kind}-{key}.pickle"


def builtin(kind: str, name: str, expect: type[T], build: Callable[[], T]) -> T:
    """The value `build()` gives for built-in `name` of `kind` (a preset, a profile...): from the cache when an
    entry for it is there and every file it was built from is unchanged, else built (and kept)."""
    folder = cache_dir()
    if folder is None:
        return build()
    try:
        entry = _entry(folder, kind, name)
    except OSError:  # autopar's own folders unreadable
        return build()
    kept = _read(entry, expect)
    if kept is not None:
        return kept
    files = recorded()
    try:
        value = build()
    finally:
        unrecord(files)
    _write(folder, entry, files, value)
    return value


class _Values(pickle.Unpickler):
    """An unpickler that names only autopar.spec's dataclasses and enums: a pickle can build spec values (as
    a data file can) and call nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("autopar.spec.") and name.isidentifier():
            found = super().find_class(module, name)
            if isinstance(found, type) and (dataclasses.is_dataclass(found) or issubclass(found, enum.Enum)):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not a spec value")


def _read(entry: Path, expect: type[T]) -> T | None:
    """The value kept at `entry` if it can be trusted and its files are unchanged, else None."""
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022 or info.st_size > MAX_ENTRY_BYTES:
            return None
        raw = os.read(fd, MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        version, files, value = _Values(io.BytesIO(raw)).load()
        if version != FORMAT or not isinstance(value, expect) or not files:
            return None
        for path, digest in files:  # read as the loader would read them: each is an input of this command
            if _digest(read_bytes(Path(path))) != digest:
                return None
    except Exception:  # any fault (AutoparError included) of a kept file: build the value again
        return None
    return value


def _write(folder: Path, entry: Path, files: list[tuple[str, bytes]], value: object) -> None:
    """Keep `value` at `entry` (atomically, 0600); any fault leaves the cache as it was, silently."""
    from autopar.io.files import write_atomic

    try:
        data = pickle.dumps((FORMAT, tuple((path, _digest(raw)) for path, raw in files), value), protocol=pickle.HIGHEST_PROTOCOL)
        if not files or len(data) > MAX_ENTRY_BYTES:
            return
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.path.islink(entry) or (os.path.lexists(entry) and not entry.is_file()):
            os.unlink(entry)  # a link or a special file in our place: replaced, never followed or written into
        write_atomic(entry, data, option=ENV)
        os.chmod(entry, 0o600)
    except (AutoparError, OSError, pickle.PicklingError, TypeError, AttributeError):
        return
