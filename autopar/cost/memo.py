"""A per-call memo: the search hands one dict to every estimate so that plans
sharing a (tp, cp, mbs, ...) sub-configuration compute its costs once. The dict
lives only as long as the caller keeps it; the functions stay pure."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

Memo = dict[Hashable, Any]


def memo(cache: Memo, key: Hashable, make: Callable[[], T]) -> T:
    """cache[key], computed by make() the first time."""
    if key not in cache:
        cache[key] = make()
    value: T = cache[key]
    return value
