"""The counts the README and the getting-started guide state about the project itself, checked against pytest's own
collection: the developer's loop (``-m unit``) and the test command's first pass (``-m "not alone"``) and second
(``-m alone``).  A stated count may trail the suite by a tenth (tests are added between two measured runs of the
test command, which is when the prose is updated); past that the prose has drifted."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow  # two pytest collections of the whole suite (about 10 s each)

DOCS = ("README.md", "docs/getting-started.md")


def _collected(marker: str) -> int:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker],
                         cwd=REPO, capture_output=True, text=True, timeout=300).stdout
    found = re.search(r"(\d+)(?:/\d+)? tests? collected", out)
    assert found, out[-500:]
    return int(found.group(1))


def _stated(pattern: str) -> dict[str, int]:
    out = {}
    for name in DOCS:
        hit = re.search(pattern, (REPO / name).read_text(encoding="utf-8"))
        assert hit, f"{name}: no count matching {pattern!r}"
        out[name] = int(hit.group(1).replace(",", ""))
    return out


def _near(stated: dict[str, int], real: int, what: str) -> None:
    for name, n in stated.items():
        assert abs(n - real) <= 0.1 * real, f"{name} says {n:,} {what}; pytest collects {real:,}"


def test_the_unit_loops_count_is_the_suites():
    _near(_stated(r"-m unit`[^(]*\((\d[\d,]*) tests"), _collected("unit"), "tests in the unit loop")


def test_the_test_commands_counts_are_the_suites():
    _near(_stated(r"for (?:the )?(\d[\d,]*) tests"), _collected("not alone"), "tests in the first pass")
    _near(_stated(r"the (\d+) `alone` tests"), _collected("alone"), "alone tests")
