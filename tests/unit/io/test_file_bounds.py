"""Issue 26.1 and 26.5: every number read from any file has a physical range, checked when it is read.

Each format's sample documents (built-in presets, profiles and stacks, the
shapes of published config.json files, length distributions) are walked for
every number autopar reads; each is replaced by an out-of-range value
(negative, huge, NaN, infinite) and the reader must answer with one exit-2 line
that names the file and the field. Zero is in range for some fields (a count of
shared experts, a layer overhead), so it may also be accepted. The property
draws (field, value) pairs; the sweep below it gives every field one value.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from autopar.errors import AutoparError
from autopar.io import hf_schema
from autopar.io.distributions import load_distribution
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from tests.conftest import toy_profile_dict
from tests.support.hostile import HF
from tests.unit.io.test_hf_config import (
    DEEPSEEK_V3,
    GPT_OSS_120B,
    MAMBA2_2_7B_HF,
    MAMBA2_2_7B_SSM,
    MIXTRAL_8X7B,
    NEMOTRON_H_8B,
    QWEN3_30B_A3B,
)

DATA = Path(__file__).resolve().parents[3] / "autopar" / "data"
OUT_OF_RANGE: list[Any] = [-1, -0.5, 1e308, 10**40, math.nan, math.inf, -math.inf]
ZERO = 0
Path_ = tuple[str | int, ...]
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TEXT_KEYS = {"provenance", "citations", "raw", "description", "name", "source"}  # texts, or not read


def numbers(doc: Any, path: Path_ = (), *, skip: set[str] = TEXT_KEYS) -> Iterator[Path_]:
    """Paths of the numbers in `doc`, outside the keys in `skip`."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key not in skip:
                yield from numbers(value, (*path, key), skip=skip)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from numbers(value, (*path, i), skip=skip)
    elif isinstance(doc, int | float) and not isinstance(doc, bool):
        yield path


def declared(doc: dict[str, Any], cls: type[BaseModel], path: Path_ = ()) -> Iterator[Path_]:
    """Paths of the numbers of a config.json that its family's schema reads (the rest is ignored)."""
    for key, value in doc.items():
        field = cls.model_fields.get(key)
        if field is None:
            continue
        inner = next(
            (a for a in getattr(field.annotation, "__args__", (field.annotation,)) if isinstance(a, type) and issubclass(a, BaseModel)),
            None,
        )
        if isinstance(value, dict) and inner is not None:
            yield from declared(value, inner, (*path, key))
        elif not isinstance(value, dict):
            yield from numbers(value, (*path, key), skip=set())


def replaced(doc: Any, path: Path_, value: Any) -> Any:
    out = json.loads(json.dumps(doc))
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def field_name(path: Path_) -> str:
    """The key a message must name: the last mapping key on the path."""
    return str(next(p for p in reversed(path) if isinstance(p, str)))


def expect_refused(load: Callable[[Path], Any], file: Path, path: Path_, value: Any) -> None:
    try:
        load(file)
    except AutoparError as exc:
        text = str(exc)
        assert exc.exit_code == 2, text
        assert "\n" not in text and len(text) < 1000, text[:300]
        assert file.name in text and field_name(path) in text, (path, value, text)
        return
    assert value == ZERO, f"{path} = {value!r} was accepted"


def write(tmp: Path, name: str, doc: Any) -> Path:
    file = tmp / name
    if name.endswith(".json"):
        file.write_text(json.dumps(doc), encoding="utf-8")  # NaN and Infinity as JSON's non-standard literals
    else:
        file.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return file


