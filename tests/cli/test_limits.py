"""Issue 26: the one escaping function, the one width, the one config folder, the node's processes, the
output guard (the CLI rows are in tests/support/hostile.py; docs/limits.md states the contract)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autopar.errors import ProfileError, SpecError
from autopar.io import profiles
from autopar.io.files import output_target, write_atomic
from autopar.io.reading import forget_inputs, one_line, printable, read_text
from autopar.probe import runtime
from autopar.render.text import MIN_WIDTH, WIDTH, columns, console, wrap

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    assert printable("a\x1b]0;title\x07b") == "a\\x1b]0;title\\x07b"  # OSC 0: the window title
    assert printable("\x1b[2J\x9b2J") == "\\x1b[2J\\x9b2J"  # CSI, 7-bit and 8-bit
    assert printable("x\u202ey") == "x\\u202ey"  # right-to-left override
    assert printable("tab\tand\nnewline, café, 日本") == "tab\tand\nnewline, café, 日本"  # kept
    assert one_line("a\nb\x1b") == "a\\nb\\x1b"


@given(st.text())
def test_printable_leaves_no_control_and_is_idempotent(text: str) -> None:
    once = printable(text)
    assert not CONTROL.search(once)
    assert printable(once) == once
    assert printable(text.replace("\x1b", "")).count("\\x1b") == text.replace("\x1b", "").count("\\x1b")


def test_the_console_escapes_every_cell(capsys: pytest.CaptureFixture[str]) -> None:
    from autopar.render.text import table

    t = table("name", left=("name",))
    t.add_row("m\x1b]52;c;cGFzdGU=\x07")  # OSC 52: writes the clipboard
    console().print(t)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "m\\x1b]52;c;cGFzdGU=\\x07" in out


@pytest.mark.parametrize(("terminal", "width"), [(None, WIDTH), (0, MIN_WIDTH), (1, MIN_WIDTH), (39, MIN_WIDTH), (60, 60), (200, WIDTH)])
def test_columns_has_a_floor_and_a_ceiling(terminal: int | None, width: int) -> None:
    assert columns(terminal) == width


@pytest.mark.parametrize("width", [-5, 0, 1, 2])
def test_wrap_ends_at_any_width(width: int) -> None:
    lines = [t.plain for t in wrap("one two three", width=width, indent=2)]
    assert "".join(line.strip() for line in lines) == "onetwothree"


def _no_home(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HOME", "XDG_CONFIG_HOME", "AUTOPAR_HOME"):
        monkeypatch.delenv(name, raising=False)

    def nobody(uid: int) -> None:
        raise KeyError(uid)

    monkeypatch.setattr("pwd.getpwuid", nobody)


def test_config_dir_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_home(monkeypatch)
    assert profiles.config_dir() is None and profiles.saved_profile() is None
    with pytest.raises(ProfileError, match="no folder for the saved profile: HOME is not set"):
        profiles.saved_profile_path()
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert profiles.config_dir() == tmp_path / "h" / ".config" / "autopar"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "x"))
    assert profiles.saved_profile_path() == tmp_path / "x" / "autopar" / "profile.yaml"
    monkeypatch.setenv("AUTOPAR_HOME", str(tmp_path / "a"))
    assert profiles.saved_profile_path() == tmp_path / "a" / "profile.yaml"


def test_resolve_hardware_without_a_home(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_home(monkeypatch)
    hw, why = profiles.resolve_hardware(None)
    assert hw.name == "h100-sxm" and "no saved profile" in why


def test_processes_of_a_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "cores", lambda: 4)
    assert runtime.processes(None, kind="cpu") == 2 and runtime.processes(None, kind="cuda", gpus=8) == 8
    assert runtime.processes(4, kind="cpu") == 4 and runtime.processes(1024, kind=None) == 1024
    with pytest.raises(SpecError, match=r"`nproc` must be at most 4 \(4 CPU cores here"):
        runtime.processes(5, kind="cpu")
    with pytest.raises(SpecError, match="only 8 GPU"):
        runtime.processes(9, kind="cuda", gpus=8)
    with pytest.raises(SpecError, match=r"`nproc` must be at most 1,024 \(the GPUs of one node\), got 100,000"):
        runtime.processes(100_000, kind=None)
    with pytest.raises(SpecError, match="`nproc`: must be >= 1, got 0"):
        runtime.processes(0, kind="cpu")
    monkeypatch.setattr(runtime, "cores", lambda: 1)
    assert runtime.processes(2, kind="cpu") == 2  # the CPU default runs on one core too


def test_an_input_is_never_an_output(tmp_path: Path) -> None:
    forget_inputs()
    model = tmp_path / "m.yaml"
    model.write_text("name: m\n")
    (tmp_path / "hard.sh").hardlink_to(model)
    (tmp_path / "soft.sh").symlink_to(model)
    other = tmp_path / "other.sh"
    other.write_text("x")
    assert output_target(model, option="--emit-out") == model  # not read yet
    read_text(model)
    for path in (model, tmp_path / "hard.sh", tmp_path / "soft.sh"):
        with pytest.raises(SpecError, match=r"--emit-out .*: this command reads that file \(as .*m\.yaml\)"):
            write_atomic(path, "echo", option="--emit-out")
    assert model.read_text() == "name: m\n"
    write_atomic(other, "y", option="--emit-out")
    write_atomic(model, "name: n\n", option="calibrate --save", updates_input=True)  # on purpose
    assert model.read_text() == "name: n\n" and os.path.exists(other)
    forget_inputs()
    write_atomic(model, "name: o\n", option="--emit-out")  # a new command
