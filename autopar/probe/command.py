"""``run_profile``: what `autopar profile` does, in order.

1. check what can be checked without measuring: the ``--compare`` profile
   exists, torch is installed, the device is there, the output is writable;
2. measure (``launch``), with progress on stderr;
3. on the process holding rank 0: build the profile, validate it, write it
   atomically, read it back, and print the summary (and the comparison).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console

from autopar.errors import ProfileError
from autopar.io.files import output_target
from autopar.io.profiles import load_hardware, saved_profile_path
from autopar.io.reading import named
from autopar.probe.runtime import processes, require_torch, resolve_device
from autopar.probe.settings import settings_for


def profile_name(path: Path, hostname: str) -> str:
    """The profile's ``name``: the file's stem, or ``measured-HOST`` for the default file
    (``measured-HOST-cpu`` for the CPU one beside it)."""
    if path.stem and path.stem not in ("profile", "profile-cpu"):
        return path.stem
    suffix = "-cpu" if path.stem == "profile-cpu" else ""
    return "measured-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", hostname.split(".")[0]) or "host") + suffix


def check_writable(path: Path) -> None:
    """Fail now, not after minutes of measuring, if ``path`` cannot be written.

    Nothing is created: a run that fails leaves no folder behind (the folder of the
    saved profile is made only when the profile is written). Special files (devices,
    FIFOs, symlinks to them) are refused, as every output is.
    """
    target = output_target(path, option="`out`", err=ProfileError)
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest existing folder: the rest would be made in it
    if not folder.is_dir():
        raise ProfileError(f"`out` {named(path)}: {named(folder)} is not a folder")
    if target.parent.exists():
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".check", dir=target.parent)
        except OSError as exc:
            raise ProfileError(f"`out` {named(path)}: cannot write in {named(target.parent)} ({exc.strerror or exc})") from None
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise ProfileError(f"`out` {named(path)}: cannot create folders in {named(folder)} (permission denied)")


def default_output(kind: str) -> Path:
    """Where a run without --out writes: the saved profile that suggest reads when no --hardware is given,
    but only for a GPU measurement. A CPU one (no CUDA device: --device auto picks cpu) goes beside it, so
    that it never becomes every later suggest's hardware (issue 25: "11.2 GiB of a Intel(R) Xeon(R)")."""
    saved = saved_profile_path(instead=", or give `out=FILE`")
    return saved if kind == "cuda" else saved.with_name("profile-cpu.yaml")


def run_profile(*, out: Path | None, quick: bool, device: str, nproc: int | None, compare: str | None, console: Console) -> None:
    """`console`: where the summary goes, the CLI's (render/text.py: names escaped, at most 80 columns)."""
    if compare is not None and not compare.strip():
        raise ProfileError("`compare` is empty: give a built-in profile name (see `autopar hardware`) or a profile .yaml")
    processes(nproc, kind="cpu" if device == "cpu" else None)  # before torch is imported, and before any work
    reference = load_hardware(compare) if compare is not None else None
    if out is None:
        saved_profile_path(instead=", or give `out=FILE`")  # with no home, say so before any work
    torch = require_torch()
    kind = resolve_device(torch, device)
    settings = settings_for(kind, quick)
    path = out if out is not None else default_output(kind)
    from autopar.probe.launch import launch, torchrun_topology  # imports torch.distributed: only now

    topo = torchrun_topology()
    writer_rank = topo is None or topo.rank == 0
    if writer_rank:
        check_writable(path)
    measurements = launch(settings, nproc=nproc, console=Console(stderr=True))
    if measurements is None:
        return
    from autopar.probe.nvml import read_nvml
    from autopar.probe.report import print_compare, print_summary
    from autopar.probe.writer import build_profile, write_profile

    hostname = socket.gethostname()
    nvml = read_nvml() if kind == "cuda" else (None, f"not read: a {kind} run")
    doc = build_profile(
        measurements,
        name=profile_name(path, hostname),
        hostname=hostname,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        nvml=nvml,
    )
    write_profile(path, doc)
    written = load_hardware(str(path))
    print_summary(console, written, str(path))
    if nvml[0] is not None:
        said = nvml[0].as_provenance()
        console.print(
            f"NVML: {said['nvml_gpus']}, {said['nvml_memory_gib']} GiB, power limit "
            f"{said['nvml_power_limit_w']} W; {said['nvml_topology']}",
            markup=False,
            highlight=False,
        )
    if out is None and kind != "cuda":
        console.print(
            f"a CPU profile is not saved as the default hardware: pass --hardware {path} to use it", markup=False, highlight=False
        )
    if reference is not None:
        print_compare(console, written, reference)
