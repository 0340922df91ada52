"""The sample outputs of README.md and docs/*.md are what the commands print.

A fenced block after the line ``<!-- sample: tests/cli/test_readme_samples.py runs it -->`` holds one
or more ``$ autopar ...`` commands, each followed by lines it must print: every line must appear in
the output, a line ending in ``...`` as a prefix, and a lone ``...`` stands for lines left out.
Samples that take more than a few seconds (``calibrate``: two torch processes) are marked
``<!-- slow sample: ... -->`` and run with ``AUTOPAR_SLOW_SAMPLES=1`` (pytest marker ``slow``).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar.cli import app

ROOT = Path(__file__).resolve().parents[2]


MARK = "<!-- sample: tests/cli/test_readme_samples.py runs it -->\n```\n"
SLOW_MARK = "<!-- slow sample: tests/cli/test_readme_samples.py runs it with AUTOPAR_SLOW_SAMPLES=1 -->\n```\n"
SLOW = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("AUTOPAR_SLOW_SAMPLES") != "1", reason="a slow sample: set AUTOPAR_SLOW_SAMPLES=1"),
]


def pages() -> list[Path]:
    """The pages whose samples run: the README, then docs/ in name order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def samples(mark: str = MARK, files: list[Path] | None = None) -> list[tuple[str, list[str]]]:
    text = "\n".join(page.read_text(encoding="utf-8") for page in (pages() if files is None else files))
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(re.escape(mark) + r"(.*?)```", text, flags=re.S):
        lines = block.rstrip("\n").split("\n")
        while lines:
            command = lines.pop(0)[2:]
            while command.endswith("\\"):
                command = command[:-1] + " " + lines.pop(0).strip()
            expected = []
            while lines and not lines[0].startswith("$ "):
                line = lines.pop(0).rstrip()
                if line.strip() and line.strip() != "...":
                    expected.append(line)
            out.append((command, expected))
    return out


@pytest.mark.parametrize(
    ("command", "expected"),
    [*samples(), *(pytest.param(*s, marks=SLOW) for s in samples(SLOW_MARK))],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_readme_sample_is_what_the_command_prints(command: str, expected: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert samples(), "no checked samples in README.md or docs/"
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(app, shlex.split(command)[1:])
    assert res.exit_code == 0, res.output
    printed = [line.rstrip() for line in res.output.split("\n")]
    missing = [line for line in expected if not any(p.startswith(line[:-3]) if line.endswith("...") else p == line for p in printed)]
    assert not missing, "README sample is stale; the command now prints:\n" + res.output


def test_the_samples_cover_every_command_family() -> None:
    """suggest, estimate, serve and the variable-length estimate run in CI; calibrate when asked (slow)."""
    commands = [c.split()[1:3] for c, _ in samples()]
    for family in (["suggest"], ["estimate"], ["serve", "suggest"], ["serve", "estimate"]):
        assert any(c[: len(family)] == family for c in commands), family
    assert any("--seq-len-dist" in c for c, _ in samples())
    assert any(c.split()[1] == "calibrate" for c, _ in samples(SLOW_MARK))


def test_the_readme_shows_a_suggest_and_a_serve_suggest() -> None:
    """The README's two worked examples are checked samples, and the docs hold the rest."""
    readme = [c.split()[1:3] for c, _ in samples(files=[ROOT / "README.md"])]
    assert ["suggest", "llama3-70b"] in readme and ["serve", "suggest"] in readme
    assert len(samples()) > len(readme)


def test_every_sample_marker_opens_a_block() -> None:
    """A marker not followed by a fenced block would silently check nothing."""
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for mark in (MARK, SLOW_MARK):
            head = mark.split("\n")[0]
            assert text.count(head + "\n") == text.count(mark), f"{page.name}: {head} without a ``` block after it"


def test_every_sample_marker_is_one_this_file_reads() -> None:
    """A marker naming another path (this file's before tests/cli/) would be skipped, checking nothing."""
    heads = {mark.split("\n")[0] for mark in (MARK, SLOW_MARK)}
    for page in pages():
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith(("<!-- sample:", "<!-- slow sample:")):
                assert line in heads, f"{page.name}: {line!r} is not {' or '.join(sorted(heads))}"
