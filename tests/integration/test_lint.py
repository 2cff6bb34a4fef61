"""The linters the project's code is kept clean with: ``ruff check`` (its rules in ``pyproject.toml``'s ``[tool.ruff]``)
finds nothing in ``pipeline/``, ``tests/`` and ``benchmarks/`` (fault kind: an unused import or an undefined name that
only a run reaches, as a NameError in the open loop once reached CI), and ``mypy`` (``[tool.mypy]``) finds no type
error in ``pipeline/`` (fault kind: a None reaching arithmetic, an attribute of the wrong type; ``.ci/run`` runs it
before the tests too)."""

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


def test_mypy_finds_nothing():
    """mypy over ``pipeline/`` with the project's configuration (its cache under ``.venv/``: a warm run takes seconds,
    a cold one about 10 s of CPU)."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed in this environment (pip install -e '.[test]' installs it)")
    res = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert "Success: no issues found" in res.stdout, res.stdout[-2000:]


def test_a_function_of_nine_parameters_is_refused_in_the_package(tmp_path):
    """``[tool.ruff.lint]`` selects PLR0913 at ``max-args = 8`` (a dozen loose parameters shared by closures let a
    NameError reach CI): a package module with a function of nine parameters fails the check, one of eight passes,
    and a test file is exempt (``per-file-ignores``)."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed in this environment (pip install -e '.[test]' installs it)")
    nine = "def f(a, b, c, d, e, g, h, i, j):\n    return a\n"
    eight = "def f(a, b, c, d, e, g, h, i):\n    return a\n"

    def check(text: str, as_path: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", as_path, "-"],
                              cwd=REPO, input=text, capture_output=True, text=True, timeout=60)

    refused = check(nine, "pipeline/loadgen/nine.py")
    assert refused.returncode == 1 and "PLR0913" in refused.stdout, refused.stdout
    assert check(eight, "pipeline/loadgen/eight.py").returncode == 0
    assert check(nine, "tests/unit/nine.py").returncode == 0
