"""The explainer and capacity pages: rendered from model cards and the committed runs (``data/runs/``) without the shared
reference (``pages`` given no ``--reference``, as in a clone with no ``../shared/`` beside it), built with ``mkdocs build --strict``, then opened offline
in headless Chromium, which must draw SVG marks on every chart.  What needs the shared reference is a test of its own
that skips and says so when the reference is absent."""

from __future__ import annotations

import re

import pytest

from tests.browser import committed_site, mkdocs_build, open_page
from tests.conftest import make_scratch_root

pytestmark = pytest.mark.slow
EXPLAINERS = ["batching", "bandwidth", "knee", "moe", "kv-cache", "sizing"]
#: The committed runs (data/runs/): two transformers CPU runs and one real-vLLM CPU run, all on hardware "cpu".
COMMITTED_RUNS = ["20261129T161329Z-vm", "20261129T165000Z-vm", "20261130T010035Z-vm"]
#: Charts per explainer page from the project's own data alone (committed runs + model cards, no reference):
#: batching: the model-card roofline + one measured dense example (one hardware: cpu);
#: bandwidth: the ceiling bars; knee: the model-card roofline + roofline overlay + step time;
#: moe: coverage + bytes growth + efficiency; kv-cache: KV per sequence; sizing: capacity.
OWN_DATA_CHARTS = {"batching": 2, "bandwidth": 1, "knee": 3, "moe": 3, "kv-cache": 1, "sizing": 1}


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """A scratch project holding the committed runs, no reference given: pages rendered, site built with --strict."""
    root = make_scratch_root(tmp_path_factory.mktemp("explain"))
    written, res = committed_site(root, COMMITTED_RUNS)
    assert res.returncode == 0, res.stderr[-3000:]
    return root, written


def test_explainer_pages_are_written_with_numbers(built_site):
    root, written = built_site
    pages = root / "data" / "pages"
    names = {p.relative_to(pages).as_posix() for p in written}
    assert {f"explain/{n}.md" for n in EXPLAINERS} | {"capacity.md"} <= names
    # capacity: Llama-3.1-8B BF16 at 8k -> 2**30 B = 1.07 GB per sequence (GB = 1e9 B throughout), 86 sequences in
    # min(128 x 0.85, 128 - 8) = 108.8 GB (see tests/unit/analysis/test_capacity.py; gpu_memory_utilization honoured)
    capacity = (pages / "capacity.md").read_text()
    assert "| 8192 | 1.07 GB | 86 |" in capacity and "GiB" not in capacity
    # Regression (fault kind: negative memory left): Llama-3.1-70B BF16 (141.1 GB) does not fit dgx-spark's
    # 108.8 GB usable (data/hardware/dgx-spark.yaml); the page showed "-21.11 GB" left.
    assert "Does not fit: weights 141.1 GB > 108.8 GB usable" in capacity
    assert not re.search(r"\| -\d", capacity), "a negative figure in a capacity table"
    assert "| beyond the model's context | – |" in capacity
    # gpt-oss-120b as vLLM's DGX Spark recipe serves it (MXFP4 throughout, fp8 KV; pipeline/cards/servedformat.py
    # DEFAULTS): 62,144,198,784 B of weights, 36,864 B of KV a token, at 8k 1024 × 18 × (8192 + 128) = 153,354,240 B
    # (0.15 GB) a sequence, (108.8e9 − 62,144,198,784) / 153,354,240 = 304.2 -> 304 (tests/unit/analysis/test_capacity.py)
    assert "weights 62.14 GB (the checkpoint, bf16+experts:mxfp4: 65.25 GB)" in capacity
    assert "| 8192 | 0.15 GB | 304 |" in capacity
    sizing = (pages / "explain" / "sizing.md").read_text()
    assert "**86 sequences**" in sizing and "108.8 GB − 16.06 GB = 92.74 GB free" in sizing
    assert "**304 sequences**, against 141 in the checkpoint's format with a bf16 KV cache" in " ".join(sizing.split())
    # the knee's crossovers as plan costs a step (vLLM's fitted terms at the measured 92.3 TFLOP/s; worked by hand in
    # tests/unit/pages/test_explaincharts.py: B = 117 for gpt-oss-120b), the spec roofline of the checkpoint beside them
    assert "| gpt-oss-120b | mxfp4,kv:fp8 | 117 | 2,037 | 2,859 (bf16+experts:mxfp4) |" in (pages / "explain" / "knee.md").read_text()
    assert "131.1 kB per token" in (pages / "explain" / "kv-cache.md").read_text()
    # the measured examples come from the committed runs, never from the reference (not given)
    batching = (pages / "explain" / "batching.md").read_text()
    assert "## Measured on cpu: " in batching and "reference-dgx-spark-llamacpp" not in batching
    assert "## What the model cards predict" in batching
    # every committed run is on the Knee page, unless a newer clean run measured each of its workloads (model,
    # hardware, engine, lengths): the explainers show a workload once, from its newest clean run, and every run stays on its models' pages
    from pipeline.pages.views import view_of
    from pipeline.analysis.stages import load_run

    knee = (pages / "explain" / "knee.md").read_text()
    views = {r: view_of(load_run(root / "data" / "runs" / r)) for r in COMMITTED_RUNS}

    def keys(v):
        return {(v.hardware.get("name"), w.model["model"], w.model.get("engine"), w.model["input_len"],
                 w.model["output_len"]) for w in v.workloads}

    for run_id, v in views.items():
        newer_clean = set().union(*[keys(u) for r, u in views.items() if r > run_id and not u.flagged])
        assert (run_id in knee) == (not keys(v) <= newer_clean), run_id
        for w in v.workloads:
            assert run_id in (pages / "models" / f"{w.model['model']}.md").read_text()


