"""How values read from inputs are written in messages and tables: counts, and names made safe to print.

Pure string functions below io/ (whose messages name what it read) and render/ (which prints it).
"""

from __future__ import annotations

import re


def counted(n: int, noun: str) -> str:
    """``1 GPU``, ``8 GPUs``: a count and its noun, plural unless one (nouns taking -s)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


# Characters a terminal acts on instead of showing: C0 controls but newline and tab, DEL, C1 controls (0x9b is an
# 8-bit CSI), and the bidirectional overrides and isolates that reorder what is shown (Unicode TR9, "Trojan Source").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every terminal control character written as an escape (ESC as \\x1b): nothing read from an
    input (a model, GPU or file name, a value) can set the window title, clear the screen or reach the clipboard.
    Newlines and tabs are kept; the result has no control character left, so escaping twice changes nothing."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text
