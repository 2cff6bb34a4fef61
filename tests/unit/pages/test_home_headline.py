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


def test_home_names_the_newest_run_with_its_verdict_and_a_link_flagged_or_not(tmp_path):
    """Fault kind: a user's run found nowhere where they look first (a flagged newest run is no headline, and Home
    did not say it existed).  Home's first line after the intro names the newest run by id with a link to its page:
    "was flagged because …" for a flagged one (its short reasons), "is clean" for a clean one."""
    from tests import runbuilder as rb

    render_site(tmp_path / "site", runs=RUNS)
    text = (tmp_path / "site" / "index.md").read_text()
    assert "**Your newest run**, [20261130T010035Z-vm](runs/20261130t010035z-vm.md) on cpu, is clean" in text
    runs_dir = tmp_path / "runs"
    rb.make_run(runs_dir, "20261128T000000Z-h", models=("dense-a",), concurrency=(1, 2))
    rb.make_run(runs_dir, "20261129T000000Z-h", models=("dense-a",), concurrency=(1, 2),
                probe_warning="bandwidth repeats spread 40 % of their median")
    render_site(tmp_path / "flagged", runs_dir=runs_dir)
    text = (tmp_path / "flagged" / "index.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("**Your newest run**"))
    assert line.startswith("**Your newest run**, [20261129T000000Z-h](runs/20261129t000000z-h.md) on cpu, "
                           "was flagged because noisy bandwidth probe: its numbers are on its page, marked")
