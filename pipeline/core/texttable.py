"""Plain text for the terminal: the CLI's tables (``show``, ``diff``, ``capacity``), laid out by ``tabulate``, and
:func:`printable`, through which every text the CLI prints passes.

Cells arrive already formatted as strings (each command chooses its own units and digits), so
tabulate only aligns them: number parsing is off, and trailing blanks are stripped from each line.

Names in runs come from outside (imported files, committed runs, servers): a model name
``"evil\x1b[2J\x1b]0;PWNED\x07"`` printed raw clears the screen and sets the window title.  Control
characters are shown escaped, as Python's ``repr`` writes them (``\x1b``), so a terminal never acts on them.
"""

from __future__ import annotations

import re
from typing import Any

import tabulate as _tabulate

ALIGN = {"l": "left", "r": "right"}

# C0 and C1 controls (ESC starts every terminal sequence; 0x9b is a one-byte CSI), DEL, and the invisible
# direction marks and overrides that reorder what a terminal shows (U+200E/F, U+202A–E, U+2066–9).
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
_KEEP_LINES = re.compile(f"[{_CONTROLS}]")
_ONE_LINE = re.compile(f"[{_CONTROLS}\t\n\u2028\u2029]")


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(m: re.Match[str]) -> str:
    if m.group() in _NAMED:
        return _NAMED[m.group()]
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: Any, one_line: bool = False) -> str:
    """``text`` safe to print on a terminal: every control character written as its escape (``\x1b``, ``\x07``,
    ``\u202e``), as ``repr`` writes it; other text unchanged.

    Line feeds and tabs are kept unless ``one_line`` (a table cell, an error message), where they are escaped too
    (``\n``) so a name cannot start a line of its own.  Carriage returns are always escaped (they overwrite a line).
    """
    return (_ONE_LINE if one_line else _KEEP_LINES).sub(_escaped, str(text))


def text_table(header: list[str], rows: list[list[Any]], align: str | None = None, rule: bool = True) -> list[str]:
    """The lines of a table: ``header``, a rule of dashes under it when ``rule``, then ``rows``.

    ``align`` has one letter per column, ``l`` or ``r`` (default: all left); columns are parted
    by two blanks.  Every cell passes :func:`printable` (one line): a name cannot act on the terminal or split a row.
    """
    colalign = tuple(ALIGN[a] for a in (align or "l" * len(header)))
    padding, _tabulate.MIN_PADDING = _tabulate.MIN_PADDING, 0  # columns as wide as their widest cell, no wider
    try:
        text = _tabulate.tabulate([[printable(x, one_line=True) for x in r] for r in rows],
                                  headers=[printable(h, one_line=True) for h in header],
                                  tablefmt="simple" if rule else "plain", colalign=colalign, disable_numparse=True)
    finally:
        _tabulate.MIN_PADDING = padding
    return [line.rstrip() for line in text.splitlines()]
