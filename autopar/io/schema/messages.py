"""pydantic's errors as one line naming the file and the field."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from autopar.errors import AutoparError
from autopar.io.reading import JsonConstant, did_you_mean, kind_of, one_line, shown

Model = TypeVar("Model", bound=BaseModel)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{one_line(str(part), 60)}" if out else one_line(str(part), 60)
    return out


def _model_at(cls: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the last key of `loc`, for 'did you mean'."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = cls.model_fields.get(str(part))
        found = _find_model(field.annotation) if field is not None else None
        if found is None:
            return None
        cls = found
    return cls


def _find_model(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in getattr(tp, "__args__", ()):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else (f"{value:,}" if isinstance(value, int) else str(value))


def describe(cls: type[BaseModel], error: Any) -> str:
    """One pydantic error as '<field>: <what is wrong>'."""
    loc, kind, ctx, value = tuple(error["loc"]), error["type"], error.get("ctx") or {}, error.get("input")
    path = _dotted(loc)
    if kind == "missing" or (value is None and kind.endswith("_type")):
        return f"{path}: missing required field"
    if kind == "extra_forbidden":
        holder = _model_at(cls, loc)
        known = [f.alias or name for name, f in holder.model_fields.items()] if holder is not None else []
        return f"{path}: unknown field{did_you_mean(str(loc[-1]), known)}"
    if kind == "literal_error":
        choices = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        hint = did_you_mean(str(value), [c.strip() for c in choices.split(",")]) if isinstance(value, str) else ""
        return f"{path}: must be one of {choices}, got {shown(value)}{hint}"
    messages = {
        "int_type": f"expected an integer, got {shown(value)}",
        "float_type": f"expected a number, got {shown(value)}",
        "bool_type": f"expected true or false, got {shown(value)}",
        "string_type": f"expected a non-empty string, got {shown(value)}",
        "string_too_short": f"expected a non-empty string, got {shown(value)}",
        "string_pattern_mismatch": f"expected a non-empty string, got {shown(value)}",
        "string_too_long": f"must be at most {_number(ctx.get('max_length'))} characters",
        "dict_type": f"expected a mapping, got {kind_of(value)}",
        "model_type": f"expected a mapping, got {kind_of(value)}",
        "list_type": f"expected a list, got {kind_of(value)}",
        "tuple_type": f"expected a pair [size, value], got {shown(value)}",
        "too_short": f"expected at least {_number(ctx.get('min_length'))} item(s), got {_number(ctx.get('actual_length'))}",
        "too_long": f"expected at most {_number(ctx.get('max_length'))} item(s)",
        "finite_number": f"must be a finite number, got {shown(value)}",
        "greater_than": f"must be a positive number, got {shown(value)}"
        if ctx.get("gt") == 0
        else f"must be > {_number(ctx.get('gt'))}, got {shown(value)}",
        "greater_than_equal": f"must be >= {_number(ctx.get('ge'))}, got {shown(value)}",
        "less_than_equal": f"must be at most {_number(ctx.get('le'))}, got {shown(value)}",
    }
    if isinstance(value, JsonConstant) and kind in ("int_type", "float_type"):
        return f"{path}: must be a finite number, got {value} (JSON has no {value})"
    if kind == "float_type" and isinstance(value, str) and _exponent_text(value):  # YAML 1.1 reads 1e300 as text
        return f"{path}: expected a number, got {shown(value)} (YAML reads an exponent without a dot as text: write {float(value):.1e})"
    if kind in messages:
        return f"{path}: {messages[kind]}"
    text = str(error.get("msg", kind)).removeprefix("Value error, ")
    return f"{path}: {one_line(text, 200)}" if path else one_line(text, 200)


def _exponent_text(text: str) -> bool:
    """A number written with an exponent and no dot (1e300), which a YAML 1.1 reader takes for text."""
    try:
        float(text)
    except ValueError:
        return False
    return "e" in text.lower() and "." not in text


def validate(cls: type[Model], data: dict[str, Any], *, where: str, err: type[AutoparError]) -> Model:
    """`data` as a `cls`, or the first problem as one line: '<where>: <field>: <what>'."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise err(f"{where}: {describe(cls, exc.errors(include_url=False)[0])}") from None
