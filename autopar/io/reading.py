"""Safe reading of input files: regular files only, bounded in size, depth and aliases.

Every input file (model specs, profiles, distributions, HF configs) comes through
here. The rules, each a one-line error naming the file:

- only regular files: a FIFO, device, socket or directory is refused before a
  byte is read (a FIFO is opened non-blocking, so it cannot hang);
- at most ``cap`` bytes (``MAX_SPEC_BYTES`` for specs and profiles) are read;
- text is UTF-8, with or without a byte-order mark;
- YAML is read with a safe loader that refuses tags that build Python objects,
  duplicate keys, nesting deeper than ``MAX_DEPTH`` and more than ``MAX_NODES``
  values once aliases are expanded (an alias bomb is refused, never expanded);
- JSON likewise: duplicate keys and nesting are refused; ``NaN`` and ``Infinity``
  become :class:`JsonConstant` texts, refused as a number wherever one is read;
- in both, a text that is not Unicode (a lone surrogate written as ``"\\udc80"``,
  which no output could print) is refused, naming its field.

Values quoted in messages go through :func:`shown` (bounded, newlines escaped:
one short line whatever the input); spec/text.py `printable` escapes terminal
control characters in everything autopar prints.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from autopar.errors import AutoparError, SpecError
from autopar.io.bounds import MAX_DEPTH, MAX_NODES, MAX_SPEC_BYTES, Refused, named, one_line, shown
from autopar.spec.text import printable

__all__ = ["MAX_DEPTH", "MAX_NODES", "MAX_SPEC_BYTES", "named", "one_line", "printable", "shown"]  # re-exported


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


_INPUTS: dict[tuple[int, int], str] = {}  # (device, inode) of every file read by this command -> as named


_RECORDING: list[list[tuple[str, bytes]]] = []  # lists that every file read is added to (io/cache.py)


def recorded() -> list[tuple[str, bytes]]:
    """Start recording (absolute path, bytes) of each file read, into the list returned; `unrecord` stops."""
    files: list[tuple[str, bytes]] = []
    _RECORDING.append(files)
    return files


def unrecord(files: list[tuple[str, bytes]]) -> None:
    _RECORDING.remove(files)


def forget_inputs() -> None:
    """Start a new command: no file has been read yet (cli/run.py `run`)."""
    _INPUTS.clear()


def input_named(path: Path | str) -> str | None:
    """The name under which this command read the file at `path` (the same file by device and inode, whatever
    path, symlink or hard link names it), or None if it read no such file."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _INPUTS.get((info.st_dev, info.st_ino))


