"""Benchmarks' continuous-vs-static comparison takes the newest clean run per engine, never a flagged one over it.

Regression (fault kind: noisy run as headline): the comparison took the newest run per engine, so a run
measured on a busy machine replaced a clean one in the chart and table.  Runs are real :class:`RunView` objects;
"flagged" comes from their own run.json (a probe warning), through :func:`pipeline.analysis.quality.run_quality`.
"""

from __future__ import annotations

from pipeline.pages.charts import engine_comparisons
from pipeline.pages.views import RunView, WorkloadView


def _view(run_id: str, engine: str, noisy: bool) -> RunView:
    model = {"model": "m", "engine": engine, "input_len": 64, "output_len": 32, "kind": "dense"}
    pts = [{"model": "m", "engine": engine, "input_len": 64, "output_len": 32, "concurrency": c,
            "output_throughput_tok_s": 10.0 * c} for c in (1, 2)]
    meta = {"probe": {"warning": "noisy probe (bandwidth repeats spread 2.20x)" if noisy else None}}
    return RunView(run_id=run_id, meta=meta, analysis={"hardware": {"name": "cpu"}},
                   workloads=[WorkloadView(model=model, points=pts, analysis_points=[])])


def test_newest_clean_run_per_engine_is_compared():
    views = [_view("20261130T000000Z-noisy", "vllm", noisy=True), _view("20261129T000000Z-clean", "vllm", noisy=False),
             _view("20261128T000000Z-static", "transformers", noisy=False)]
    (cmp,) = engine_comparisons(views)
    assert [(s["engine"], s["run_id"], s["flagged"]) for s in cmp["series"]] == [
        ("vllm", "20261129T000000Z-clean", False), ("transformers", "20261128T000000Z-static", False)]


def test_a_flagged_run_is_compared_only_when_no_clean_one_exists_and_says_so():
    views = [_view("20261130T000000Z-noisy", "vllm", noisy=True), _view("20261128T000000Z-static", "transformers", noisy=False)]
    (cmp,) = engine_comparisons(views)
    vllm = cmp["series"][0]
    assert vllm["run_id"] == "20261130T000000Z-noisy" and vllm["flagged"] and vllm["label"].endswith(" ⚠ flagged")
