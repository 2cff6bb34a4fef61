"""A run's quality verdict, shown wherever the run appears, and never a flagged run as headline or example.

Regression (fault kind: noisy run as headline): the newest run was measured while the machine was busy (its probe
was flagged noisy, its points noise); the flag appeared only on the Runs page, and Home, Benchmarks, the explainers
and Changes used that run as their headline ("from B = 1 to B = 2 the output did not grow" narrated as physics).

Hand-made runs (tests/runbuilder.py): the clean run's repeats have time multipliers 0.98 … 1.02 (spread
1.02 / 0.98 = 1.04×); the noisy run, newer, has 0.6, 1.0, 1.4, so every point's output throughput (B / step time)
spreads 1.4 / 0.6 = 2.33× between its slowest and fastest repeat, above the 1.5× limit.
"""

from __future__ import annotations


import pytest

from pipeline.analysis.quality import REPEAT_SPREAD_LIMIT, prefer_clean, repeat_spread, run_quality, verdict_text
from tests.runbuilder import NOISE_A, make_run

CLEAN, NOISY = "20261129T100000Z-clean", "20261129T120000Z-noisy"


def test_repeat_spread_by_hand():
    assert repeat_spread([10.0, 14.0, 6.0]) == pytest.approx(14 / 6)
    assert repeat_spread([5.0]) is None and repeat_spread(None) is None


def test_run_quality_reasons():
    pts = [{"model": "m", "input_len": 64, "concurrency": 2, "samples": {"output_throughput_tok_s": [10.0, 16.0]}},
           {"model": "m", "input_len": 64, "concurrency": 1, "samples": {"output_throughput_tok_s": [10.0, 14.9]}}]
    q = run_quality({"probe": {"warning": "bandwidth repeats spread 2.20x"}}, pts, [{"model": "m", "implausible": "x"}])
    assert q["verdict"] == "flagged" and REPEAT_SPREAD_LIMIT == 1.5
    # 16 / 10 = 1.6 > 1.5 flags c = 2; 14.9 / 10 = 1.49 does not flag c = 1
    assert [n["concurrency"] for n in q["noisy_points"]] == [2]
    assert q["reasons"][0] == "bandwidth probe: bandwidth repeats spread 2.20x"
    assert "m c = 2 (1.60×)" in q["reasons"][1] and q["reasons"][2].startswith("m: x. Most likely cause: the probe under-read")
    assert verdict_text(q).startswith("⚠ flagged: bandwidth probe") and verdict_text(q).endswith("(+2 more)")
    assert run_quality({"probe": {"warning": None}}, pts[1:])["verdict"] == "clean"
    assert prefer_clean([1, 2, 3], lambda x: x == 2) == [2] and prefer_clean([1, 3], lambda x: x == 2) == [1, 3]


@pytest.fixture
def pages(scratch_root):
    from pipeline.pages.render import render_site

    runs_dir = scratch_root / "data" / "runs"
    make_run(runs_dir, CLEAN, noise=NOISE_A)
    make_run(runs_dir, NOISY, noise=(0.6, 1.0, 1.4))
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)  # no reference given
    return scratch_root / "data" / "pages"


def test_flagged_run_is_shown_as_flagged_everywhere(pages):
    home = (pages / "index.md").read_text()
    rows = [line for line in home.splitlines() if line.startswith("| [")]
    assert len(rows) == 4
    # clean rows first, though the noisy run is newer; each row says its run's verdict
    assert all(CLEAN in r and "| clean |" in r for r in rows[:2])
    assert all(NOISY in r and "| ⚠ flagged |" in r for r in rows[2:])
    from pipeline.pages.indexviews import run_page_path

    bench = (pages / "models" / "dense-a.md").read_text()  # each model has its own page, a section per run
    noisy_section = bench.split(f"## {NOISY}", 1)[1].split("\n## ", 1)[0]
    assert '!!! warning "Flagged run: its numbers may not show the hardware"' in noisy_section
    assert "dense-a c = 1 (2.33×)" in noisy_section
    assert "Flagged run" not in bench.split(f"## {CLEAN}", 1)[1].split("\n## ", 1)[0]
    runs_page = (pages / "runs.md").read_text()
    # the Runs index condenses each reason to a line: 2 models × 5 points, each 1.4 / 0.6 = 2.33×
    assert "**⚠ flagged**: repeats disagree at 10 point(s), up to 2.33×" in runs_page
    assert "repeats of a point disagree by more than" not in runs_page
    assert "**⚠ flagged**: repeats of a point disagree by more than 1.50×" in (pages / run_page_path(NOISY)).read_text()
    assert "clean: probe steady, repeats agree within 1.5×" in (pages / run_page_path(CLEAN)).read_text()
    knee = (pages / "explain" / "knee.md").read_text()
    # explainers draw only clean runs: the flagged run is left out and counted
    assert NOISY not in knee and "runs flagged for a busy\nmachine are left out of every explainer (1 here)" in knee


