"""Shared fixtures: a scratch project root (BATCHMARK_ROOT) with the real hardware profiles and templates."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Every show, diff, plan and predict document a test makes, in process or from a command it starts, is checked
# against its published contract (pipeline.core.contracts): a producer that breaks the contract fails its test.
os.environ["BATCHMARK_CHECK_CONTRACTS"] = "1"
TINY_CONFIG = REPO / "tests" / "data" / "tiny.yaml"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m unit`` collect ``tests/unit`` alone: the marker is given there only (``tests/unit/conftest.py``), and
    importing the other folders' modules costs the developer's loop a second for nothing."""
    if config.getoption("markexpr", "") == "unit" and collection_path.parent == Path(__file__).resolve().parent \
            and collection_path.is_dir() and collection_path.name != "unit":
        return True
    return None


def committed_runs() -> list[str]:
    """The run ids committed under ``data/runs/`` (``git ls-files``), sorted: never the user's own runs.

    Regression (fault kind: test depends on the user's data): a test counted every folder under
    ``data/runs/``, so after the README's main job made a run the README's test command failed
    (``assert 6 == (7 + 2)``).  Skips the calling test when the checkout is no git repository.
    """
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "--", "data/runs/*/run.json"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: the committed runs are unknown", allow_module_level=True)
    return sorted({Path(line).parts[2] for line in out.splitlines() if line.strip()})


def make_scratch_root(base: Path) -> Path:
    """Copy the project's inputs (hardware profiles, model cards, the explainers' settings, templates, docs, config, Snakefile, mkdocs.yml) under ``base``."""
    root = base / "proj"
    (root / "data").mkdir(parents=True)
    shutil.copytree(REPO / "data" / "hardware", root / "data" / "hardware")
    if (REPO / "data" / "models").is_dir():
        shutil.copytree(REPO / "data" / "models", root / "data" / "models")
    shutil.copy(REPO / "data" / "explainers.yaml", root / "data" / "explainers.yaml")
    shutil.copytree(REPO / "templates", root / "templates")
    shutil.copytree(REPO / "docs", root / "docs")  # the site's Guide tab and the Methodology page's definitions
    shutil.copytree(REPO / "config", root / "config")
    shutil.copy(REPO / "Snakefile", root / "Snakefile")
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copy(TINY_CONFIG, root / "config" / "tiny.yaml")
    return root


@pytest.fixture
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch project root, set as ``BATCHMARK_ROOT`` for the test."""
    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    return root


REFERENCE = REPO / ".." / "shared" / "reference"
BATCHED_BENCH_REF = REFERENCE / "llamacpp-dgx-spark-batched-bench.md"
DATA = REPO / "tests" / "data"


@pytest.fixture
def reference_file() -> Path:
    """The published llama-batched-bench DGX Spark file (skips when ../shared/reference is absent)."""
    if not BATCHED_BENCH_REF.is_file():
        pytest.skip(f"reference data absent: {BATCHED_BENCH_REF} (it lives beside the repository, never in it)")
    return BATCHED_BENCH_REF
