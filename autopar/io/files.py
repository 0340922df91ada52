"""Atomic file writes for what autopar hands the user: profiles, launch scripts, plots, completions.

The text goes to a temporary file in the target's folder, is flushed to disk, then renamed over
the target (``os.replace``, atomic on POSIX), so a reader never sees half a file and a failed
write leaves the old one in place. The new file gets the usual permissions (0666 less the umask;
0777 less the umask when ``executable``), not the 0600 of a temporary file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from autopar.errors import AutoparError, SpecError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: str | bytes, *, option: str, executable: bool = False,
                 err: type[AutoparError] = SpecError, make_parents: bool = False) -> None:
    """Write `data` to `path` atomically; an OSError becomes one line naming `option`.

    `make_parents` creates the folder first (the saved-profile location);
    otherwise a missing folder is an error.

    An interrupted write (Ctrl-C included) removes the temporary file and leaves
    any earlier file as it was.
    """
    payload = data.encode() if isinstance(data, str) else data
    folder = path.parent if str(path.parent) else Path(".")
    tmp = None
    try:
        if make_parents:
            folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, (0o777 if executable else 0o666) & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise err(f"{option} {path}: cannot write: {exc.strerror or exc}; any earlier file is unchanged") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
