"""Typer's option coercion without a pydantic TypeAdapter per option left at its default.

Typer 0.29 coerces each option of the command it runs through a pydantic
TypeAdapter that it builds on first use, for every option including those left
at None (typer/core.py _TyperParameter.process_value -> get_runtime_param ->
_coercion.build_runtime_param): about 4 ms each, 100 ms for `suggest`'s 25
options. ``install`` makes that build lazy: a None value is returned as typer's
RuntimeParam.coerce returns it (``()`` for a multiple option) without building
anything, and options of one plain type (str, int, float, bool and their
bounds) share one adapter. Every other value still goes through typer's own
adapter, so values, errors and messages are typer's. Typer versions without
build_runtime_param are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

_PLAIN = (str, int, float, bool)
_NOT_PLAIN = object()


def _plain(descriptor: Any, value: Any) -> Any:
    """What typer's adapter returns for `value` where that is plain to see, else _NOT_PLAIN.

    typer/_adapters.py at 0.29: a str option is Annotated[str, BeforeValidator(_parse_cli_str)],
    which gives back any str as it is (lone surrogates too); an int option is TypeAdapter(int),
    with Field(ge=min, le=max) when bounded: a run of ASCII digits is int(value), an int is itself;
    an option with a parser (cli/options.py path_option: --plot, --emit-out, --save-dir...) is
    Annotated[Any, BeforeValidator(parser)]: what the parser returns (the parsers are pure). A value
    out of its bounds or that the parser refuses, a clamped option and every other type go to
    typer's adapter, which words the error."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None:
        return _NOT_PLAIN
    if info.parser is not None:
        # typer's adapter for a parsed option is Annotated[Any, BeforeValidator(parser)]: the parser's value, as
        # it is; a value the parser refuses goes to the adapter, which calls it again and raises as it words it
        try:
            return info.parser(value)
        except Exception:
            return _NOT_PLAIN
    if info.clamp:
        return _NOT_PLAIN
    kind = descriptor.annotation
    if kind is str:
        return value if type(value) is str else _NOT_PLAIN
    if kind is not int:
        return _NOT_PLAIN
    if type(value) is str and value.isascii() and value.isdigit() and len(value) <= 18:  # " 5", "+5", "1_000": the adapter
        number = int(value)
    elif type(value) is int:
        number = value
    else:
        return _NOT_PLAIN
    if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
        return _NOT_PLAIN
    return number


class _Lazy:
    """A RuntimeParam that builds typer's only when a value is given."""

    __slots__ = ("_build", "_built", "_descriptor")

    def __init__(self, build: Callable[[Any], Any], descriptor: Any) -> None:
        self._build, self._descriptor = build, descriptor
        self._built: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if not param.multiple and param.nargs == 1:
            plain = _plain(self._descriptor, value)
            if plain is not _NOT_PLAIN:
                return plain
        if self._built is None:
            self._built = _shared(self._build, self._descriptor)
        return self._built.coerce(value, param=param, ctx=ctx)


_SHARED: dict[Hashable, Any] = {}


def _shared(build: Callable[[Any], Any], descriptor: Any) -> Any:
    """typer's RuntimeParam for `descriptor`, one per plain type and bounds (its adapter reads no more)."""
    info = descriptor.parameter_info
    if descriptor.annotation not in _PLAIN or descriptor.file_annotation is not None or info.parser is not None:
        return build(descriptor)
    key = (descriptor.annotation, info.min, info.max, info.clamp)
    if key not in _SHARED:
        _SHARED[key] = build(descriptor)
    return _SHARED[key]


def install() -> None:
    """Make typer build its option adapters lazily (once per process)."""
    try:
        from typer import core
    except ImportError:  # pragma: no cover - typer is a dependency
        return
    build = getattr(core, "build_runtime_param", None)
    if build is None or getattr(build, "autopar_lazy", False):
        return

    def lazy(descriptor: Any) -> _Lazy:
        return _Lazy(build, descriptor)

    lazy.autopar_lazy = True  # type: ignore[attr-defined]
    setattr(core, "build_runtime_param", lazy)  # noqa: B010 - typer's own name, looked up when an option is read
