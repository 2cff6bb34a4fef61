"""Plain-text tables for the CLI (``show``, ``diff``, ``capacity``), laid out by ``tabulate``.

Cells arrive already formatted as strings (each command chooses its own units and digits), so
tabulate only aligns them: number parsing is off, and trailing blanks are stripped from each line.
"""

from __future__ import annotations

from typing import Any

import tabulate as _tabulate

ALIGN = {"l": "left", "r": "right"}


def text_table(header: list[str], rows: list[list[Any]], align: str | None = None, rule: bool = True) -> list[str]:
    """The lines of a table: ``header``, a rule of dashes under it when ``rule``, then ``rows``.

    ``align`` has one letter per column, ``l`` or ``r`` (default: all left); columns are parted
    by two blanks.
    """
    colalign = tuple(ALIGN[a] for a in (align or "l" * len(header)))
    padding, _tabulate.MIN_PADDING = _tabulate.MIN_PADDING, 0  # columns as wide as their widest cell, no wider
    try:
        text = _tabulate.tabulate([[str(x) for x in r] for r in rows], headers=header,
                                  tablefmt="simple" if rule else "plain", colalign=colalign, disable_numparse=True)
    finally:
        _tabulate.MIN_PADDING = padding
    return [line.rstrip() for line in text.splitlines()]
