"""Shell completion: the callbacks behind ``autopar <TAB>``, and the scripts in completions/.

The scripts are Typer's own (the same text ``autopar --show-completion`` prints and
``autopar --install-completion`` installs): each asks ``autopar`` itself for candidates, with
``_AUTOPAR_COMPLETE`` set, so completion follows the installed version. Regenerate them after
changing Typer or the scripts' names with

    python -m autopar.completions            # writes completions/autopar.bash, _autopar, autopar.fish
    python -m autopar.completions --check    # exit 1 if the files differ from what would be written

The callbacks import what they list lazily, so that the CLI module stays fast to import.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROG = "autopar"
COMPLETE_VAR = "_AUTOPAR_COMPLETE"
# shell -> file name under completions/ (zsh wants _NAME on its $fpath)
SCRIPTS = {"bash": "autopar.bash", "zsh": "_autopar", "fish": "autopar.fish"}
SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def _paths(incomplete: str, suffixes: tuple[str, ...]) -> list[tuple[str, str]]:
    """Folders and files with one of `suffixes` that start with `incomplete`."""
    folder, _, stem = incomplete.rpartition("/")
    base = Path(folder + "/" if folder else ".")
    if folder == "" and incomplete.startswith("/"):
        base = Path("/")
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return []
    out = []
    for entry in entries:
        if not entry.name.startswith(stem) or (entry.name.startswith(".") and not stem.startswith(".")):
            continue
        shown = f"{folder}/{entry.name}" if folder or incomplete.startswith("/") else entry.name
        if entry.is_dir():
            out.append((shown + "/", "folder"))
        elif entry.suffix.lower() in suffixes:
            out.append((shown, "file"))
    return out


def complete_model(incomplete: str) -> list[tuple[str, str]]:
    """MODEL: built-in presets, then model YAML / config.json files and folders."""
    from autopar.io.models import preset_names

    presets = [(name, "preset") for name in preset_names() if name.startswith(incomplete)]
    return presets + _paths(incomplete, SPEC_SUFFIXES)


def complete_hardware(incomplete: str) -> list[tuple[str, str]]:
    """--hardware: built-in profiles, then profile YAML files and folders."""
    from autopar.io.profiles import builtin_names

    names = [(name, "built-in profile") for name in builtin_names() if name.startswith(incomplete)]
    return names + _paths(incomplete, (".yaml", ".yml"))


def complete_stack(incomplete: str) -> list[tuple[str, str]]:
    """--stack: built-in execution stacks (NAME, then NAME@VERSION), then stack YAML files."""
    from autopar.io.stacks import builtin_stacks, stack_versions

    refs = [(name, "built-in stack, newest version") for name in builtin_stacks()]
    refs += [(f"{name}@{v}", "built-in stack version") for name in builtin_stacks() for v in stack_versions(name)]
    names = [(ref, what) for ref, what in refs if ref.startswith(incomplete)]
    return names + _paths(incomplete, (".yaml", ".yml"))


def complete_emit(incomplete: str) -> list[tuple[str, str]]:
    """--emit: the launch formats."""
    from autopar.advise.launch import EMIT_KINDS, FRAMEWORK

    return [
        (k, ("sbatch script, " if k.startswith("slurm") else "torchrun, ") + FRAMEWORK[k]) for k in EMIT_KINDS if k.startswith(incomplete)
    ]


def complete_strategy(incomplete: str) -> list[tuple[str, str]]:
    """--varlen-strategy: the variable-length strategies and what each models."""
    from autopar.advise.varlen import STRATEGY_INFO

    return [(name, info.label) for name, info in STRATEGY_INFO.items() if name.startswith(incomplete)]


def complete_framework(incomplete: str) -> list[tuple[str, str]]:
    """serve --framework and serve --emit: the serving engines."""
    from autopar.spec.framework import FRAMEWORKS

    return [(name, "serving engine") for name in FRAMEWORKS if name.startswith(incomplete)]


def complete_weights(incomplete: str) -> list[tuple[str, str]]:
    """serve --weights: the weight formats."""
    from autopar.spec.serve import WEIGHT_DTYPES

    return [(name, "weights") for name in WEIGHT_DTYPES if name.startswith(incomplete)]


def complete_recompute(incomplete: str) -> list[tuple[str, str]]:
    """--recompute: the activation-recompute modes."""
    from autopar.spec.plan import RECOMPUTE

    return [(name, "recompute") for name in RECOMPUTE if name.startswith(incomplete)]


def complete_schema(incomplete: str) -> list[tuple[str, str]]:
    """schema KIND: the file kinds with a JSON Schema."""
    from autopar.io.schema import schemas

    return [(name, "file kind") for name in schemas() if name.startswith(incomplete)]


def script(shell: str) -> str:
    """The completion script Typer writes for `shell` (bash, zsh or fish), newline-terminated."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell) + "\n"


def default_dir() -> Path:
    """completions/ at the repository root (next to the autopar package)."""
    return Path(__file__).resolve().parent.parent / "completions"


def stale(folder: Path) -> list[str]:
    """Names of the scripts under `folder` that are missing or differ from script()."""
    out = []
    for shell, name in SCRIPTS.items():
        path = folder / name
        if not path.is_file() or path.read_text() != script(shell):
            out.append(name)
    return out


def write_all(folder: Path) -> list[Path]:
    from autopar.io.files import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in SCRIPTS.items():
        write_atomic(folder / name, script(shell), option="completions")
        written.append(folder / name)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    rest = [a for a in args if a != "--check"]
    folder = Path(rest[0]) if rest else default_dir()
    if check:
        bad = stale(folder)
        if bad:
            print(f"stale completion scripts in {folder}: {', '.join(bad)}; run: python -m autopar.completions", file=sys.stderr)
            return 1
        return 0
    for path in write_all(folder):
        print(os.fspath(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
