"""Open-loop runs on the site: rendered by ``render_site`` and built by ``mkdocs build --strict``.

Two imported runs: GuideLLM's sample sweep (two closed-loop benchmarks and one constant-rate
benchmark at 2 req/s) and case 01 (a vLLM Poisson run at 2.4 req/s capped at 64, open loop only).
Expected: the rate points get the open-loop section (its two charts and the table with the
file's own values), the closed-loop charts and tables keep only the closed points, an open-only
workload renders without closed-loop figures, and the knee explainer has its open-loop section.
"""

from __future__ import annotations

import json
import subprocess
import sys
import os

import pytest

from pipeline.importers import import_run
from pipeline.pages.render import render_site
from tests.conftest import DATA

pytestmark = pytest.mark.slow


def test_open_loop_runs_render_and_build(scratch_root):
    runs_dir = scratch_root / "data" / "runs"
    import_run("guidellm", [DATA / "guidellm" / "benchmarks.json"], "dgx-spark", run_id="20261101T000000Z-guide")
    import_run("vllm-bench", [DATA / "cases" / "01-vllm-rate-limited-json" / "deepseek-v3.2-rate2.4-c64.json"], "h200",
               run_id="20261101T000000Z-rate")
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    # each model has its own page, with a section per run that measured it
    model_pages = [p.read_text() for p in sorted((scratch_root / "data" / "pages" / "models").glob("*.md"))]

    def section(run_id: str) -> str:
        page = next(t for t in model_pages if f"## {run_id}" in t)
        return page.split(f"## {run_id}", 1)[1].split("\n## ", 1)[0]

    guide, rate = section("20261101T000000Z-guide"), section("20261101T000000Z-rate")
    index = (scratch_root / "data" / "pages" / "benchmarks.md").read_text()
    assert "20261101T000000Z-rate" in index and "– (open loop only)" in index
    assert "#### Open loop: requests sent at a rate" in guide and "#### Open loop" in rate
    # the constant benchmark's row: 2 req/s offered, 40 successful in 113.78 s = 0.352 req/s achieved
    assert "| constant 2 req/s | 2.000 | – | 0.352 |" in guide
    # case 01: 2.4 offered, request_throughput 2.3118 achieved, p99 TTFT 611.9 ms, TPOT 18.7 ms, no E2EL
    assert "| poisson 2.4 req/s, cap 64 | 2.400 | – | 2.312 | 611.9 | 18.7 | – | – | – | – |" in rate
    # closed-loop table rows of the GuideLLM run: c = 1 and c = 8 only (the rate point is not a concurrency)
    closed_rows = [line for line in guide.splitlines() if line.startswith("| 1 |") or line.startswith("| 8 |")
                   or line.startswith("| None |")]
    assert [r.split("|")[1].strip() for r in closed_rows] == ["1", "8"]
    assert "Single stream" not in rate  # open loop only: no closed-loop figures invented
    specs = [json.loads(s) for s in (guide + rate).split('class="vega-spec"')[1:]
             for s in [s.split(">", 1)[1].split("</script>", 1)[0]]]
    titles = [str(s.get("title")) for s in specs]
    assert sum("achieved rate and goodput vs offered rate" in t for t in titles) == 2
    assert sum("p99 latency vs offered rate" in t for t in titles) == 2
    knee = (scratch_root / "data" / "pages" / "explain" / "knee.md").read_text()
    assert "{ #open-loop }" in knee and "Little's law" in knee
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"], cwd=scratch_root,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
