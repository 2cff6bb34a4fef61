"""Shared fixtures: the reference folder and a scratch project root for runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / ".." / "shared" / "reference"
BATCHED_BENCH_REF = REFERENCE / "llamacpp-dgx-spark-batched-bench.md"
DATA = REPO / "tests" / "data"


@pytest.fixture
def reference_file() -> Path:
    """The published llama-batched-bench DGX Spark file (skips when ../shared/reference is absent)."""
    if not BATCHED_BENCH_REF.is_file():
        pytest.skip(f"reference data absent: {BATCHED_BENCH_REF} (it lives beside the repository, never in it)")
    return BATCHED_BENCH_REF


@pytest.fixture
def scratch_root(tmp_path, monkeypatch) -> Path:
    """A project root with the real hardware profiles and model cards and an empty data/runs/."""
    root = tmp_path / "root"
    (root / "data" / "runs").mkdir(parents=True)
    shutil.copytree(REPO / "data" / "hardware", root / "data" / "hardware")
    shutil.copytree(REPO / "data" / "models", root / "data" / "models")
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    return root
