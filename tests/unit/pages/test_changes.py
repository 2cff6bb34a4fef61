"""The Changes chart's data and spec (pure): one row per (point, charted metric), significance carried through.

Runs are hand-made (tests/runbuilder.py): only dense-a's c=8 point is slower, so exactly the
4 charted metrics of that point are significant out of 2 models × 5 concurrencies × 4 metrics.
"""

from __future__ import annotations

from pipeline.analysis import stages
from pipeline.diff.rundiff import diff_runs
from pipeline.pages.changes import CHART_METRICS, change_rows, changes_chart
from tests.runbuilder import CONCURRENCY, MODELS, NOISE_A, NOISE_B, make_run


def test_chart_rows_and_spec(tmp_path):
    a = make_run(tmp_path, "a", noise=NOISE_A)
    b = make_run(tmp_path, "b", noise=NOISE_B, slow={("dense-a", 8): 1.25})
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    rows = change_rows(d)
    assert len(rows) == len(MODELS) * len(CONCURRENCY) * len(CHART_METRICS)
    sig = [r for r in rows if r["significance"] == "significant"]
    assert {(r["workload"], r["concurrency"]) for r in sig} == {("dense-a · in 64 / out 16", 8)}
    assert len(sig) == len(CHART_METRICS)
    # Output throughput of the slowed point: 1 / (1.25 × 0.995) − 1 = −19.6 % (runbuilder's timings).
    assert next(r["change_pct"] for r in sig if r["metric"] == "output throughput") == round((1 / (1.25 * 0.995) - 1) * 100, 3)
    spec = changes_chart(d)
    assert spec["facet"]["row"]["field"] == "workload" and spec["facet"]["column"]["field"] == "metric"
    assert spec["resolve"]["scale"]["y"] == "independent"  # one scale per metric: a big rise never flattens a drop
    assert spec["title"].startswith("b vs a")
