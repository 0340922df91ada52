"""Strict reading of YAML/JSON input files into plain mappings.

Every failure becomes a one-line :class:`SpecError` (or the error class the
caller passes) that names the file and, where it can, the field. YAML is read
with ``yaml.safe_load`` only, so tags that construct Python objects are refused.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from autopar.errors import AutoparError, SpecError


def read_text(path: Path, *, err: type[AutoparError] = SpecError) -> str:
    """Read a UTF-8 text file; missing, unreadable, non-UTF-8 or empty files are errors."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise err(f"{path}: file not found") from None
    except IsADirectoryError:
        raise err(f"{path}: is a directory, expected a file") from None
    except OSError as exc:
        raise err(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise err(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise err(f"{path}: file is empty")
    return text


def load_mapping(path: Path, *, err: type[AutoparError] = SpecError) -> dict[str, Any]:
    """Load a YAML or JSON file whose top level must be a mapping."""
    text = read_text(path, err=err)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise err(f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.constructor.ConstructorError as exc:
            tag = getattr(exc, "problem", "") or "unsupported tag"
            raise err(f"{path}: YAML tags that construct objects are not allowed ({tag})") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "syntax error"
            raise err(f"{path}: malformed YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise err(f"{path}: expected a mapping of fields at the top level, got {type(data).__name__}")
    return data


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Fields:
    """Typed, strict access to one mapping from an input file.

    ``where`` prefixes every key in messages: ``"model.yaml: "`` or
    ``"h100.yaml: gpu."`` gives ``model.yaml: layers`` or ``h100.yaml: gpu.name``. Call
    :meth:`finish` after reading to reject keys nobody asked for.
    """

    def __init__(self, data: Mapping[str, Any], where: str, *, err: type[AutoparError] = SpecError):
        self._data = data
        self._where = where
        self._err = err
        self._seen: set[str] = set()

    def _path(self, key: str) -> str:
        return f"{self._where}{key}"

    def prefix(self, key: str) -> str:
        """The ``where`` to give a Fields for the mapping under ``key``."""
        return f"{self._path(key)}."

    def fail(self, key: str, msg: str) -> AutoparError:
        return self._err(f"{self._path(key)}: {msg}")

    def has(self, key: str) -> bool:
        return key in self._data and self._data[key] is not None

    def _get(self, key: str, default: Any, required: bool) -> Any:
        self._seen.add(key)
        if key not in self._data or self._data[key] is None:
            if required:
                raise self._err(f"{self._path(key)}: missing required field")
            return default
        return self._data[key]

    def integer(self, key: str, default: int | None = None, *, required: bool = True, minimum: int = 1) -> int:
        value = self._get(key, default, required and default is None)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise self.fail(key, f"expected an integer, got {value!r}")
        if value < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {value}")
        return value

    def number(self, key: str, default: float | None = None, *, required: bool = True, positive: bool = True) -> float:
        value = self._get(key, default, required and default is None)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value) or (positive and value <= 0):
            raise self.fail(key, f"must be a positive number, got {value}")
        return value

    def text(self, key: str, default: str | None = None, *, required: bool = True, choices: tuple[str, ...] = ()) -> str:
        value = self._get(key, default, required and default is None)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {value!r}")
        if choices and value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}, got {value!r}{did_you_mean(value, choices)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default, False)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {value!r}")
        return value

    def mapping(self, key: str, *, required: bool = True) -> dict[str, Any] | None:
        value = self._get(key, None, required)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping, got {type(value).__name__}")
        return value

    def sequence(self, key: str, *, required: bool = True) -> list[Any] | None:
        value = self._get(key, None, required)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list, got {type(value).__name__}")
        return value

    def ignore(self, *keys: str) -> None:
        """Accept these keys without reading them."""
        self._seen.update(keys)

    def finish(self) -> None:
        """Reject every key that was not read."""
        for key in self._data:
            if key not in self._seen:
                known = sorted(self._seen)
                raise self._err(f"{self._path(str(key))}: unknown field{did_you_mean(str(key), known)}")
