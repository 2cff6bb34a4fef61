"""Which run folders git sees: a user's own runs are ignored, the example runs committed with the project are not.

Regression (fault kind: a run folder neither committed nor ignored): the main job (``snakemake --cores all``) made
``data/runs/<run_id>/`` and ``git status`` listed it as untracked, so a ``git add -A`` committed a user's run by accident.
``git check-ignore --no-index`` applies .gitignore's rules whether or not the path is tracked (git-check-ignore(1)).
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone

import pytest

from pipeline.config.sweepconfig import load_config
from pipeline.store.runids import new_run_id
from pipeline.sweep import parts
from tests.conftest import REPO, committed_runs


def _ignored(path: str) -> bool:
    res = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "--no-index", path],
                         capture_output=True, text=True, timeout=60)
    if res.returncode not in (0, 1):
        pytest.skip(f"git check-ignore failed: {res.stderr.strip()}")
    return res.returncode == 0


def test_a_fresh_run_of_the_default_config_is_ignored(tmp_path):
    cfg = load_config(REPO / "config" / "vllm-cpu.yaml")  # the Snakefile's config without --configfile
    run_id = parts.run_id_for_config(cfg.name, cfg.digest(), runs_dir=tmp_path, fresh=True)
    later = new_run_id(datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc), host="somebox")
    for rid in (run_id, later):
        for name in ("run.json", "points.json", "points/m/c1.json"):
            assert _ignored(f"data/runs/{rid}/{name}"), (rid, name)
    assert _ignored(f"data/runs/.parts/{run_id}/m/points.json")


def test_the_committed_runs_are_not_ignored():
    runs = committed_runs()
    assert runs, "no run is committed under data/runs"
    for rid in runs:
        files = subprocess.run(["git", "-C", str(REPO), "ls-files", f"data/runs/{rid}"], capture_output=True,
                               text=True, timeout=60, check=True).stdout.split()
        assert files and not [f for f in files if _ignored(f)], rid
