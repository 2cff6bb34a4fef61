"""A one-point import is no headline, and a one-point chart's axis spans its own point.

Fault kinds pinned: a run that shows no batching (one concurrency) made Home's headline because it is the newest
clean run; a chart's fixed log2 ticks over a data domain of one value drew a c = 1 point under the tick "512".
"""

from __future__ import annotations

import json
import re
import shutil

from pipeline.importers import import_run
from pipeline.pages.charts import headline_chart
from pipeline.pages.render import render_site
from pipeline.pages.throughputchart import throughput_chart

from tests.conftest import DATA, REPO

MEASURED = "20261130T010035Z-vm"  # the committed clean cpu run: dense-llama-190m peaks at 230.9 tok/s at c = 32


def _one_point_import(runs_dir, tmp_path, hardware: str, run_id: str):
    d = json.loads((DATA / "vllm-bench" / "llama-3.1-8b-c4.json").read_text())
    d.update(max_concurrency=1, model_id="hand-made-model")  # no card: no ceiling, no MBU, nothing implausible
    f = tmp_path / f"{run_id}.json"
    f.write_text(json.dumps(d))
    return import_run("vllm-bench", [f], hardware, run_id=run_id, runs_dir=runs_dir)


def test_a_newer_one_point_import_is_not_the_headline(tmp_path):
    """The newest clean run of cpu is a one-point import (c = 1): the headline stays the measured curve
    (20261130T010035Z-vm); a hardware with only a one-point run gets a sentence and no chart."""
    runs_dir = tmp_path / "runs"
    shutil.copytree(REPO / "data" / "runs" / MEASURED, runs_dir / MEASURED)
    _one_point_import(runs_dir, tmp_path, "cpu", "20261203T000000Z-import")
    _one_point_import(runs_dir, tmp_path, "h200", "20261203T000001Z-import")
    render_site(tmp_path / "docs", runs=[MEASURED, "20261203T000000Z-import", "20261203T000001Z-import"],
                runs_dir=runs_dir)
    text = (tmp_path / "docs" / "index.md").read_text()
    head = text.split("<details", 1)[0]
    specs = re.findall(r'class="vega-spec" data-target="chart-\d+">(.*?)</script>', head)
    assert [json.loads(s)["title"].split(":")[0] for s in specs] == [f"cpu, run {MEASURED}"]
    assert "On h200 no run measured more than one concurrency of a workload" in head


def test_a_one_point_chart_spans_one_doubling_from_its_point():
    """Home's chart of one point at c = 1: x scale log2 over [1, 2], ticks 1 and 2 (was no domain, ticks 1 … 512, the
    point drawn under "512"); a curve 1 … 64 keeps [1, 64] with ticks at each doubling; the model page's throughput
    chart alike."""
    w = {"label": "m (64/32)", "model": {"model": "m"}, "points": [{"concurrency": 1, "output_throughput_tok_s": 50.0}]}
    x = headline_chart("t", [w])["layer"][0]["encoding"]["x"]
    assert x["scale"] == {"type": "log", "base": 2, "domain": [1, 2]} and x["axis"]["values"] == [1, 2]
    w["points"] = [{"concurrency": c, "output_throughput_tok_s": 50.0 * c} for c in (1, 4, 64)]
    x = headline_chart("t", [w])["layer"][0]["encoding"]["x"]
    assert x["scale"]["domain"] == [1, 64] and x["axis"]["values"] == [1, 2, 4, 8, 16, 32, 64]
    model = {"model": "m", "input_len": 64, "output_len": 32}
    spec = throughput_chart(model, [{"concurrency": 1, "output_throughput_tok_s": 50.0,
                                     "samples": {"output_throughput_tok_s": [50.0]}}], [])
    xs = [layer["encoding"]["x"] for layer in spec["layer"] if "x" in layer.get("encoding", {})]
    assert xs and all(x["scale"]["domain"] == [1, 2] and x["axis"]["values"] == [1, 2] for x in xs)
