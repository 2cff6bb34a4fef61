"""The ``unit`` marker (tests/unit/conftest.py): its guard refuses a process, and its fixture list names fixtures
that exist.

A renamed fixture would silently make every test using it ``unit`` again (and start its process in the
developer's loop, where the guard then fails it).  These checks read the test
files as text (``ast``), so they start nothing and are ``unit`` themselves.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from tests.unit.conftest import _REFUSED, NOT_UNIT_FIXTURES, _Refused

TESTS = Path(__file__).resolve().parents[1]


def _functions(path: Path) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_a_unit_test_that_starts_a_process_is_refused(request):
    """The guard itself: this test is ``unit``, so starting a process here raises, naming where the test belongs,
    and is recorded for :func:`tests.unit.conftest._unit_started_nothing` (cleared below: this refusal was asked
    for).  Without the guard ``true`` would run and exit 0."""
    with pytest.raises(_Refused, match="move it to tests/integration"):
        subprocess.run(["true"], check=True)
    refused = request.node.stash[_REFUSED]
    assert len(refused) == 1 and "starts a process" in refused[0]
    refused.clear()


def test_every_fixture_left_out_is_defined_in_the_tests():
    defined = set().union(*(_functions(p) for p in TESTS.rglob("*.py")))
    assert sorted(set(NOT_UNIT_FIXTURES) - defined) == []
