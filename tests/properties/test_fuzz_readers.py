"""Property: the model, profile and distribution readers answer every input with
a value or a one-line exit-2 error, never another exception, and quickly.

Inputs are valid documents with one part replaced by an arbitrary value (huge,
negative, non-finite, nested, a string with newlines...), a key dropped or an
unknown key added, written as YAML or JSON; plus arbitrary bytes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autopar.errors import AutoparError
from autopar.io.distributions import load_distribution
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.io.stacks import load_stack
from tests.conftest import toy_profile_dict
from tests.support.hostile import HF, TINY

SECONDS = 2.0  # per input
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 2**64, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["a\nb", "", " ", "x" * 500]),
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=10
)
DISTS = [
    {"bin_edges": [1, 100, 1000], "counts": [3, 1]},
    {"lognormal": {"median": 300, "sigma": 1.0, "max": 2048}},
    {
        "mixture": [
            {"weight": 1, "bin_edges": [1, 64], "counts": [1]},
            {"weight": 2, "lognormal": {"median": 100, "sigma": 0.5, "max": 1024, "min": 2}},
        ]
    },
]


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """`base` with one place replaced, dropped or given an unknown key."""
    doc = json.loads(json.dumps(base))
    node = doc
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, dict | list) and child and draw(st.booleans()):
            node = child
            continue
        action = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if action == "replace":
            node[key] = draw(values)
        elif action == "drop" and isinstance(node, dict):
            del node[key]
        elif isinstance(node, dict):
            node[draw(st.text(min_size=1, max_size=8))] = draw(values)
        return doc


def _text(doc: Any, as_json: bool) -> str:
    return json.dumps(doc) if as_json else yaml.safe_dump(doc, allow_unicode=True)


def check(load: Any, path: Path) -> None:
    start = time.monotonic()
    try:
        load(path)
    except AutoparError as exc:
        assert exc.exit_code == 2
        assert "\n" not in str(exc) and len(str(exc)) < 1000, str(exc)[:300]
    assert time.monotonic() - start < SECONDS


@FUZZ
@given(doc=mutated(yaml.safe_load(TINY)), as_json=st.booleans())
def test_model_yaml_reader(tmp_path: Path, doc: Any, as_json: bool) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(_text(doc, as_json), encoding="utf-8")
    check(lambda p: load_model(str(p)), path)


@FUZZ
@given(doc=mutated(HF))
def test_hf_config_reader(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    check(lambda p: load_model(str(p)), path)


@FUZZ
@given(doc=mutated(toy_profile_dict()), as_json=st.booleans())
def test_profile_reader(tmp_path: Path, doc: Any, as_json: bool) -> None:
    path = tmp_path / "hw.yaml"
    path.write_text(_text(doc, as_json), encoding="utf-8")
    check(lambda p: load_hardware(str(p)), path)


STACK = yaml.safe_load((Path(__file__).resolve().parents[2] / "autopar/data/stacks/torchtitan-2025.06.yaml").read_text())
VARIANT = {
    "schema_version": 1,
    "name": "v",
    "base": "h100-sxm",
    "overrides": {"gpu": {"memory_gib": 94.0}},
    "power": {"tdp_w": 700, "limit_w": 500},
}


@FUZZ
@given(doc=mutated(STACK))
def test_stack_reader(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "st.yaml"
    path.write_text(_text(doc, False), encoding="utf-8")
    check(lambda p: load_stack(str(p)), path)


@FUZZ
@given(doc=mutated(VARIANT))
def test_derived_profile_reader(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(_text(doc, False), encoding="utf-8")
    check(lambda p: load_hardware(str(p)), path)


@FUZZ
@given(doc=st.sampled_from(DISTS).flatmap(mutated), as_json=st.booleans())
def test_distribution_mapping_reader(tmp_path: Path, doc: Any, as_json: bool) -> None:
    path = tmp_path / ("d.json" if as_json else "d.yaml")
    path.write_text(_text(doc, as_json), encoding="utf-8")
    check(load_distribution, path)


@FUZZ
@given(
    lines=st.lists(
        st.one_of(
            st.integers(min_value=-(10**25), max_value=10**25).map(str),
            st.text(max_size=10),
            st.builds(lambda v: json.dumps({"length": v}), values),
        ),
        max_size=8,
    ),
    suffix=st.sampled_from([".txt", ".jsonl"]),
)
def test_length_list_readers(tmp_path: Path, lines: list[str], suffix: str) -> None:
    path = tmp_path / f"l{suffix}"
    path.write_text("\n".join(line.replace("\r", "") for line in lines), encoding="utf-8")
    check(load_distribution, path)


@FUZZ
@given(raw=st.binary(max_size=200), suffix=st.sampled_from([".yaml", ".json", ".npy", ".txt"]))
def test_arbitrary_bytes(tmp_path: Path, raw: bytes, suffix: str) -> None:
    path = tmp_path / f"x{suffix}"
    path.write_bytes(raw)
    for load in (lambda p: load_model(str(p)), lambda p: load_hardware(str(p)), load_distribution):
        check(load, path)
