"""Home leads with the finding: per hardware, a headline chart of the newest
clean run (output throughput vs concurrency per model, ceilings and knees) and one sentence saying what it
shows; every run's table folded below in a <details> block.  The committed runs are three clean runs on
``cpu``; the newest is 20261130T010035Z-vm (dense-llama-190m peaks at 230.9 tok/s at c = 32, knee 16)."""

from __future__ import annotations

import json
import re

from pipeline.pages.render import render_site

RUNS = ["20261129T161329Z-vm", "20261129T165000Z-vm", "20261130T010035Z-vm"]


def test_home_has_one_headline_chart_per_hardware_and_folds_the_rest(tmp_path):
    render_site(tmp_path, runs=RUNS)
    text = (tmp_path / "index.md").read_text()
    specs = re.findall(r'<script type="application/json" class="vega-spec" data-target="chart-\d+">(.*?)</script>', text)
    assert len(specs) == 1  # one hardware, one chart
    spec = json.loads(specs[0])
    assert "cpu, run 20261130T010035Z-vm" in spec["title"]
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["line", "rule", "rule"]  # curves, ceilings, knees
    assert "On cpu, run 20261130T010035Z-vm: dense-llama-190m (64 in / 32 out) peaks at 230.9 tok/s at c = 32, knee c = 16" in text
    head, rest = text.split("<details", 1)
    rows = [line for line in rest.splitlines() if line.startswith("| [")]
    assert "| [dense-llama-190m]" not in head and len(rows) == 6  # 3 runs × 2 models, in the fold
    assert "</details>" in rest
