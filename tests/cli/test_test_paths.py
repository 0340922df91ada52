"""Every test path the docs, the Makefile, pyproject.toml and the code name is a file of this tree.

The tests sit by layer (tests/unit/<layer>/, tests/cli/, tests/properties/, tests/accuracy/,
tests/support/; docs/architecture.md), so a path of the flat layout before (tests/test_<name>.py), or
from a branch merged after it, points nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# this project's own layout only: other projects' test paths (tests/unittest/... of TensorRT-LLM) are quoted too
PATH = re.compile(r"(?<![\w/.-])tests/(?:(?:unit/\w+|cli|properties|accuracy|support)/)?\w+\.py\b")


def named() -> dict[str, list[str]]:
    """Each tests/... path named, with the files naming it."""
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted(p for d in ("autopar", "benchmarks", "tests") for p in (ROOT / d).rglob("*.py"))
    out: dict[str, list[str]] = {}
    for f in files:
        for path in PATH.findall(f.read_text(encoding="utf-8")):
            out.setdefault(path, []).append(str(f.relative_to(ROOT)))
    return out


def test_every_test_path_named_exists() -> None:
    found = named()
    assert "tests/cli/test_readme_samples.py" in found and "tests/support/typer_floor.py" in found
    missing = {path: where for path, where in found.items() if not (ROOT / path).is_file()}
    assert not missing, f"test paths that are no file: {missing}"
