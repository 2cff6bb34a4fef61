"""The commands' work behind the CLI's argument parsing (one module per command that does more than one call, as
asv's ``commands/``): each takes plain values, prints through :func:`print` and returns the exit status.
"""

from __future__ import annotations

import builtins
import sys

from pipeline.core.texttable import printable


def print(*values: object, sep: str = " ", end: str = "\n", file=None, flush: bool = False) -> None:  # noqa: A001
    """Every text this command prints, through :func:`pipeline.core.texttable.printable`: names from runs, imports and
    servers reach the terminal with their control characters escaped (``\x1b``), never as terminal sequences.

    It stands in for the built-in ``print`` in this module on purpose, so no output path of a command can forget it.
    """
    builtins.print(printable(sep.join(str(v) for v in values)), end=end, file=file or sys.stdout, flush=flush)
