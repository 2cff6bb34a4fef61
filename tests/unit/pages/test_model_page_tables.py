"""A model page's point tables rendered from a real run folder: the interval over repeats and the stream's table.

The run is :func:`tests.runbuilder.make_run`'s served point shape (three repeats, multipliers 0.99, 1.00, 1.01), so
every point has a ``ci95`` and streamed chunks but no client block; the cells themselves are worked by hand in
tests/unit/pages/test_views.py (``test_point_and_stream_rows_carry_the_interval_over_repeats``).
"""

from __future__ import annotations

import tests.runbuilder as rb
from pipeline.core import paths
from pipeline.pages.pointrows import CI_NOTE


def test_model_page_shows_the_interval_the_stream_table_and_the_note(scratch_root):
    from pipeline.analysis.stages import load_run
    from pipeline.pages.render import render_site

    run = rb.make_run(paths.runs_dir(), "CI", models=("dense-a",), concurrency=(1, 2), noise=(0.99, 1.0, 1.01),
                      served_requests=4)
    docs = scratch_root / "site-pages"
    render_site(docs, log=lambda m: None)
    page = (docs / "models" / "dense-a.md").read_text(encoding="utf-8")
    (p1,) = [s.as_dict() for s in load_run(run).summaries if s.concurrency == 1]
    lo, hi = p1["ci95"]["output_throughput_tok_s"]
    row = next(line for line in page.splitlines() if line.startswith("| 1 | "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == f"{p1['output_throughput_tok_s']:,.1f} ±{(hi - lo) / 2:,.1f}"  # the stored interval, halved
    assert "±" in cells[3] and "±" in cells[5] and "±" not in cells[2]  # TTFT p50, TPOT p50; per-user has none
    assert "| concurrency | first byte p50 (ms) | time to second token p50 (ms) | tokens / chunk |" in page
    stream = [line for line in page.splitlines() if line.startswith("| 1 | –")]
    assert stream and stream[0].split("|")[4].strip() == "1.00"  # one token per chunk (runbuilder's served shape)
    assert CI_NOTE in page
