"""Serving frameworks at a version: built-in data files (``autopar/data/frameworks/<name>-<version>.yaml``)
or a framework YAML file.

The schema (version 1, :class:`autopar.io.schema.FrameworkFile`) has one key per field of
:class:`autopar.spec.framework.Framework`; each engine value is a mapping that says what it does
and where it comes from:

```yaml
schema_version: 1
name: vllm                       # vllm | sglang | trtllm
version: "0.12"                  # quoted: the release it describes (its patch releases use it too)
label: vLLM 0.12
description: one line            # what it is
source: vllm-project/vllm v0.12.0
memory_fraction:
  value: 0.9
  mechanism: share of total GPU memory for weights, activations and KV (--gpu-memory-utilization)
  source: vllm/config/cache.py CacheConfig.gpu_memory_utilization default 0.9
step_overhead_s:
  value: 0.002
  mechanism: host work per engine step that the GPU waits for
  fitted_on: the vLLM 0.12.0 rows of benchmarks/data/serving_runs.csv
  fitted_by: python benchmarks/serving_accuracy.py --fit vllm@0.12
...                              # every Framework field, none left out
```

Every number has a range and unknown keys are errors (one line naming the file and the field);
docs/calibration.md keeps the history of each fitted value.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.cache import builtin
from autopar.io.reading import load_mapping
from autopar.spec.framework import IDENTITY, Framework, choose_version, parse_ref, version_key

SCHEMA_VERSION = 1
DEFAULT_FRAMEWORK = "vllm"  # --framework when neither it nor --emit is given


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """A framework reference read: the value, and the line saying which version's data it uses ("": its own)."""

    framework: Framework
    note: str = ""


def builtin_frameworks() -> list[tuple[str, str]]:
    """(name, version) of every built-in data file, by name and then version order."""
    root = resources.files("autopar") / "data" / "frameworks"
    out = []
    for p in root.iterdir():
        if p.name.endswith(".yaml"):
            name, _, version = p.name[:-5].partition("-")
            out.append((name, version))
    return sorted(out)


def _builtin(name: str, version: str) -> Framework:
    """A built-in framework's file read (io/cache.py keeps the value between runs)."""
    return builtin("framework", f"{name}-{version}", Framework, lambda: _read_builtin(name, version))


def _read_builtin(name: str, version: str) -> Framework:
    with resources.as_file(resources.files("autopar") / "data" / "frameworks" / f"{name}-{version}.yaml") as p:
        fw = parse_framework(load_mapping(p), where=str(p))
    if (fw.name, fw.version) != (name, version):
        raise SpecError(f"{p}: name and version ({fw.name} {fw.version}) must match the file name ({name}-{version})")
    return fw


def resolve_framework(ref: str | None, *, what: str = "`framework`") -> Resolved:
    """``NAME[@VERSION]`` (the newest known version when none is given; a version without its own data
    file uses the nearest, with a note), a framework .yaml path, or None for the default framework."""
    ref = DEFAULT_FRAMEWORK if ref is None else ref
    path = Path(ref)
    if path.suffix.lower() in (".yaml", ".yml"):
        return Resolved(framework=parse_framework(load_mapping(path), where=str(path)))
    name, version = parse_ref(ref, what=what)
    known = [v for n, v in builtin_frameworks() if n == name]
    choice = choose_version(name, version, known, what=what)
    return Resolved(framework=_builtin(name, choice.version), note=choice.note)


def load_framework(ref: str | None = None) -> Framework:
    """resolve_framework's value (its note dropped): for callers that name a known version."""
    return resolve_framework(ref).framework


def parse_framework(data: dict[str, Any], *, where: str) -> Framework:
    """A framework mapping (autopar.io.schema.FrameworkFile, every number bounded) as a Framework."""
    from autopar.io.schema import FrameworkFile, validate  # pydantic: only once a file is read

    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise SpecError(f"{where}: schema_version: framework is from a newer autopar (schema {version}, this one reads {SCHEMA_VERSION})")
    f = validate(FrameworkFile, data, where=where, err=SpecError)
    version_key(f.version, what=f"{where}: version")
    sizes = f.graph_sizes.value
    if sizes != sorted(set(sizes)):
        raise SpecError(f"{where}: graph_sizes.value: expected distinct batch sizes in increasing order")
    values: dict[str, Any] = {key: getattr(f, key) for key in IDENTITY}
    for key in FrameworkFile.model_fields:
        if key not in IDENTITY and key != "schema_version":
            values[key] = getattr(f, key).value
    values["graph_sizes"] = tuple(sizes)
    return Framework(**values)