def _yaml(path: Path) -> dict[str, Any]:
    """A built-in file without its citations (texts, and the bulk of the file: the tests write it often)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc.pop("citations", None)
    return doc


def _saved_profile() -> dict[str, Any]:
    doc = toy_profile_dict()
    doc["corrections"] = {"activation_bytes_per_block": {"factor": 1.2, "stack": "eager-torch", "source": "a run"}}
    return doc


def _hf_cases() -> list[tuple[str, dict[str, Any]]]:
    llama31 = {**HF, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    newer = {**HF, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    docs = [llama31, newer, MIXTRAL_8X7B, QWEN3_30B_A3B, DEEPSEEK_V3, GPT_OSS_120B, MAMBA2_2_7B_HF, NEMOTRON_H_8B]
    out = [(str(d["model_type"]), d) for d in docs]
    return [*out, ("mamba_ssm", MAMBA2_2_7B_SSM)]


def _hf_paths(kind: str, doc: dict[str, Any]) -> list[Path_]:
    return list(declared(doc, hf_schema.READERS_SCHEMA[kind]))


# (format, file name, sample document, reader, the paths of its numbers)
FORMATS: list[tuple[str, str, dict[str, Any], Callable[[Path], Any], list[Path_]]] = []
for preset in ("llama3.1-8b", "deepseek-v3", "qwen3-30b-a3b", "nemotron-h-8b"):
    doc = _yaml(DATA / "presets" / f"{preset}.yaml")
    FORMATS.append((f"model {preset}", "m.yaml", doc, lambda p: load_model(str(p)), list(numbers(doc))))
for kind, doc in _hf_cases():
    FORMATS.append((f"config.json {kind}", "config.json", doc, lambda p: load_model(str(p)), _hf_paths(kind, doc)))
for name, doc in (("toy", toy_profile_dict()), ("saved with corrections", _saved_profile())):
    FORMATS.append((f"profile {name}", "hw.yaml", doc, lambda p: load_hardware(str(p)), list(numbers(doc))))
_variant = _yaml(DATA / "profiles" / "h100-96g-500w.yaml")
FORMATS.append(("derived profile", "v.yaml", _variant, lambda p: load_hardware(str(p)), list(numbers(_variant))))
for stack in ("megatron-0.16", "torchtitan-2025.06"):
    doc = _yaml(DATA / "stacks" / f"{stack}.yaml")
    # an option's numbers are bounded when it is set (--stack-opt names it; tests/unit/cost/test_stack_options.py)
    FORMATS.append((f"stack {stack}", "st.yaml", doc, lambda p: load_stack(str(p)), list(numbers(doc, skip=TEXT_KEYS | {"options"}))))
for i, doc in enumerate(
    [
        {"bin_edges": [1, 100, 1000], "counts": [3, 1]},
        {"lognormal": {"median": 300, "sigma": 1.0, "max": 2048, "min": 2}},
        {
            "mixture": [
                {"weight": 1, "bin_edges": [1, 64], "counts": [1]},
                {"weight": 2, "lognormal": {"median": 100, "sigma": 0.5, "max": 1024}},
            ]
        },
    ]
):
    for suffix in (".yaml", ".json"):
        FORMATS.append((f"distribution {i}{suffix}", f"d{suffix}", doc, load_distribution, list(numbers(doc))))
IDS = [f[0] for f in FORMATS]


def test_every_format_has_numbers() -> None:
    """The walk finds the numbers (a format whose sample yields none would test nothing)."""
    for name, _, _, _, paths in FORMATS:
        assert len(paths) >= 3, name
    stack = next(f for f in FORMATS if f[0] == "stack megatron-0.16")[4]
    assert ("kernels", "layer_overhead_us") in stack and ("memory", "pp_stage_buffers") in stack
    llama = next(f for f in FORMATS if f[0] == "config.json llama")[4]
    assert ("rope_scaling", "factor") in llama and ("rms_norm_eps",) not in llama  # read keys only


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
@PROPERTY
@given(data=st.data())
def test_out_of_range_numbers_are_refused_naming_the_field(tmp_path: Path, fmt: Any, data: st.DataObject) -> None:
    _, name, doc, load, paths = fmt
    path = data.draw(st.sampled_from(paths), label="field")
    value = data.draw(st.sampled_from([*OUT_OF_RANGE, ZERO]), label="value")
    expect_refused(load, write(tmp_path, name, replaced(doc, path, value)), path, value)


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_every_field_refuses_an_out_of_range_value(tmp_path: Path, fmt: Any) -> None:
    """Every number of the sample once, the bad values taken in turn."""
    _, name, doc, load, paths = fmt
    for i, path in enumerate(paths):
        value = OUT_OF_RANGE[i % len(OUT_OF_RANGE)]
        expect_refused(load, write(tmp_path, name, replaced(doc, path, value)), path, value)


def _npy(values: list[int], dtype: str) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array(values, dtype=dtype))
    return buf.getvalue()


@PROPERTY
@given(value=st.sampled_from([-1, 0, 2**25 + 1, 10**12, 2**63 - 1]), at=st.integers(0, 2), kind=st.sampled_from([".txt", ".jsonl", ".npy"]))
def test_out_of_range_lengths_are_refused(tmp_path: Path, value: int, at: int, kind: str) -> None:
    """Files of lengths: a length below 1 or above MAX_SEQ (2^25) is one line naming the file."""
    lengths = [100, 200, 300]
    lengths[at] = value
    file = tmp_path / f"l{kind}"
    if kind == ".npy":
        file.write_bytes(_npy(lengths, "int64"))
    elif kind == ".jsonl":
        file.write_text("".join(json.dumps({"length": v}) + "\n" for v in lengths), encoding="utf-8")
    else:
        file.write_text("".join(f"{v}\n" for v in lengths), encoding="utf-8")
    with pytest.raises(AutoparError) as err:
        load_distribution(file)
    assert err.value.exit_code == 2 and "\n" not in str(err.value) and file.name in str(err.value)
    assert "must be" in str(err.value)


@pytest.mark.parametrize(("value", "said"), [("NaN", "NaN"), ("Infinity", "Infinity"), ("-1e999", "-Infinity")])
def test_json_non_finite_literals_name_their_field(tmp_path: Path, value: str, said: str) -> None:
    """JSON has no NaN or Infinity; Python's reader accepts them, autopar refuses them naming the field."""
    file = tmp_path / "config.json"
    file.write_text(json.dumps(HF)[:-1] + f', "rope_scaling": {{"rope_type": "llama3", "factor": {value}}}}}')
    with pytest.raises(AutoparError) as err:
        load_model(str(file))
    assert "rope_scaling.factor" in str(err.value) and ("inf" in str(err.value).lower() or said in str(err.value))


