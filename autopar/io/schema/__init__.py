"""The file formats autopar reads, as pydantic models: model specs, hardware
profiles and length distributions (``autopar schema model|hardware|distribution``
prints their JSON Schema, for editors).

Every model forbids unknown keys and every number is constrained: positive,
finite, and bounded by :mod:`autopar.spec.limits`. Ints may be written as
integral floats (``1.0e+3``); nothing else is coerced (``"32"`` is not 32).
:func:`validate` turns pydantic's errors into one line naming the file and
the field. Checks that involve several fields stay with the values they build
(``ModelSpec``, ``MoESpec``...) or with the loader.

One module per kind of file: ``model``, ``hardware`` (profiles and their
variants), ``stack``, ``framework`` (serving frameworks at a version) and
``distribution``; ``fields`` holds the bounded values they are built of and
``messages`` the one-line errors. ``from autopar.io.schema import X`` reaches
each of them.

pydantic is imported by this package (and the readers built on it) only, and
only when a file is read, so that ``autopar --help`` does not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # the formats, by kind, and the bounded values io/hf_schema.py builds on
    from autopar.io.schema.distribution import ComponentFile, DistFile, LognormalFile, MixtureEntry
    from autopar.io.schema.fields import (
        Experts,
        Experts0,
        Heads,
        Layers,
        Layers0,
        Small,
        Small0,
        Text,
        Tokens,
        Vocab,
        Width,
        Width0,
    )
    from autopar.io.schema.framework import FrameworkFile
    from autopar.io.schema.hardware import ProfileFile, VariantFile
    from autopar.io.schema.messages import describe, validate
    from autopar.io.schema.model import ModelFile
    from autopar.io.schema.stack import StackFile

# Each name is imported from its module when first read (PEP 562): a reader builds the pydantic
# models of its own format only (a training `suggest` builds no serving-framework or distribution model).
_HOME = {
    **dict.fromkeys(("ComponentFile", "DistFile", "LognormalFile", "MixtureEntry"), "distribution"),
    **dict.fromkeys(
        ("Experts", "Experts0", "Heads", "Layers", "Layers0", "Small", "Small0", "Text", "Tokens", "Vocab", "Width", "Width0"), "fields"
    ),
    "FrameworkFile": "framework",
    "ProfileFile": "hardware",
    "VariantFile": "hardware",
    "describe": "messages",
    "validate": "messages",
    "ModelFile": "model",
    "StackFile": "stack",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ComponentFile",
    "DistFile",
    "Experts",
    "Experts0",
    "FrameworkFile",
    "Heads",
    "Layers",
    "Layers0",
    "LognormalFile",
    "MixtureEntry",
    "ModelFile",
    "ProfileFile",
    "Small",
    "Small0",
    "StackFile",
    "Text",
    "Tokens",
    "VariantFile",
    "Vocab",
    "Width",
    "Width0",
    "describe",
    "schemas",
    "validate",
]


def schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema of each format, by the name `autopar schema` takes."""
    kinds = (
        ("model", "ModelFile"),
        ("hardware", "ProfileFile"),
        ("distribution", "DistFile"),
        ("stack", "StackFile"),
        ("framework", "FrameworkFile"),
    )
    return {
        name: {"$schema": "https://json-schema.org/draft/2020-12/schema", **__getattr__(cls).model_json_schema()} for name, cls in kinds
    }