def read_bytes(path: Path, *, cap: int = MAX_SPEC_BYTES, err: type[AutoparError] = SpecError) -> bytes:
    """The bytes of the regular file `path`, at most `cap` of them."""
    where = named(path)
    if not str(path):
        raise err("empty file name")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise err(f"{where}: file not found") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO nobody writes to on some systems
            raise err(f"{where}: is not a regular file; autopar reads only regular files") from None
        raise err(f"{where}: cannot read ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise err(f"{where}: is a directory, expected a file")
        if not stat.S_ISREG(mode):
            raise err(f"{where}: is {_kind(mode)}; autopar reads only regular files")
        info = os.fstat(fd)
        size = info.st_size
        _INPUTS[(info.st_dev, info.st_ino)] = str(path)
        if size > cap:
            raise err(f"{where}: file is {size:,} bytes; the limit is {cap:,} bytes")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:  # it grew while we read
                raise err(f"{where}: file is over the limit of {cap:,} bytes")
        data = b"".join(chunks)
        for files in _RECORDING:  # io/cache.py: what a value kept between runs was built from
            files.append((os.path.abspath(path), data))
        return data
    except OSError as exc:
        raise err(f"{where}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_text(path: Path, *, cap: int = MAX_SPEC_BYTES, err: type[AutoparError] = SpecError) -> str:
    """Read a UTF-8 text file (a byte-order mark is dropped); unreadable or empty files are errors."""
    raw = read_bytes(path, cap=cap, err=err)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise err(f"{named(path)}: not UTF-8 text (bad byte at offset {exc.start})") from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise err(f"{named(path)}: file is empty")
    return text


# --- YAML --------------------------------------------------------------------------


SHIPPED = Path(__file__).resolve().parent.parent / "data"  # autopar/data: the presets, profiles and stacks we ship


# --- JSON --------------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise Refused(f"duplicate key {shown(key)}")
        out[key] = value
    return out


class JsonConstant(str):
    """NaN, Infinity or -Infinity in JSON text (not JSON, but transformers writes them: Mamba2Config's
    time_step_limit). Kept as this marker, a text, so that a key nobody reads does not matter and a number
    that is read is refused naming its field (autopar.io.schema.describe)."""


_VALUE_KINDS: tuple[tuple[type, str], ...] = (
    (type(None), "nothing (null)"),
    (bool, "true/false"),
    (int, "a number"),
    (float, "a number"),
    (str, "text"),
    (list, "a list"),
    (dict, "a mapping"),
)


def kind_of(value: Any) -> str:
    """What a value read from a file is, in the file's words rather than Python's type names."""
    if isinstance(value, JsonConstant):
        return str(value)
    return next((name for t, name in _VALUE_KINDS if isinstance(value, t)), type(value).__name__)


def _no_constant(name: str) -> Any:
    return JsonConstant(name)


def _check_shape(data: Any) -> None:
    """Depth and size of a parsed JSON value, without recursion."""
    stack, count = [(data, 1)], 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise Refused(f"nested deeper than {MAX_DEPTH} levels")
        if count > MAX_NODES:
            raise Refused(f"more than {MAX_NODES:,} values")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _texts(data: Any, *, paths: bool) -> str | None:
    """The field (`paths`: its dotted path) of the first key or text that is not Unicode, or None."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and not _unicode(value):
                return path or "the top level"
        elif isinstance(value, dict):
            for key, item in value.items():
                name = str(key).encode("ascii", "backslashreplace").decode("ascii") if paths else ""
                name = f"{path}.{one_line(name, 60)}" if path else one_line(name, 60)
                if isinstance(key, str) and not key.isascii() and not _unicode(key):
                    return name
                stack.append((item, name))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]" if paths else "") for i, item in enumerate(value))
    return None


def _check_unicode(data: Any) -> Any:
    if _texts(data, paths=False) is not None:  # the fast pass builds no names
        raise Refused(f"{_texts(data, paths=True)}: text is not valid Unicode (a lone surrogate such as \\udc80)")
    return data


def parse(text: str, *, json_text: bool, shipped: bool = False) -> Any:
    """YAML or JSON text to plain values; raises ValueError with a one-line reason. `shipped`: the text of
    a file of autopar/data (parsed faster, to the same values)."""
    return _check_unicode(_parse(text, json_text=json_text, shipped=shipped))


def _parse(text: str, *, json_text: bool, shipped: bool = False) -> Any:
    if json_text:
        try:
            data = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
        except RecursionError:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"malformed JSON at line {exc.lineno}: {exc.msg}") from None
        _check_shape(data)
        return data
    from autopar.io.yaml_text import parse_yaml  # yaml: only once a YAML file is parsed

    return parse_yaml(text, shipped=shipped)


def load_mapping(path: Path, *, err: type[AutoparError] = SpecError, cap: int = MAX_SPEC_BYTES) -> dict[str, Any]:
    """Load a YAML or JSON file whose top level must be a mapping."""
    text = read_text(path, err=err, cap=cap)
    try:
        data = parse(text, json_text=path.suffix.lower() == ".json", shipped=path.resolve().is_relative_to(SHIPPED))
    except ValueError as exc:  # also int() of a number with thousands of digits
        text = str(exc)
        if "integer string conversion" in text:
            text = "a number has more than 4,300 digits"
        raise err(f"{named(path)}: {one_line(text, 160)}") from None
    if not isinstance(data, dict):
        raise err(f"{named(path)}: expected a mapping of fields at the top level, got {kind_of(data)}")
    return data


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    starting = [c for c in choices if word and c.startswith(word)]  # 'h200' -> 'h200-sxm' before 'b200'
    close = starting if len(starting) == 1 else difflib.get_close_matches(word[:100], list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
