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
import reprlib
import stat
from pathlib import Path
from typing import Any

import yaml

from autopar.errors import AutoparError, SpecError
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


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


_INPUTS: dict[tuple[int, int], str] = {}  # (device, inode) of every file read by this command -> as named


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
        return b"".join(chunks)
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


class _Refused(ValueError):
    """A structural limit of the safe loader, with the line it was hit on."""


class _Loader(yaml.SafeLoader):
    """yaml.SafeLoader that bounds depth and values, and refuses duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        self._nodes += 1
        if self._depth > MAX_DEPTH or self._nodes > MAX_NODES:
            mark = self.peek_event().start_mark
            what = f"nested deeper than {MAX_DEPTH} levels" if self._depth > MAX_DEPTH else f"more than {MAX_NODES:,} values"
            raise _Refused(f"{what} (at line {mark.line + 1})")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        _no_duplicates(self, node)
        return super().construct_mapping(node, deep=deep)


def _no_duplicates(loader: Any, node: Any) -> None:
    """Refuse a mapping that repeats a key (YAML 1.2 forbids it; PyYAML keeps the last)."""
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: the constructor reports it
            if duplicate:
                raise _Refused(f"duplicate key {shown(key)} (at line {key_node.start_mark.line + 1})")


def _expanded(node: Any) -> int:
    """Values in the document with every alias expanded (each shared node counted once per use)."""
    sizes: dict[int, int] = {}

    def size(n: Any) -> int:
        got = sizes.get(id(n))
        if got is not None:
            return got
        if isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(c) for c in n.value)
        elif isinstance(n, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        else:
            total = 1
        sizes[id(n)] = min(total, MAX_NODES + 1)
        return sizes[id(n)]

    return size(node)  # depth is bounded by the composer, so this recursion is too


_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_VALUE = (yaml.ScalarEvent, yaml.AliasEvent, *_OPEN)


def _precheck(text: str) -> None:
    """Depth and values counted on libyaml's events (C, about 20 times faster than the pure-Python composer),
    so that an over-large file is refused before the slow parse; the parse below checks the same bounds
    again, and says what else is wrong (a syntax error stops this count and is left to it)."""
    if not getattr(yaml, "__with_libyaml__", False):
        return
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, _VALUE):
                nodes += 1
            if isinstance(event, _OPEN):
                depth += 1
            elif isinstance(event, _CLOSE):
                depth -= 1
            if depth > MAX_DEPTH or nodes > MAX_NODES:
                what = f"nested deeper than {MAX_DEPTH} levels" if depth > MAX_DEPTH else f"more than {MAX_NODES:,} values"
                mark = event.start_mark
                raise _Refused(f"{what}" + (f" (at line {mark.line + 1})" if mark is not None else ""))
    except yaml.YAMLError:
        return


_SHIPPED = Path(__file__).resolve().parent.parent / "data"  # autopar/data: the presets, profiles and stacks we ship


if getattr(yaml, "__with_libyaml__", False):

    class _CLoader(yaml.CSafeLoader):
        """libyaml's parser with _Loader's constructor rules (no duplicate keys), for the files we ship."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            _no_duplicates(self, node)
            return super().construct_mapping(node, deep=deep)


def _load_shipped(text: str) -> Any:
    """A file of autopar/data parsed by libyaml (about 10 times faster: `suggest` reads four), or None to
    parse it as any other file. The same values: tests/unit/io/test_builtin_data.py parses every shipped
    file both ways; anything libyaml refuses is parsed the slow way, which says why."""
    if not getattr(yaml, "__with_libyaml__", False):
        return None
    loader = _CLoader(text)
    try:
        node = loader.get_single_node()
        if node is None or _expanded(node) > MAX_NODES:
            return None
        return loader.construct_document(node)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None
    finally:
        loader.dispose()


def _load_yaml(text: str, *, shipped: bool = False) -> Any:
    _precheck(text)
    if shipped and (data := _load_shipped(text)) is not None:
        return data
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded(node) > MAX_NODES:
            raise _Refused(f"aliases expand to more than {MAX_NODES:,} values (an alias bomb?)")
        return loader.construct_document(node)
    finally:
        loader.dispose()


# --- JSON --------------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {shown(key)}")
        out[key] = value
    return out


class JsonConstant(str):
    """NaN, Infinity or -Infinity in JSON text (not JSON, but transformers writes them: Mamba2Config's
    time_step_limit). Kept as this marker, a text, so that a key nobody reads does not matter and a number
    that is read is refused naming its field (autopar.io.schema.describe)."""


def _no_constant(name: str) -> Any:
    return JsonConstant(name)


def _check_shape(data: Any) -> None:
    """Depth and size of a parsed JSON value, without recursion."""
    stack, count = [(data, 1)], 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
        if count > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES:,} values")
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
        raise _Refused(f"{_texts(data, paths=True)}: text is not valid Unicode (a lone surrogate such as \\udc80)")
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
    try:
        return _load_yaml(text, shipped=shipped)
    except yaml.constructor.ConstructorError as exc:
        problem = str(getattr(exc, "problem", "") or "unsupported tag")
        if "could not determine a constructor" in problem:
            raise ValueError(f"YAML tags that construct objects are not allowed ({one_line(problem, 120)})") from None
        raise ValueError(f"malformed YAML: {one_line(problem, 120)}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ValueError(f"malformed YAML{where}: {one_line(problem, 120)}") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None


def load_mapping(path: Path, *, err: type[AutoparError] = SpecError, cap: int = MAX_SPEC_BYTES) -> dict[str, Any]:
    """Load a YAML or JSON file whose top level must be a mapping."""
    text = read_text(path, err=err, cap=cap)
    try:
        data = parse(text, json_text=path.suffix.lower() == ".json", shipped=path.resolve().is_relative_to(_SHIPPED))
    except ValueError as exc:  # also int() of a number with thousands of digits
        text = str(exc)
        if "integer string conversion" in text:
            text = "a number has more than 4,300 digits"
        raise err(f"{named(path)}: {one_line(text, 160)}") from None
    if not isinstance(data, dict):
        raise err(f"{named(path)}: expected a mapping of fields at the top level, got {type(data).__name__}")
    return data


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    starting = [c for c in choices if word and c.startswith(word)]  # 'h200' -> 'h200-sxm' before 'b200'
    close = starting if len(starting) == 1 else difflib.get_close_matches(word[:100], list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
