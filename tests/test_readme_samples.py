"""The README's sample outputs are what the commands print.

A fenced block after the line ``<!-- sample: tests/test_readme_samples.py runs it -->`` holds one
or more ``$ autopar ...`` commands, each followed by lines it must print: every line must appear in
the output, a line ending in ``...`` as a prefix, and a lone ``...`` stands for lines left out.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar.cli import app

ROOT = Path(__file__).resolve().parent.parent


MARK = "<!-- sample: tests/test_readme_samples.py runs it -->\n```\n"


def samples() -> list[tuple[str, list[str]]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(re.escape(MARK) + r"(.*?)```", text, flags=re.S):
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


@pytest.mark.parametrize(("command", "expected"), samples(), ids=lambda v: v if isinstance(v, str) else "")
def test_readme_sample_is_what_the_command_prints(command: str, expected: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert samples(), "no checked samples in README.md"
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(app, shlex.split(command)[1:])
    assert res.exit_code == 0, res.output
    printed = [line.rstrip() for line in res.output.split("\n")]
    missing = [line for line in expected
               if not any(p.startswith(line[:-3]) if line.endswith("...") else p == line for p in printed)]
    assert not missing, "README sample is stale; the command now prints:\n" + res.output
