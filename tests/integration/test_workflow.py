"""End to end through Snakemake on tiny models: sweep -> summaries -> analysis -> pages -> mkdocs build --strict,
then the built benchmarks page in headless Chromium with the network off."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.browser import open_page
from tests.conftest import make_scratch_root

pytestmark = pytest.mark.slow


def _snakemake(root, *args, configfile="config/tiny.yaml"):
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", configfile, *args],
                          cwd=root, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "BATCHMARK_ROOT": str(root), "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One workflow run on tiny models, shared by the tests of this module."""
    root = make_scratch_root(tmp_path_factory.mktemp("wf"))
    res = _snakemake(root)
    assert res.returncode == 0, res.stderr[-3000:]
    return root


def test_site_is_built(built):
    assert (built / "site" / "index.html").is_file()
    assert (built / "site" / "benchmarks.html").is_file()
    run_dirs = [p for p in (built / "data" / "runs").iterdir() if not p.name.startswith(".")]
    assert len(run_dirs) == 1
    for name in ("run.json", "points.json", "summaries.json", "analysis.json"):
        assert (run_dirs[0] / name).is_file()
    home = (built / "site" / "index.html").read_text()
    assert "tiny-llama" in home and "tiny-moe" in home
    # the raw request records are downloadable: per point (2 models x 3 concurrencies) its JSON and, since schema
    # version 3, its requests as Parquet beside it
    import zipfile

    with zipfile.ZipFile(built / "site" / "downloads" / run_dirs[0].name / "records.zip") as zf:
        names = zf.namelist()
    assert len(names) == 12 and sum(n.endswith(".json") for n in names) == sum(n.endswith(".parquet") for n in names) == 6


def test_second_invocation_measures_nothing(built):
    res = _snakemake(built, "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "Nothing to be done" in res.stdout + res.stderr


def test_touching_the_config_measures_nothing(built):
    # Regression (fault kind: config mtime newer than a complete run): only the config's content decides
    (built / "config" / "tiny.yaml").touch()
    res = _snakemake(built, "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "Nothing to be done" in res.stdout + res.stderr


def test_template_edit_rerenders_pages_only(built):
    tmpl = built / "templates" / "methodology.md.j2"
    tmpl.write_text(tmpl.read_text() + "\nEdited.\n")
    res = _snakemake(built, "--dry-run", "--quiet", "rules")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    assert set(jobs) == {"pages", "site", "all", "total"}, out


def test_committed_target_rebuilds_site_without_measuring(built):
    before = sorted(p for p in (built / "data" / "runs").rglob("points/*/*.json"))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "committed"], cwd=built, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "BATCHMARK_ROOT": str(built)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(p for p in (built / "data" / "runs").rglob("points/*/*.json")) == before
    assert (built / "site" / "benchmarks.html").is_file()
    # Regression (fault kind: own run dropped): every complete run is on the site, this checkout's included
    own = [p.name for p in (built / "data" / "runs").iterdir() if not p.name.startswith(".")]
    home = (built / "site" / "index.html").read_text()
    assert own and all(run_id in home for run_id in own)


def test_a_new_config_after_committed_is_measured(built, tmp_path):
    """Regression (fault kind: pages made outside the workflow hide a missing run): ``committed`` renders the pages and
    builds the site with no Snakemake record of either; the main job then asked only for site/index.html, Snakemake
    took the new config's missing run for an intermediate it need not make and printed "Nothing to be done"."""
    root = make_scratch_root(tmp_path)  # a checkout whose site Snakemake never built: the fixture's run copied in
    shutil.copytree(built / "data" / "runs", root / "data" / "runs")  # with this checkout's pointer to it
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "committed"], cwd=root, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "BATCHMARK_ROOT": str(root)})
    assert res.returncode == 0, res.stderr[-2000:]
    res = _snakemake(root, "--dry-run")  # the config measured by the fixture: its run is complete, nothing to do
    assert res.returncode == 0, res.stderr
    assert "Nothing to be done" in res.stdout + res.stderr
    # another config (the user's: a new sweep config beside the measured one): its own run, none of it exists yet
    other = (root / "config" / "tiny.yaml").read_text().replace("name: tiny-test", "name: tiny-other")
    (root / "config" / "tiny-other.yaml").write_text(other)
    res = _snakemake(root, "--dry-run", "--quiet", "rules", configfile="config/tiny-other.yaml")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    jobs = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    # tests/data/tiny.yaml has two models: one part each, merged into the run, then the pages and the site again
    planned = {k: jobs.get(k) for k in ("part", "merge", "pages", "site")}
    assert planned == {"part": 2, "merge": 1, "pages": 1, "site": 1}, out


def test_benchmarks_page_renders_charts_offline(built):
    index = (built / "site" / "benchmarks.html").read_text()
    for model in ("tiny-llama", "tiny-moe"):  # the Benchmarks index links each model's own page
        assert f'href="models/{model}.html"' in index
        res = open_page(built / "site" / "models" / f"{model}.html")
        assert res["errors"] == []
        assert res["charts"] >= 2 and res["svgs"] == res["charts"]
        assert res["marks"] > 10
        titles = [t for t in res["texts"] if "output throughput vs concurrency" in t]
        assert titles == [f"{model}: output throughput vs concurrency"]
        # only the Material theme's optional resources may have been refused; no chart needs the network
        assert not [u for u in res["refused"] if "vega" in u or "jsdelivr" in u]


def test_malformed_config_through_snakemake_is_one_line(tmp_path):
    root = make_scratch_root(tmp_path)
    bad = (root / "config" / "tiny.yaml").read_text().replace("concurrency: [1, 2, 4]", "concurrency: [1, -2, 4]")
    (root / "config" / "bad.yaml").write_text(bad)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "config/bad.yaml"],
                         cwd=root, capture_output=True, text=True, timeout=300, env={**os.environ, "BATCHMARK_ROOT": str(root)})
    assert res.returncode != 0
    err = res.stderr.strip().splitlines()
    assert err[-1].startswith("batchmark: error:") and "concurrency" in err[-1] and "bad.yaml" in err[-1]
    assert "Traceback" not in res.stderr
    assert not (root / "data" / "runs").exists() or not any((root / "data" / "runs").iterdir())
