"""``batchmark diff --fail-above`` as a user runs it (a process) refuses to gate runs whose bandwidths differ.

The limits worked by hand are in tests/unit/diff/test_comparability.py (and its runs A, B).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from pipeline.analysis import stages
from pipeline.core import paths
from pipeline.diff import rundiff as diff
from tests.unit.diff.test_comparability import A, B


def test_fail_above_refuses_runs_whose_bandwidths_differ_beyond_the_limit(tmp_path):
    # a copy of B whose probe says 58.0 GB/s: 58.0 / 46.706 − 1 = +24.2 %, beyond 10 %
    runs_dir = paths.runs_dir()
    shutil.copytree(runs_dir / B, tmp_path / B)
    meta = json.loads((tmp_path / B / "run.json").read_text())
    meta["probe"]["bandwidth_gb_s"] = 58.0
    (tmp_path / B / "run.json").write_text(json.dumps(meta))
    d = diff.diff_runs(stages.load_run(A), stages.load_run(tmp_path / B))
    assert not d.comparable and d.headline.startswith("NOT COMPARABLE — probed bandwidth differs by +24.2 %")
    proc = subprocess.run([sys.executable, "-m", "pipeline", "diff", A, str(tmp_path / B), "--fail-above", "5"],
                          capture_output=True, text=True, cwd=paths.root())
    assert proc.returncode == 2
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and "not comparable" in err[0] and "refusing to gate" in err[0]
    assert proc.stdout.splitlines()[0].startswith("NOT COMPARABLE")