def test_flagged_run_is_never_the_example_when_a_clean_one_exists(pages):
    batching = (pages / "explain" / "batching.md").read_text()
    example = batching.split("## Measured on cpu: dense-a", 1)[1].split("## Every measured workload", 1)[0]
    assert f"From run <code>{CLEAN}</code>" in example and NOISY not in example
    knee = (pages / "explain" / "knee.md").read_text()
    assert f"For dense-a on cpu (run <code>{CLEAN}</code>" in knee
    from pipeline.pages import explain
    from pipeline.machine.hardware import load_profile
    from pipeline.pages.views import view_of
    from pipeline.analysis.stages import load_run

    views = [view_of(load_run(pages.parent / "runs" / r)) for r in (NOISY, CLEAN)]
    ctx = explain.explain_context(views, load_profile("dgx-spark").model_dump(mode="json"), explain.worked_example_model())
    assert ctx["dense_run"] == CLEAN and ctx["moe_run"] == CLEAN


def test_show_says_the_run_is_flagged(scratch_root):
    from pipeline.views.show import format_table, show_run

    make_run(scratch_root / "data" / "runs", NOISY, noise=(0.6, 1.0, 1.4))
    doc = show_run(NOISY)
    assert set(doc) == {"run_id", "source", "hardware", "points", "models"}  # the contract's top level, exactly
    assert all(m["run_quality"]["verdict"] == "flagged" for m in doc["models"])
    # the reasons condensed, as on the Runs index (in full they made one line of 1,500 characters)
    head = format_table(doc).splitlines()[1]
    assert head.startswith("FLAGGED RUN: repeats disagree at ") and head.endswith(
        " (in full: the run's page, or `run_quality` in --json)"), head
    assert len(head) < 200 and any(r.startswith("repeats of a point disagree by more than 1.50×")
                                   for r in doc["models"][0]["run_quality"]["reasons"])


def test_open_loop_spread_is_the_schedule_not_the_machine():
    """Regression (fault kind: a quality check misreading its input — the committed simulated run was flagged "machine busy"): repeats of an open-loop
    point of 32 Poisson arrivals differ by 1.55x on their own; only closed-loop spread says the machine was busy."""
    from pipeline.analysis.quality import point_verdict
    samples = {"output_throughput_tok_s": [100.0, 155.0]}  # max / min = 1.55 > 1.5
    assert point_verdict({"load": "closed", "samples": samples})["verdict"] == "flagged"
    assert point_verdict({"samples": samples})["verdict"] == "flagged"  # no load recorded: closed
    assert point_verdict({"load": "poisson", "rate_rps": 0.5, "samples": samples})["verdict"] == "clean"


def test_mfu_reason_treats_bfloat16_and_bf16_as_one_dtype():
    """Regression (fault kind: one format under two spellings): a probe's ``bfloat16`` and a card's ``bf16`` are the same format, so an MFU
    above 1 there is not blamed on a dtype mismatch; float32 against bf16 is."""
    from pipeline.analysis.quality import implausible_mfu
    same = implausible_mfu({"mfu": 1.2, "concurrency": 4}, "bfloat16", "bf16")
    assert "probed in" not in same and "MFU 1.20 at c = 4" in same
    assert "probed in float32 while the model ran in bf16" in implausible_mfu({"mfu": 1.2, "concurrency": 4}, "float32", "bf16")
