"""Atomic file writes for what autopar hands the user: profiles, launch scripts, plots, completions.

The text goes to a temporary file in the target's folder, is flushed to disk, then renamed over
the target (``os.replace``, atomic on POSIX), so a reader never sees half a file and a failed
write leaves the old one in place. The new file gets the usual permissions (0666 less the umask;
0777 less the umask when ``executable``), not the 0600 of a temporary file.

Only regular files are written: a target that is a device (``/dev/null``,
``/dev/full``), a FIFO, a socket or a directory, or a symlink to one, is refused
before anything is written (exit 2), so autopar never replaces a special file;
so is a file the command read as an input (the model, a profile, a length file:
the same file by device and inode, through any path or link).
A symlink to a regular file (or to a new path) is followed, and the file it
points to is replaced. A full disk or an I/O error is an :class:`OutputError`
(exit 3); any earlier file is left as it was.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from autopar.errors import AutoparError, OutputError, SpecError
from autopar.io.reading import input_named, named

_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG}  # the disk, not the user's choice of path
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def xdg_folder(own: str, xdg: str, fallback: str) -> Path | None:
    """$own, else $xdg/autopar, else ~/fallback/autopar (XDG Base Directory spec); None when there is no
    home (HOME unset and a uid with no passwd entry, as in a container run with a random uid)."""
    given = os.environ.get(own)
    if given:
        return Path(given)
    base = os.environ.get(xdg)
    if not base:
        try:
            base = str(Path.home() / fallback)
        except (RuntimeError, KeyError, OSError):  # Path.home(): "Could not determine home directory"
            return None
    return Path(base) / "autopar"


def exists(path: Path, *, folder: bool = False) -> bool:
    """path.exists() (path.is_dir() with `folder`), False where the OS refuses the name itself (too
    long, ENAMETOOLONG): no file can have it, so the caller reads it as a built-in name and refuses it
    there, naming it, instead of an OSError escaping as if writing the output had failed."""
    try:
        return path.is_dir() if folder else path.exists()
    except OSError:
        return False


def output_target(path: Path, *, option: str, err: type[AutoparError] = SpecError, updates_input: bool = False) -> Path:
    """The regular file (existing or new) that writing `path` replaces; special files are refused, and so is a
    file this command read as an input (unless `updates_input`: calibrate --save rewrites the profile it read)."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks, /proc/self/fd/N included
    except FileNotFoundError:
        return Path(os.path.realpath(path))  # a new file (or a symlink to one)
    except OSError as exc:
        raise err(f"{option} {named(path)}: cannot check the target ({exc.strerror or exc})") from None
    if stat.S_ISREG(mode):
        read_as = None if updates_input else input_named(path)
        if read_as is not None:
            raise err(f"{option} {named(path)}: this command reads that file (as {named(read_as)}); autopar does not overwrite its inputs")
        return Path(os.path.realpath(path))
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    via = " (through a symlink)" if os.path.islink(path) else ""
    raise err(f"{option} {named(path)}: is {kind}{via}; autopar writes only regular files")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(
    path: Path,
    data: str | bytes,
    *,
    option: str,
    executable: bool = False,
    err: type[AutoparError] = SpecError,
    make_parents: bool = False,
    updates_input: bool = False,
) -> None:
    """Write `data` to `path` atomically; an OSError becomes one line naming `option`.

    `make_parents` creates the folder first (the saved-profile location);
    otherwise a missing folder is an error.

    An interrupted write (Ctrl-C included) removes the temporary file and leaves
    any earlier file as it was.
    """
    payload = data.encode() if isinstance(data, str) else data
    shown = path
    path = output_target(path, option=option, err=err, updates_input=updates_input)
    folder = path.parent
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
        kind = OutputError if exc.errno in _OUTPUT_ERRNOS else err
        raise kind(f"{option} {named(shown)}: cannot write: {exc.strerror or exc}; any earlier file is unchanged") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
