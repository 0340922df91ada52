"""Lets ``python benchmarks/NAME.py`` import ``benchmarks.*`` as ``python -m benchmarks.NAME`` does.

A file run as a script has benchmarks/ on sys.path, not the repository root; an entry point imports this
module first (only when it has no package) and the root goes to the front of the path.
"""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path[:1]:
    sys.path.insert(0, ROOT)
