"""Typed access to the mappings of internal tables (the paper setups of benchmarks).

The file formats users give (model specs, hardware profiles and derived ones,
stacks, length distributions) are pydantic models in :mod:`autopar.io.schema`,
every number bounded there; Hugging Face ``config.json``
keys in :mod:`autopar.io.hf_schema`. Reading itself (regular files
only, size caps, safe YAML/JSON with bounded depth and aliases, no duplicate
keys) is :mod:`autopar.io.reading`, re-exported here. Every failure is a
one-line :class:`SpecError` (or the error class the caller passes) naming the
file and the field; bounds come from :mod:`autopar.spec.limits` and are named
in the message; values quoted in a message are shortened by :func:`shown`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autopar.errors import AutoparError, SpecError
from autopar.io.reading import did_you_mean, load_mapping, named, one_line, read_text, shown

__all__ = ["Fields", "did_you_mean", "load_mapping", "named", "one_line", "read_text", "shown"]


class Fields:
    """Typed, strict access to one mapping from an input file.

    ``where`` prefixes every key in messages: ``"model.yaml: "`` or
    ``"h100.yaml: gpu."`` gives ``model.yaml: layers`` or ``h100.yaml: gpu.name``. Call
    :meth:`finish` after reading to reject keys nobody asked for.
    """

    def __init__(self, data: Mapping[str, Any], where: str, *, err: type[AutoparError] = SpecError,
                 limits: Mapping[str, int] | None = None):
        self._data = data
        self._where = where
        self._err = err
        self._limits = limits or {}  # key -> default maximum of integer()
        self._seen: set[str] = set()

    @property
    def err(self) -> type[AutoparError]:
        return self._err

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

    def integer(self, key: str, default: int | None = None, *, required: bool = True, minimum: int = 1,
                maximum: int | None = None) -> int:
        """An integer in [minimum, maximum]; `maximum` is a physical bound from autopar.spec.limits."""
        value = self._get(key, default, required and default is None)
        maximum = self._limits.get(key) if maximum is None else maximum
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise self.fail(key, f"expected an integer, got {shown(value)}")
        if value < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {shown(value)}")
        if maximum is not None and value > maximum:
            raise self.fail(key, f"must be at most {maximum:,} (autopar's limit), got {shown(value)}")
        return value

    def number(self, key: str, default: float | None = None, *, required: bool = True, positive: bool = True,
               maximum: float | None = None) -> float:
        """A finite number (positive unless told otherwise), at most `maximum`."""
        value = self._get(key, default, required and default is None)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, got {shown(value)}")
        try:
            value = float(value)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value) or (positive and value <= 0):
            raise self.fail(key, f"must be a positive number, got {value}")
        if maximum is not None and value > maximum:
            raise self.fail(key, f"must be at most {maximum:g} (autopar's limit), got {value:g}")
        return value

    def text(self, key: str, default: str | None = None, *, required: bool = True, choices: tuple[str, ...] = ()) -> str:
        value = self._get(key, default, required and default is None)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {shown(value)}")
        if choices and value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}, got {shown(value)}{did_you_mean(value, choices)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default, False)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {shown(value)}")
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
                raise self._err(f"{self._path(one_line(str(key), 60))}: unknown field{did_you_mean(str(key), known)}")
