"""A run folder's name never reaches a shell (fault kind: shell injection through a name).

Regression (fault kind: shell injection through a folder name): `cp -a data/runs/R 'data/runs/x;id>PWNED;#'`
then `snakemake --cores 1 committed` ran `id` and wrote its output into ``PWNED``: the Snakefile put folder names
unquoted into ``{params.runs}``.  Runs arrive by `git pull`, so a folder name is untrusted input.  Now the
Snakefile refuses such a folder in one line naming it before any job runs (``runs.list_runs``), and quotes every
value it puts on a command line besides.  A real Snakemake in a scratch project with a committed run copied under
each hostile name; the probe commands would create ``PWNED`` in the project if any of them ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, make_scratch_root

pytestmark = pytest.mark.slow

RUN = "20261129T161329Z-vm"  # the smallest committed run
HOSTILE = ["x;touch PWNED;#", "$(touch PWNED)", "`touch PWNED`", "x&&touch PWNED", "nl-run\n"]


@pytest.mark.parametrize("name", HOSTILE)
def test_committed_target_refuses_a_hostile_run_folder_and_runs_nothing(tmp_path, name):
    root = make_scratch_root(tmp_path)
    shutil.copytree(REPO / "data" / "runs" / RUN, root / "data" / "runs" / RUN)
    shutil.copytree(REPO / "data" / "runs" / RUN, root / "data" / "runs" / name)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "committed"], cwd=root,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "BATCHMARK_ROOT": str(root), "NO_MKDOCS_2_WARNING": "1"})
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-2000:]
    assert not (root / "PWNED").exists() and not (root / "data" / "runs" / "PWNED").exists()
    refusal = [line for line in out.splitlines() if "not a valid run id" in line]
    assert len(refusal) == 1 and repr(name) in refusal[0], out[-2000:]
    assert not (root / "data" / "pages").exists() and not (root / "site").exists()  # no job ran at all
