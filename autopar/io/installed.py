"""What is installed: this distribution's version, as written into profiles and printed by --version."""

from __future__ import annotations


def version() -> str:
    """The installed distribution's version (pyproject.toml), or "unknown" when run from a tree not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("autopar")
    except PackageNotFoundError:
        return "unknown"
