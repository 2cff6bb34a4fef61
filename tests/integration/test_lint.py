"""The linter the project's code is kept clean with: ``ruff check`` (its rules in ``pyproject.toml``'s ``[tool.ruff]``)
finds nothing in ``pipeline/``, ``tests/`` and ``benchmarks/`` (fault kind: an unused import or an undefined name that
only a run reaches, as a NameError in the open loop once reached CI)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed in this environment (pip install -e '.[test]' installs it)")
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "pipeline", "tests", "benchmarks"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
