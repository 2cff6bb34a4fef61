"""Each point's length distribution on the model page and the workload in words, on the page and in ``show``
(pipeline.pages.lengthchart, pipeline.views.showworkload), from a real simulated sweep of a drawn workload.

Fault kinds: a drawn workload's pages and ``show`` said nothing of how its requests were drawn (every request read
as the shape); a histogram whose data is not the stored bins (re-binned, or a point missing), or whose token axis is
shared between 400-token prompts and 50-token outputs; a fixed-length workload given a histogram of one bar.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pipeline.commands.sweep import sweep
from pipeline.pages.lengthchart import eos_words

CONFIG = """name: dist
hardware: dgx-spark
backend: simulated
input_len: 400
output_len: 50
lengths:
  input: {distribution: uniform, range_ratio: 0.5}
  output: {distribution: uniform, range_ratio: 0.5}
  prefix_len: 32
  ignore_eos: false
concurrency: [1, 4]
repeats: 2
seed: 0
open_loop: {load: gamma, burstiness: 0.7, rates: [1.0]}
models:
  - name: llama-3.1-8b
    card: llama-3.1-8b
"""
WORDS = ("prompts uniform 200–600 tokens around 400 (range ratio 0.5), outputs stop at EOS, each at most a draw "
         "uniform 25–75 tokens around 50 (range ratio 0.5), a shared prefix of 32 tokens, a closed loop (a fixed "
         "number in flight) and gamma arrivals with burstiness 0.7")


def _specs(text: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r'class="vega-spec" data-target="chart-\d+">(.*?)</script>', text)]


def test_a_drawn_workload_is_drawn_and_said(scratch_root: Path):
    """By hand: prompts 32 + [200, 600] tokens, outputs [25, 75]; each point's histogram holds all its measured
    requests (2 repeats × 32 = 64 a point, every one finished); the outputs got (the simulated server generates each
    drawn length) are the drawn ones."""
    from pipeline.pages.render import render_site
    from pipeline.views.show import format_table, show_run

    cfg = scratch_root / "config" / "dist.yaml"
    cfg.write_text(CONFIG)
    assert sweep(cfg, run_id="20261203T000000Z-sim", progress=False) == 0
    run = scratch_root / "data" / "runs" / "20261203T000000Z-sim"
    summaries = json.loads((run / "summaries.json").read_text())["points"]
    for s in summaries:
        h = s["length_hist"]
        assert set(h) == {"input", "output", "got"} and h["got"] == h["output"]
        assert sum(h["input"]["counts"]) == s["completed"] == 64
        assert 232 <= h["input"]["min"] and h["input"]["max"] <= 632 and 25 <= h["output"]["min"] <= h["output"]["max"] <= 75
    page = next(p for p in render_site(scratch_root / "pages", runs_dir=run.parent) if p.parent.name == "models")
    text = page.read_text()
    assert f"Workload: {WORDS}." in text
    assert ("at all 3 points every output ran to the most it asked for, none stopped at EOS (the simulated server cannot "
            "know where a model stops: it generates every output to the most it asks for)") in text  # what EOS did, said
    spec = next(s for s in _specs(text) if "request lengths" in s["title"])
    assert spec["resolve"]["scale"]["x"] == "independent"  # prompts and outputs each on their own token axis
    layer = spec["spec"]["layer"][0]["encoding"]
    assert layer["x"]["bin"] == "binned" and layer["x2"]["field"] == "end" and layer["y"]["scale"] == {"zero": True}
    rows = spec["data"]["values"]
    assert {r["point"] for r in rows} == {"c = 1", "c = 4", "gamma 1 req/s"}
    for s, label in zip(summaries, ("c = 1", "c = 4", "gamma 1 req/s")):
        mine = [r for r in rows if r["point"] == label and r["length"] == "prompt tokens"]
        assert [r["start"] for r in mine] == s["length_hist"]["input"]["edges"][:-1]
        assert [r["requests"] for r in mine] == s["length_hist"]["input"]["counts"]
    doc = show_run(run)
    assert doc["models"][0]["workload"] == WORDS
    assert f"workload in 400 / out 50: {WORDS}" in format_table(doc).splitlines()


def test_fixed_lengths_are_said_and_not_drawn(tmp_path: Path):
    """A run of fixed lengths (tests/runbuilder: 64 in / 16 out, closed loop) says so in words and has no
    histogram."""
    from pipeline.pages.render import render_site
    from tests.runbuilder import make_run

    make_run(tmp_path / "runs", "20261129T000000Z-testhost")
    text = next(p for p in render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")
                if p.name == "dense-a.md").read_text()
    assert "Workload: fixed lengths, prompts 64 tokens, outputs 16 tokens, a closed loop (a fixed number in flight)." in text
    assert not any("request lengths" in str(s.get("title")) for s in _specs(text))


def test_an_import_is_said_as_its_tool_sent_it_never_as_fixed_lengths(tmp_path: Path):
    """Fault kind: an imported run (its tool's file states measured lengths, never how they were drawn: a vllm bench
    run of range ratio 0.9 imports at its mean lengths) called "fixed lengths" on its page and in ``show``."""
    from pipeline.pages.render import render_site
    from pipeline.views.show import format_table, show_run
    from tests.runbuilder import make_imported_run

    run = make_imported_run(tmp_path / "runs", "20261129T000000Z-testhost", {1: 50.0, 2: 90.0})
    said = ("as vllm-bench sent them, 1,024 prompt and 128 output tokens a request as it measured them (it states no "
            "length distribution), a closed loop (a fixed number in flight)")
    text = next(p for p in render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")
                if p.parent.name == "models").read_text()
    assert f"Workload: {said}." in text and "fixed lengths" not in text
    assert f"workload in 1024 / out 128: {said}" in format_table(show_run(run)).splitlines()


def test_what_eos_did_in_words():
    """Fault kind: a page of EOS-terminated outputs silent on where they stopped (a reader takes the asked lengths
    for the measured ones), or saying outputs stopped where none did.  By hand: means got 20 and 30 against asked 20
    and 40: 25 of 30 tokens on average, 83 %; one point of two shorter than asked."""
    def point(got, asked):
        return {"length_hist": {"output": {"mean": asked}, "got": {"mean": got}}}

    assert eos_words([point(20, 20), point(30, 40)]) == (
        "What EOS did: the outputs could stop where the model sampled its end-of-sequence token, and got 25.0 tokens "
        "on average of the 30.0 they asked for (83%); outputs stopped early at 1 of 2 points.")
    assert eos_words([point(36.5, 36.5)]).endswith("at all 1 points every output ran to the most it asked for, none "
                                                    "stopped at EOS (a model with random weights, or one whose folder "
                                                    "names no EOS token, rarely or never samples it).")
    assert eos_words([{"length_hist": {"output": {"mean": 5}}}, {}]) == ""  # ignore_eos: no got, nothing to say
