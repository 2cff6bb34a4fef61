"""The main job's plan (``snakemake --dry-run`` of the default config, ~10 s, measures nothing): each rule's outputs are
the files its command writes, so no job finds its outputs made by another.

Regression (fault kind: a rule's outputs made by another job): ``batchmark merge`` publishes the run with its
``summaries.json`` and ``analysis.json`` (pipeline/analysis/stages.py ``write_derived``, handed to the merge), while
the Snakefile declared only ``points.json`` as the merge's output and planned the summaries and analysis rules after
it; at their turn Snakemake found their outputs present and printed "Warning: the following output files of rule
summaries were not present when the DAG was created" (snakemake/jobs.py, ``Job.prepare``), then deleted and wrote
them again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import REPO, make_scratch_root


def _dry_run(root):
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--dry-run"], cwd=root, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "BATCHMARK_ROOT": str(root), "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return res.stdout + res.stderr


def _jobs(out: str) -> dict[str, list[str]]:
    """Each planned rule's declared outputs, from the dry-run's job blocks (``rule R:`` … ``output: a, b``)."""
    jobs: dict[str, list[str]] = {}
    for rule, body in re.findall(r"^rule (\w+):\n((?:    .*\n)+)", out, flags=re.M):
        m = re.search(r"^    output: (.*)$", body, flags=re.M)
        jobs[rule] = m.group(1).split(", ") if m else []
    return jobs


def test_the_merge_declares_every_file_it_publishes_and_nothing_writes_them_again(tmp_path):
    root = make_scratch_root(tmp_path)
    jobs = _jobs(_dry_run(root))
    assert "merge" in jobs and "part" in jobs, jobs  # a fresh checkout measures the default config in parts
    run_id = jobs["merge"][0].split("/")[2]
    # write_derived writes summaries.json then analysis.json before run.json says complete (runs.assembling)
    assert sorted(jobs["merge"]) == sorted(f"data/runs/{run_id}/{n}" for n in
                                           ("points.json", "summaries.json", "analysis.json", "run.json"))
    assert "summaries" not in jobs and "analysis" not in jobs, sorted(jobs)
    made = [f for outs in jobs.values() for f in outs]
    assert len(made) == len(set(made)), made  # no file is the output of two planned jobs
