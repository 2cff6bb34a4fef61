"""Commands renamed to say what they do, their old names kept for one version: the old name runs the same command
after one line on stderr naming the new one (as pip and npm deprecate a command before they remove it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

#: old name -> the name that says what the command does.
RENAMED = {"summarize": "write-summaries", "summary": "verdict"}


def add_renamed(sub: Any, add: Callable[..., argparse.ArgumentParser], new: str,
                func: Callable[[argparse.Namespace], int], what: str, **site: Any) -> None:
    """Subcommand ``new`` and its old name (:data:`RENAMED`), deprecated, each made by ``add(sub, name, func, help=)``
    (the CLI's run-command maker); ``site``: the keywords of a ``--site`` option both take, when given."""
    old = next(o for o, n in RENAMED.items() if n == new)

    def deprecated(args: argparse.Namespace) -> int:
        print(f"batchmark: '{old}' is deprecated and goes in the next version; use 'batchmark {new}'", file=sys.stderr)
        return func(args)

    for parser in (add(sub, new, func, help=f"{what} (formerly '{old}')"),
                   add(sub, old, deprecated, help=f"deprecated: the old name of '{new}'")):
        if site:
            parser.add_argument("--site", **site)
