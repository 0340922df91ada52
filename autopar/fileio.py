"""Atomic file writes for what autopar hands the user: launch scripts and plots.

The text goes to a temporary file in the target's folder, is flushed to disk, then renamed over
the target (``os.replace``, atomic on POSIX), so a reader never sees half a file and a failed
write leaves the old one in place. The new file gets the usual permissions (0666 less the umask;
0777 less the umask when ``executable``), not the 0600 of a temporary file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from autopar.errors import SpecError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: str | bytes, *, option: str, executable: bool = False) -> None:
    """Write `data` to `path` atomically; an OSError becomes a one-line SpecError naming `option`."""
    payload = data.encode() if isinstance(data, str) else data
    folder = path.parent if str(path.parent) else Path(".")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, (0o777 if executable else 0o666) & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise SpecError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
