"""autopar under the lowest Typer pyproject.toml allows (`make typer-floor` installs it in its own venv).

Not a pytest file: it runs with only autopar's runtime dependencies. Each command must exit with its
expected code and print no traceback; Typer 0.12.0-0.15.3 fail here (unions such as `Path | None`,
or help with Click 8.2+), 0.15.4 (which holds Click below 8.2) passes.
"""

from __future__ import annotations

import os
import subprocess
import sys

COMMANDS = [
    (["--help"], 0),
    (["--version"], 0),
    (["suggest", "--help"], 0),
    (["serve", "suggest", "--help"], 0),
    (["suggest", "llama3-8b", "--gpus", "8", "--top", "3"], 0),
    (["estimate", "llama3-8b", "--gpus", "8", "--tp", "2", "--json"], 0),
    (["serve", "suggest", "llama3.1-8b", "--gpus", "8", "--isl", "1024", "--osl", "128"], 0),
    (["models"], 0),
    (["--show-completion", "bash"], 0),
    (["suggest", "no-such-model", "--gpus", "8"], 2),
    (["suggest", "llama3-8b", "--gpus", "8", "--top", "0"], 2),
]


def main() -> int:
    failed = 0
    for args, code in COMMANDS:
        res = subprocess.run([sys.executable, "-m", "autopar", *args], capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
        if res.returncode != code or "Traceback" in res.stdout + res.stderr:
            failed += 1
            print(f"FAIL autopar {' '.join(args)}: exit {res.returncode}, want {code}\n{res.stderr[-500:]}")
    import typer

    print(f"typer {typer.__version__}: {len(COMMANDS) - failed} of {len(COMMANDS)} commands as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
