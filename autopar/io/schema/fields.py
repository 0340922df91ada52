"""The bounded values every file format is built of: each number is finite and bounded by
:mod:`autopar.spec.limits`, an int may be written as an integral float (``1.0e+3``), and every
model forbids unknown keys (``_Strict``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from autopar.spec import limits as lim
from autopar.spec.hardware import DTYPES


def _integral(value: Any) -> Any:
    """1.0e+3 -> 1000; any other value is left for the type check."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _int(low: int, high: int) -> Any:
    return Field(ge=low, le=high)


def _num(high: float, *, low: float = 0.0, inclusive: bool = False) -> Any:
    """A finite number in (low, high], or [low, high] when `inclusive`."""
    return Field(ge=low, le=high, allow_inf_nan=False) if inclusive else Field(gt=low, le=high, allow_inf_nan=False)


def _rate(low: float, high: float) -> Any:
    """A rate, size or efficiency in [low, high]: a time is work / rate, so a rate has a floor as well."""
    return _num(high, low=low, inclusive=True)


_I = BeforeValidator(_integral)
Layers = Annotated[int, _int(1, lim.MAX_LAYERS), _I]
Layers0 = Annotated[int, _int(0, lim.MAX_LAYERS), _I]
Width = Annotated[int, _int(1, lim.MAX_WIDTH), _I]
Width0 = Annotated[int, _int(0, lim.MAX_WIDTH), _I]
Heads = Annotated[int, _int(1, lim.MAX_HEADS), _I]
Vocab = Annotated[int, _int(1, lim.MAX_VOCAB), _I]
Tokens = Annotated[int, _int(1, lim.MAX_SEQ), _I]
Tokens0 = Annotated[int, _int(0, lim.MAX_SEQ), _I]
Experts = Annotated[int, _int(1, lim.MAX_EXPERTS), _I]
Experts0 = Annotated[int, _int(0, lim.MAX_EXPERTS), _I]
Small = Annotated[int, _int(1, lim.MAX_SMALL), _I]
Small0 = Annotated[int, _int(0, lim.MAX_SMALL), _I]
Group = Annotated[int, _int(2, lim.MAX_GPUS), _I]
NodeSize = Annotated[int, _int(1, lim.MAX_GPUS_PER_NODE), _I]
Version = Annotated[int, _int(1, 1_000_000), _I]
Capacity = Annotated[float, _num(lim.MAX_CAPACITY_FACTOR, low=1.0, inclusive=True)]
Latency = Annotated[float, _num(lim.MAX_LATENCY_US)]
BusBw = Annotated[float, _rate(lim.MIN_BUS_GBPS, lim.MAX_BUS_GBPS)]
Memory = Annotated[float, _rate(lim.MIN_MEMORY_GIB, lim.MAX_MEMORY_GIB)]
Hbm = Annotated[float, _rate(lim.MIN_HBM_GBPS, lim.MAX_HBM_GBPS)]
Efficiency = Annotated[float, _rate(lim.MIN_EFFICIENCY, 1.0)]
Fraction = Annotated[float, _num(1.0, inclusive=True)]  # [0, 1]
Tflops = Annotated[float, _rate(lim.MIN_TFLOPS, lim.MAX_TFLOPS)]
CurveX = Annotated[float, _num(lim.MAX_CURVE_X)]
Power = Annotated[float, _rate(lim.MIN_POWER_W, lim.MAX_POWER_W)]
Slowdown = Annotated[float, _num(lim.MAX_SLOWDOWN, low=1.0, inclusive=True)]
Factor = Annotated[float, _num(lim.MAX_SLOWDOWN)]
Median = Annotated[float, _num(lim.MAX_SEQ, low=1.0, inclusive=True)]
Sigma = Annotated[float, _num(lim.MAX_SIGMA)]
Count = Annotated[float, _num(lim.MAX_COUNT, inclusive=True)]
Weight = Annotated[float, _num(lim.MAX_COUNT)]
RopeBase = Annotated[float, _num(lim.MAX_ROPE_BASE, low=1.0, inclusive=True)]
RopeScaling = Annotated[float, _num(lim.MAX_ROPE_SCALING, low=1.0, inclusive=True)]


def _one_line_texts(value: Any) -> Any:
    """provenance/citations: a mapping of names to scalars, all read as text; nested values are refused."""
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        if isinstance(v, dict | list):
            raise ValueError(f"{str(k)[:60]}: expected a text, got a {type(v).__name__}")
        out[str(k)[:200].replace("\n", "\\n")] = str(v)[:2000].replace("\n", "\\n")
    return out


Text = Annotated[str, StringConstraints(min_length=1, max_length=10_000, pattern=r"\S")]
Texts = Annotated[dict[str, str], BeforeValidator(_one_line_texts)]
Dtype = Literal["bf16", "fp16", "fp8", "fp4", "fp32", "tf32"]
assert set(Dtype.__args__) == set(DTYPES)  # type: ignore[attr-defined]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _choices(cls: type[BaseModel], name: str) -> tuple[Any, ...]:
    annotation = cls.model_fields[name].annotation
    while getattr(annotation, "__origin__", None) is not Literal:
        annotation = annotation.__args__[0]  # type: ignore[union-attr]
    return tuple(annotation.__args__)  # type: ignore[union-attr]
