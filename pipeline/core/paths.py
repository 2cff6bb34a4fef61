"""Where the project's folders are: the repository root and its fixed top level.

``BATCHMARK_ROOT`` overrides the root (tests point it at a scratch copy).
"""

from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """The project root: ``$BATCHMARK_ROOT`` or the folder that holds ``pipeline/``."""
    env = os.environ.get("BATCHMARK_ROOT")
    return Path(env).resolve() if env else Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """``<root>/data``: inputs (models/, hardware/) and results (runs/)."""
    return root() / "data"


def runs_dir() -> Path:
    """``<root>/data/runs``: one folder per run."""
    return data_dir() / "runs"


def hardware_dir() -> Path:
    """``<root>/data/hardware``: hardware profiles (YAML)."""
    return data_dir() / "hardware"


def models_dir() -> Path:
    """``<root>/data/models``: model cards of well-known models (YAML)."""
    return data_dir() / "models"
