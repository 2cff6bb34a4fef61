"""The simulated Spark workflow at CI size: config/spark-simulated.yaml made small, through Snakemake twice
(parts, merge, summaries, analysis, pages, site), then `batchmark diff` of the two runs.

The full size (config/spark-simulated.yaml, about 13,000 requests of 256 tokens a model) is timed by
benchmarks/spark_simulated.py; this keeps the same five models, hardware, server and open loop with short
requests and a short grid so CI stays quick.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO, make_scratch_root

pytestmark = pytest.mark.slow


def _run(root, *args, timeout=900):
    return subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "BATCHMARK_ROOT": str(root), "PYTHONPATH": str(REPO),
                               "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = make_scratch_root(tmp_path_factory.mktemp("simwf"))
    cfg = yaml.safe_load((REPO / "config" / "spark-simulated.yaml").read_text())
    cfg.update(name="spark-simulated-ci", input_len=256, output_len=16, concurrency=[1, 4, 16, 64], repeats=2)
    cfg["open_loop"].update(auto_rates=3, bisect_steps=1)
    cfg["simulated"].update(requests_per_slot=1, min_requests=4)
    (root / "config" / "sim-ci.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    runs = []
    for _ in range(2):
        res = _run(root, "-m", "snakemake", "--cores", "2", "--configfile", "config/sim-ci.yaml", "--config", "fresh=1")
        assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
        # each rule's outputs are what its command writes (tests/integration/test_snakefile_outputs.py)
        assert "were not present when the DAG was created" not in res.stderr, res.stderr[-3000:]
        runs = sorted(p.name for p in (root / "data" / "runs").iterdir() if not p.name.startswith("."))
    assert len(runs) == 2
    return root, runs


def test_both_runs_are_complete_and_simulated(two_runs):
    import json

    root, runs = two_runs
    for r in runs:
        meta = json.loads((root / "data" / "runs" / r / "run.json").read_text())
        assert meta["status"] == "complete" and meta["source"] == "simulated"
        assert len(meta["models"] if "models" in meta else meta["parts"]) == 5
        for name in ("summaries.json", "analysis.json"):
            assert (root / "data" / "runs" / r / name).is_file()


def test_diff_of_the_two_gives_its_report(two_runs):
    root, runs = two_runs
    res = _run(root, "-m", "pipeline", "diff", *runs)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert res.stdout.startswith("PREDICTION vs PREDICTION"), res.stdout[:300]


def test_site_pages_are_small_and_say_simulated(two_runs):
    root, runs = two_runs
    pages = list((root / "site").rglob("*.html"))
    assert pages
    assert max(p.stat().st_size for p in pages) < 2_000_000
    home = (root / "site" / "index.html").read_text()
    assert "simulated (a prediction)" in home
    model = next(p for p in (root / "site" / "models").glob("*.html") if "qwen3-32b" in p.name)
    assert "Simulated: a prediction, not a measurement" in model.read_text()