def test_json_non_finite_literals_in_unread_keys_are_ignored(tmp_path: Path) -> None:
    """transformers writes Mamba2Config's time_step_limit (0.0, inf) as [0.0, Infinity]: a key autopar does not read."""
    file = tmp_path / "config.json"
    file.write_text(json.dumps(MAMBA2_2_7B_HF), encoding="utf-8")
    assert "Infinity" in file.read_text(encoding="utf-8")
    assert load_model(str(file)).mamba is not None


def _npy_with_header(shape: str, data: bytes) -> bytes:
    header = f"{{'descr': '<i8', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (117 - len(header)) + "\n"  # magic (10 bytes) + header: a multiple of 64
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ("(10**12,)", "the header claims 1,000,000,000,000 elements (8,000,000,000,000 bytes) but the file holds 32"),
        ("(5,)", "the header claims 5 elements (40 bytes) but the file holds 32 bytes after it"),
        ("(-5,)", "the header's shape (-5,) has a negative length"),
        ("(2, 2)", "expected a one-dimensional array of lengths, got shape (2, 2)"),
    ],
)
def test_npy_header_is_checked_before_anything_is_allocated(tmp_path: Path, shape: str, said: str) -> None:
    """np.load allocates what the header claims (10^12 int64: 7.28 TiB) before reading; autopar compares it with the
    bytes that follow first."""
    file = tmp_path / "l.npy"
    file.write_bytes(_npy_with_header(shape.replace("10**12", str(10**12)), bytes(32)))
    assert file.stat().st_size == 160
    with pytest.raises(AutoparError) as err:
        load_distribution(file)
    assert said in str(err.value) and err.value.exit_code == 2
