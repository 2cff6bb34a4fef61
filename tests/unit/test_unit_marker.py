"""The ``unit`` marker's lists (tests/unit/conftest.py) name tests and fixtures that exist.

A renamed test would silently become ``unit`` again (and start its process in the developer's loop, where the
guard then fails it); a renamed fixture would do the same for every test using it.  These checks read the test
files as text (``ast``), so they start nothing and are ``unit`` themselves.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.conftest import NOT_UNIT_FIXTURES, NOT_UNIT_TESTS

TESTS = Path(__file__).resolve().parents[1]


def _functions(path: Path) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_left_out_exists():
    here = Path(__file__).resolve().parent
    missing = [key for key in NOT_UNIT_TESTS
               if not (here / key.split("::")[0]).is_file()
               or key.split("::")[1] not in _functions(here / key.split("::")[0])]
    assert missing == []


def test_every_fixture_left_out_is_defined_in_the_tests():
    defined = set().union(*(_functions(p) for p in TESTS.rglob("*.py")))
    assert sorted(set(NOT_UNIT_FIXTURES) - defined) == []
