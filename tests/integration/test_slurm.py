"""The workflow on a real one-node Slurm cluster: each model a Slurm job, merged into a run equal to one made without Slurm.

The cluster (munge, slurmctld, slurmd on this machine, from ``tests/slurm/``) is started by the
fixture; Snakemake submits with its Slurm executor (``snakemake-executor-plugin-slurm``) through the
real ``sbatch``, using the repository's ``profiles/slurm``.  Without root or the packages the test
skips and says why (``apt-get install slurm-wlm munge``; ``.ci/run`` installs them).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, make_scratch_root
from tests.slurm import cluster as slurm

pytestmark = pytest.mark.slow

CONFIG_TAIL = """
concurrency: [1, 2]
cluster: {mem_mb: 1000, runtime_min: 20, retries: 0}
"""


def _config(root: Path) -> None:
    text = (REPO / "tests" / "data" / "tiny.yaml").read_text().replace("concurrency: [1, 2, 4]\n", "")
    assert "concurrency" not in text
    (root / "config" / "slurm.yaml").write_text(text + CONFIG_TAIL)


def _env(root: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in {**os.environ, **extra}.items() if k != "BATCHMARK_RUN_ID"}
    return {**env, "BATCHMARK_ROOT": str(root), "NO_MKDOCS_2_WARNING": "1"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = slurm.why_unavailable()
    if why:
        pytest.skip(why)
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip("snakemake-executor-plugin-slurm is not installed (pip install -e '.[test]')")
    try:
        c = slurm.start(tmp_path_factory.mktemp("slurm"))
    except slurm.ClusterUnavailable as exc:
        pytest.skip(str(exc))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    """``snakemake --profile profiles/slurm`` on the tiny config: measured by Slurm jobs, site built."""
    root = make_scratch_root(tmp_path_factory.mktemp("on-slurm"))
    _config(root)
    subprocess.run(["cp", "-r", str(REPO / "profiles"), str(root / "profiles")], check=True)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/slurm",
                          "--slurm-status-command", "squeue",  # no slurmdbd here, so no sacct
                          "--configfile", "config/slurm.yaml"],
                         cwd=root, env=_env(root, cluster.env), capture_output=True, text=True, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:] + "\n" + cluster.log_tail()
    return root, log


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The same config measured without Slurm (``snakemake --cores 2``, up to the analysis)."""
    root = make_scratch_root(tmp_path_factory.mktemp("local"))
    _config(root)
    res = subprocess.run([sys.executable, "-m", "snakemake", "data/runs/local/analysis.json", "--cores", "2",
                          "--configfile", "config/slurm.yaml", "--config", "run_id=local"],
                         cwd=root, env=_env(root, {}), capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return root / "data" / "runs" / "local"


def _run_of(root: Path) -> Path:
    found = [p for p in (root / "data" / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(found) == 1, found
    return found[0]


def _files(run_dir: Path) -> set[str]:
    return {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}


def test_each_model_is_a_slurm_job(cluster, slurm_run):
    _root, log = slurm_run
    ids = re.findall(r"has been submitted with SLURM jobid (\d+) \(log: \S+/rule_part/", log)
    assert len(ids) == 2 and len(set(ids)) == 2, log[-3000:]
    # Slurm itself reports both jobs completed (squeue keeps finished jobs for MinJobAge = 600 s)
    out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%T"], env=cluster.env,
                         capture_output=True, text=True, timeout=60).stdout
    states = dict(line.split("|") for line in out.split())
    assert {states.get(i) for i in ids} == {"COMPLETED"}, out
    # the quick stages ran where Snakemake runs (localrules), not as Slurm jobs
    assert not re.search(r"submitted with SLURM jobid \d+ \(log: \S+/rule_(merge|summaries|analysis|pages|site)/", log)


def test_merged_run_equals_a_run_made_without_slurm(slurm_run, local_run):
    root, _log = slurm_run
    run = _run_of(root)
    assert _files(run) == _files(local_run)
    for name in ("run.json", "points.json", "summaries.json", "analysis.json"):
        assert (run / name).is_file()
    assert json.loads((run / "points.json").read_text()) == json.loads((local_run / "points.json").read_text())
    # the same points with the same numbers of repeats and requests (the timings are the machine's own)
    def shape(run_dir: Path) -> list[tuple]:
        summ = json.loads((run_dir / "summaries.json").read_text())["points"]
        return sorted((p["model"], p["engine"], p["concurrency"], p["input_len"], p["output_len"], p["repeats"],
                       p["completed"], p["failed"]) for p in summ)
    assert shape(run) == shape(local_run)
    assert len(shape(run)) == 4  # 2 models x concurrency 1, 2


def test_merged_run_lists_its_host_and_each_part(slurm_run):
    root, _log = slurm_run
    meta = json.loads((_run_of(root) / "run.json").read_text())
    node, _cpus, _mem = slurm.node_shape()
    assert meta["status"] == "complete" and meta["hosts"] == [meta["parts"][0]["host"]]
    assert node in meta["hosts"][0]
    assert [p["model"] for p in meta["parts"]] == ["tiny-llama", "tiny-moe"]
    assert all(p["probe"]["bandwidth_gb_s"] > 0 for p in meta["parts"])
    run_pages = [p.read_text() for p in (root / "site" / "runs").glob("*.html")]  # one page per run
    assert any("hosts" in page and "tiny-llama, tiny-moe" in page for page in run_pages), "no run page lists the hosts"
