"""The explainer and capacity pages: rendered from model cards (and the shared reference run when present), built
with ``mkdocs build --strict``, then opened offline in headless Chromium, which must draw SVG marks on every chart."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.browser import open_page
from tests.conftest import BATCHED_BENCH_REF, make_scratch_root

pytestmark = pytest.mark.slow
EXPLAINERS = ["batching", "bandwidth", "knee", "moe", "kv-cache", "sizing"]


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """A scratch project with no runs of its own: pages rendered, site built with --strict."""
    root = make_scratch_root(tmp_path_factory.mktemp("explain"))
    (root / "data" / "runs").mkdir()
    mp = pytest.MonkeyPatch()
    mp.setenv("BATCHMARK_ROOT", str(root))
    try:
        from pipeline.pages.render import render_site

        written = render_site(root / "data" / "pages", runs_dir=root / "data" / "runs", templates_dir=root / "templates")
        res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                              "-d", str(root / "site")], capture_output=True, text=True, timeout=300,
                             env={"NO_MKDOCS_2_WARNING": "1", **__import__("os").environ})
    finally:
        mp.undo()
    assert res.returncode == 0, res.stderr[-3000:]
    return root, written


def test_explainer_pages_are_written_with_numbers(built_site):
    root, written = built_site
    pages = root / "data" / "pages"
    names = {p.relative_to(pages).as_posix() for p in written}
    assert {f"explain/{n}.md" for n in EXPLAINERS} | {"capacity.md"} <= names
    # capacity: Llama-3.1-8B BF16 at 8k -> 1 GiB per sequence, 96 sequences (see tests/unit/test_capacity.py)
    capacity = (pages / "capacity.md").read_text()
    assert "| 8192 | 1.00 GiB | 96 |" in capacity
    # Regression (fault kind: negative memory left): Llama-3.1-70B BF16 (141.1 GB) does not fit dgx-spark's
    # 128 - 8 = 120 GB (data/hardware/dgx-spark.yaml); the page showed "-21.11 GB" left.
    assert "Does not fit: weights 141.1 GB > 120.0 GB usable after reserve" in capacity
    assert not re.search(r"\| -\d", capacity), "a negative figure in a capacity table"
    assert "| beyond the model's context | – |" in capacity
    assert "**96 sequences**" in (pages / "explain" / "sizing.md").read_text()
    assert "128 KiB per token" in (pages / "explain" / "kv-cache.md").read_text()
    if BATCHED_BENCH_REF.is_file():  # the shared reference run fills in the measured numbers
        batching = (pages / "explain" / "batching.md").read_text()
        assert "| all users together (output tokens/s) | 29.24 | 593.27 | × 20.3 |" in batching
        assert "0.634" in batching
        # the measured example names its hardware (the reference was measured on the DGX Spark)
        assert "## Measured on dgx-spark: Qwen2.5-Coder-7B" in batching and "This curve follows the bandwidth-bound" in batching
        assert "an MBU of 0.87" in (pages / "explain" / "bandwidth.md").read_text()


@pytest.mark.parametrize("name", [f"explain/{n}" for n in EXPLAINERS])
def test_explainer_charts_render_offline(built_site, name):
    root, _ = built_site
    res = open_page(root / "site" / name / "index.html")
    assert res["errors"] == []
    assert res["charts"] >= 1 and res["svgs"] == res["charts"]
    assert res["marks"] > 0
    assert not [u for u in res["refused"] if "vega" in u or "jsdelivr" in u]
    if name == "explain/bandwidth":
        # Regression (fault kind: invisible marks): the ceiling bars were drawn on a log scale with
        # no base and had zero width. 9 model cards x 3 weight formats = 27 bars must be visible.
        assert res["visible_bars"] >= 27


def test_site_builds_with_imported_runs(tmp_path, monkeypatch):
    """Regression (fault kind: template assumes measured-run fields): imported runs carry partial percentiles
    (llama-benchy gives a TTFT mean only) and no sweep config; every page must still render and build --strict,
    and the shared reference, once imported as a run, is not shown twice."""
    from pipeline.importers import import_run
    from pipeline.pages.render import render_site
    from tests.conftest import DATA

    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    import_run("llama-benchy", [DATA / "llama-benchy" / "qwen3-30b-a3b.md"], "dgx-spark", run_id="20261102T110541Z-benchy")
    import_run("vllm-bench", [DATA / "vllm-bench"], "dgx-spark", run_id="20261102T101500Z-vllm")
    if BATCHED_BENCH_REF.is_file():
        import_run("llama-batched-bench", [BATCHED_BENCH_REF], "dgx-spark", run_id="20251102T000000Z-llamacpp")
    render_site(root / "data" / "pages")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                          "-d", str(root / "site")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    bench = (root / "data" / "pages" / "benchmarks.md").read_text()
    assert "Qwen3-30B-A3B" in bench and "Llama-3.1-8B-Instruct" in bench
    # Regression (fault kind: wrong article): the llama-benchy run is of Qwen3-30B-A3B, an MoE card
    # (data/models/), which the page wrote as "A moe model".
    assert "An MoE model:" in bench and "A moe model" not in bench
    runs_page = (root / "data" / "pages" / "runs.md").read_text()
    assert "measured by llama-benchy 75bc129" in runs_page
    assert "reference-dgx-spark-llamacpp" not in (root / "data" / "pages" / "explain" / "batching.md").read_text()
