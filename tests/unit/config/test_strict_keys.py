"""Config strictness (fault kinds: silent coercion, duplicate key kept last, seed that crashes after the probe,
traceback on a binary file)."""

from __future__ import annotations

import pytest

from pipeline.config.sweepconfig import MAX_SEED, load_config
from pipeline.core.errors import BatchmarkError
from tests.conftest import TINY_CONFIG


def _write(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


BASE = TINY_CONFIG.read_text()


@pytest.mark.parametrize("line, message", [
    ("concurrency: [true, 2]", "concurrency.0: Input should be a valid integer (got True)"),
    ("repeats: \"2\"", "repeats: Input should be a valid integer (got '2')"),
    ("repeats: 2.0", "repeats: Input should be a valid integer (got 2.0)"),
    ("knee_threshold: .nan", "knee_threshold: Input should be a finite number"),
    ("warmup: \"yes\"", "warmup: Input should be a valid boolean (got 'yes')"),
    (f"seed: {MAX_SEED + 1}", f"seed: Input should be less than or equal to {MAX_SEED} (got {MAX_SEED + 1})"),
    ("seed: 18000000000000", f"seed: Input should be less than or equal to {MAX_SEED} (got 18000000000000)"),
    ("seed: -1", "seed: Input should be greater than or equal to 0 (got -1)"),
])
def test_strict_types_and_bounds(tmp_path, scratch_root, line, message):
    key = line.split(":")[0]
    text = "\n".join(ln for ln in BASE.splitlines() if not ln.startswith(key + ":")) + f"\n{line}\n"
    path = _write(tmp_path, text)
    with pytest.raises(BatchmarkError) as exc:
        load_config(path)
    assert str(exc.value).startswith(f"{path}: {message}")


def test_largest_seed_is_accepted_and_fits_every_seeding(scratch_root, tmp_path):
    """2**32 − 1 is numpy's largest seed; the transformers engine's seed × 1 000 003 + offsets stays below 2**64."""
    cfg = load_config(_write(tmp_path, BASE + f"seed: {MAX_SEED}\n"))
    assert cfg.seed == 4294967295
    assert cfg.seed * 1_000_003 + 10**9 < 2**64
    import numpy as np
    import torch

    np.random.seed(cfg.seed)
    torch.Generator().manual_seed(cfg.seed * 1_000_003 + 10**9)


def test_duplicate_key_is_refused_with_its_lines(tmp_path, scratch_root):
    path = _write(tmp_path, BASE + "repeats: 3\n")  # tiny.yaml says repeats: 2 on line 8
    with pytest.raises(BatchmarkError) as exc:
        load_config(path)
    n = len(BASE.splitlines()) + 1
    assert str(exc.value) == f"{path}: line {n} not valid YAML (duplicate key 'repeats' (first at line 8))"


def test_binary_garbage_config_is_one_line(tmp_path, scratch_root):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage\x89PNG")
    with pytest.raises(BatchmarkError) as exc:
        load_config(path)
    assert str(exc.value) == f"{path}: not a UTF-8 text file (byte 0); expected a config"


def test_shipped_configs_stay_valid(scratch_root):
    from tests.conftest import REPO

    for path in sorted((REPO / "config").glob("*.yaml")) + [TINY_CONFIG]:
        load_config(path)
