"""Issue 13: every hostile input answers cleanly (table in tests/support/hostile.py).

Each row runs the real CLI (``python -m autopar``) in a fresh folder and checks
the exit code, that stderr is one line with the expected fragment and no
traceback (or, for a row that must succeed, the fragment on stdout), and the
time bound. Also here: byte-identical ``--json`` runs, and `autopar profile`
workers that die with their parent.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.hostile import CASES, TINY, Case, files, hw

ROOT = Path(__file__).resolve().parents[2]
HAS_TORCH = importlib.util.find_spec("torch") is not None
AUTOPAR = f"'{sys.executable}' -m autopar"


def _env(tmp: Path, extra: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOPAR_", "PYTHONIOENCODING"))}
    env = {**base, "AUTOPAR_HOME": str(tmp / "home"), "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "80"}
    return {**env, **{k: v.replace("{T}", str(tmp)) for k, v in extra.items()}}


def run_case(case: Case, tmp: Path) -> tuple[int, str, str, float]:
    command = case.setup(tmp).replace("{A}", AUTOPAR).replace("{T}", str(tmp))
    start = time.monotonic()
    res = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp,
        env=_env(tmp, case.env),
        capture_output=True,
        text=True,
        timeout=case.seconds + 60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return res.returncode, res.stdout, res.stderr, time.monotonic() - start


@pytest.mark.parametrize("case", CASES, ids=[f"{c.cause.split()[0]}-{c.name}" for c in CASES])
def test_hostile_input_answers_cleanly(case: Case, tmp_path: Path) -> None:
    if case.torch and not HAS_TORCH:
        pytest.skip("needs torch")
    code, out, err, seconds = run_case(case, tmp_path)
    assert "Traceback" not in err, err[-2000:]
    assert not case.absent or case.absent not in out + err, (out + err)[-2000:]
    assert code == case.code, (code, err[-500:])
    if case.code == 0:
        assert case.fragment in out, out[-500:]
    else:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and len(lines[0]) < 600, err[:2000]
        assert case.fragment in lines[0], lines[0]
        assert lines[0].startswith("autopar: error: " if case.code != 130 else "autopar: ")
    assert seconds < case.seconds, f"took {seconds:.1f} s, bound {case.seconds} s"


def test_every_cause_of_the_issue_has_rows() -> None:
    causes = {c.cause.split()[0] for c in CASES}
    assert causes >= {"1", "2", "3", "4", "5", "6", "7", "8", "10"}  # 9 (orphaned workers) is the test below
    assert causes >= {"26.3", "26.4", "26.6", "26.7", "26.8", "26.9"}  # issue 26's classes, the rest in their own rows


@pytest.mark.parametrize(
    "command",
    [
        ["suggest", "--gpus", "16"],
        ["suggest", "--gpus", "auto"],
        ["estimate", "--gpus", "8", "--tp", "2"],
        ["suggest", "--gpus", "8", "--seq-len-dist", "{T}/l.txt", "--global-batch", "64"],
        ["serve", "suggest", "--gpus", "8"],
    ],
    ids=["suggest", "gpus-auto", "estimate", "varlen", "serve"],
)
def test_json_is_byte_identical_between_runs(tmp_path: Path, command: list[str]) -> None:
    model = files(tmp_path, tiny__yaml=TINY, l__txt="100\n300\n2000\n")["tiny__yaml"]
    verb = command[:2] if command[0] == "serve" else command[:1]
    rest = [a.replace("{T}", str(tmp_path)) for a in command[len(verb) :]]
    args = [sys.executable, "-m", "autopar", *verb, model, "--hardware", hw(tmp_path), *rest, "--json"]
    runs = [subprocess.run(args, env=_env(tmp_path, {}), capture_output=True, check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].startswith(b"{") and b'"search_s"' not in runs[0]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not HAS_TORCH or not Path("/proc/self/task").exists(), reason="needs torch and Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_profile_workers_die_with_their_parent(tmp_path: Path, sig: signal.Signals) -> None:
    env = _env(tmp_path, {"AUTOPAR_PROBE_FAULT": "hang:1", "AUTOPAR_PROBE_TIMEOUT_S": "600"})
    parent = subprocess.Popen(
        [sys.executable, "-m", "autopar", "profile", "--device", "cpu", "--nproc", "2", "--quick", "--out", str(tmp_path / "p.yaml")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(workers) < 2:
            workers = [
                p
                for p in _children(parent.pid)
                if "autopar" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
                or "multiprocessing" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
            ]
            time.sleep(0.5)
        assert len(workers) >= 2, "the workers did not start"
        time.sleep(2.0)  # past the start-up of each worker (where die_with_parent is set)
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in workers):
            time.sleep(0.2)
        assert not any(_alive(p) for p in workers), "workers outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in workers:  # a failed run leaves none behind
            if _alive(p):
                os.kill(p, signal.SIGKILL)


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_failing_profile_creates_no_folder(tmp_path: Path) -> None:
    env = _env(tmp_path, {"AUTOPAR_PROBE_FAULT": "exit:1", "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    del env["AUTOPAR_HOME"]
    res = subprocess.run(
        [sys.executable, "-m", "autopar", "profile", "--device", "cpu", "--nproc", "2", "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and "rank 1 exited" in res.stderr
    assert not (tmp_path / "xdg").exists()