def test_reference_numbers(reference_file, tmp_path, monkeypatch):
    """With ../shared/reference/ beside the repository (skips and says so otherwise), the reference stage
    (``batchmark reference``) stores its llama.cpp DGX Spark measurement as a run under data/reference/, and
    ``batchmark pages --reference DIR`` fills the explainers' measured numbers from it (both called in-process)."""
    from pipeline.cli import main

    root = make_scratch_root(tmp_path)
    (root / "data" / "runs").mkdir()
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    ref_dir = root / "data" / "reference" / "reference-dgx-spark-llamacpp"
    assert main(["reference", str(reference_file)]) == 0
    assert (ref_dir / "analysis.json").is_file() and (ref_dir / "summaries.json").is_file()
    pages = root / "data" / "pages"
    assert main(["pages", "--out", str(pages)]) == 0  # no --reference: the explainers do without it
    assert "reference-dgx-spark-llamacpp" not in (pages / "explain" / "batching.md").read_text()
    assert main(["pages", "--out", str(pages), "--reference", str(ref_dir)]) == 0
    batching = (pages / "explain" / "batching.md").read_text()
    assert "| all users together (output tokens/s) | 29.24 | 593.27 | × 20.3 |" in batching
    assert "0.634" in batching
    # the measured example names its hardware (the reference was measured on the DGX Spark)
    # the model is named as the file gives it (names shown as given, never shortened)
    assert "## Measured on dgx-spark: ggml-org/Qwen2.5-Coder-7B-Q8&#95;0-GGUF" in batching
    assert "This curve follows the bandwidth-bound" in batching
    bandwidth = (pages / "explain" / "bandwidth.md").read_text()
    # the worked example names the model its numbers come from, as the file does (its heading; 7.54 GiB its header)
    assert "the file of ggml-org/Qwen2.5-Coder-7B-Q8&#95;0-GGUF is\n7.54 GiB" in bandwidth and "an MBU of 0.87" in bandwidth


@pytest.mark.parametrize("name", [f"explain/{n}" for n in EXPLAINERS])
def test_explainer_charts_render_offline(built_site, name):
    root, _ = built_site
    res = open_page(root / "site" / f"{name}.html")
    assert res["errors"] == []
    # Regression (fault kind: charts only from outside data): a clone with no ../shared/ beside it drew 0 charts
    # on the batching and knee explainers.
    assert res["charts"] == OWN_DATA_CHARTS[name.split("/")[1]] and res["svgs"] == res["charts"]
    assert res["marks"] > 0
    assert not [u for u in res["refused"] if "vega" in u or "jsdelivr" in u]
    if name == "explain/bandwidth":
        # Regression (fault kind: invisible marks): the ceiling bars were drawn on a log scale with
        # no base and had zero width. 9 model cards x 3 weight formats = 27 bars must be visible.
        assert res["visible_bars"] >= 27


def test_site_builds_with_imported_runs(tmp_path, monkeypatch):
    """Regression (fault kind: template assumes measured-run fields): imported runs carry partial percentiles
    (llama-benchy gives a TTFT mean only) and no sweep config; every page must still render and build --strict
    (no reference given)."""
    from pipeline.importers import import_run
    from pipeline.pages.render import render_site
    from tests.conftest import DATA

    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    import_run("llama-benchy", [DATA / "llama-benchy" / "qwen3-30b-a3b.md"], "dgx-spark", run_id="20261102T110541Z-benchy")
    import_run("vllm-bench", [DATA / "vllm-bench"], "dgx-spark", run_id="20261102T101500Z-vllm")
    render_site(root / "data" / "pages")
    res = mkdocs_build(root)
    assert res.returncode == 0, res.stderr[-3000:]
    bench = "".join(p.read_text() for p in sorted((root / "data" / "pages" / "models").glob("*.md")))  # model pages
    assert "Qwen3-30B-A3B" in bench and "Llama-3.1-8B-Instruct" in bench
    # Regression (fault kind: wrong article): the llama-benchy run is of Qwen3-30B-A3B, an MoE card
    # (data/models/), which the page wrote as "A moe model".
    assert "An MoE model:" in bench and "A moe model" not in bench
    runs_page = "".join(p.read_text() for p in sorted((root / "data" / "pages" / "runs").glob("*.md")))  # run pages
    assert "measured by llama-benchy 75bc129" in runs_page


def test_reference_imported_as_a_run_is_not_shown_twice(reference_file, tmp_path, monkeypatch):
    """The shared reference (skips and says so when ../shared/reference/ is absent), once imported as a run, is
    not added again by the explainers when it is also given as ``--reference``."""
    from pipeline.importers import import_run
    from pipeline.pages.render import render_site
    from pipeline.importers.reference import import_reference

    root = make_scratch_root(tmp_path)
    monkeypatch.setenv("BATCHMARK_ROOT", str(root))
    import_run("llama-batched-bench", [reference_file], "dgx-spark", run_id="20251102T000000Z-llamacpp")
    ref_dir = import_reference(reference_file)
    render_site(root / "data" / "pages", reference=[ref_dir])
    batching = (root / "data" / "pages" / "explain" / "batching.md").read_text()
    assert "20251102T000000Z-llamacpp" in batching and "reference-dgx-spark-llamacpp" not in batching
