"""Caching of the serving cost functions across a sweep.

A serving sweep prices ~10^4-10^5 (deployment, concurrency) points that share
engines: every disaggregated pair with the same prefill engine prefills the same
prompt, every point of one decode engine reads the same KV pool, and the
decode pool's step at its largest batch is the same for every prefill pool in
front of it. `remembered` caches a function of (model, hardware, engine, ...)
on its arguments: the model and the profile by identity (a profile holds dicts,
so it is not hashable; the identity is checked on every hit, so an id reused
after the object is freed cannot alias), everything else by value and name.
The functions stay pure: a hit returns the value the call would compute.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

LIMIT = 1 << 16  # entries per function; the cache is emptied when it grows past this


def remembered(fn: Callable[P, T]) -> Callable[P, T]:
    """fn(model, hw, *args, **kwargs), computed once per (model, hw) object pair and argument values."""
    values: dict[tuple[Any, ...], tuple[object, object, T]] = {}

    @functools.wraps(fn)
    def cached(*args: P.args, **kwargs: P.kwargs) -> T:
        model, hw, rest = args[0], args[1], args[2:]
        try:
            key = (id(model), id(hw), rest, tuple(kwargs.items()))
            hit = values.get(key)
        except TypeError:  # an unhashable argument: not cached
            return fn(*args, **kwargs)
        if hit is not None and hit[0] is model and hit[1] is hw:
            return hit[2]
        if len(values) >= LIMIT:
            values.clear()
        value = fn(*args, **kwargs)
        values[key] = (model, hw, value)
        return value

    return cached
