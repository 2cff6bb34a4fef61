"""No page states a verdict and its absence together.

Regression (fault kind: a page that contradicts itself): a change page showed −60 % throughput at p = 0.0002 and
then "Significant changes: None: every difference … is within noise", its reason ("no verdict: run B flagged") a
footnote; History said "No step: every figure stayed at one level" beside a −70 % line, the flagged run unmarked.

Hand-made runs (tests/runbuilder.py): CLEAN, then SLOW measured while other processes kept 90 % of the machine's
2 CPUs busy at every point (more than the interference check's 25 %) and with every time × 2.5, so output
throughput is 1 / 2.5 − 1 = −60 % at every point, five repeats a side that agree: the statistics call it, the
flag takes the call back.
"""

from __future__ import annotations

import re

import pytest

from tests.runbuilder import CONCURRENCY, NOISE_A, NOISE_B, make_run

CLEAN, SLOW = "20261201T100000Z-clean", "20261201T110000Z-slow"


@pytest.fixture
def pages(scratch_root):
    from pipeline.pages.render import render_site

    runs_dir = scratch_root / "data" / "runs"
    make_run(runs_dir, CLEAN, noise=NOISE_A, models=("dense-a",))
    make_run(runs_dir, SLOW, noise=NOISE_B, models=("dense-a",), slow={("dense-a", c): 2.5 for c in CONCURRENCY},
             busy={("dense-a", c): 0.9 for c in CONCURRENCY})
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    root = scratch_root / "data" / "pages"
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.md")}


def test_the_change_page_gives_no_verdict_in_the_verdicts_place(pages):
    page = next(text for name, text in pages.items() if name.startswith("changes/") and SLOW.lower() in name.lower())
    flat = " ".join(page.split())
    assert "None: every difference" not in flat
    # 5 points × (output throughput, per-user, TTFT p50/p99, TPOT p50/p99) at −60 % / +150 %, and MBU: all called, all withheld
    n = int(re.search(r"No verdict on (\d+) change\(s\)", flat).group(1))
    assert n >= 10 and "run B flagged at this point" in flat
    # 88.89 → 88.89 / (2.5 × 0.995) = 35.73 tok/s: −59.8 %, p = 2.7e-9, its verdict's place says why there is none;
    # each side ± half its 95 % interval: per repeat 1 / (0.01125 m), s = 1.406 (A) and 0.568 (B) tok/s over 5 repeats,
    # t(0.975, 4) = 2.776: 2.776 × 1.406 / √5 = 1.7, 2.776 × 0.568 / √5 = 0.71
    assert ("| dense-a | 64 / 16 | 1 | output throughput | 88.89 ±1.7 | 35.73 ±0.71 | -59.8% (no verdict: run B flagged "
            "at this point) |") in page
    assert not re.search(r"\((better|worse)\)", page)
    row = next(line for line in pages["changes.md"].splitlines() if SLOW in line and line.startswith("| ["))
    assert f"0 worse, 0 better; no verdict on {n}: run B flagged at this point |" in row


def test_history_marks_the_flagged_run_beside_no_step(pages):
    flat = " ".join(pages["changes.md"].split())
    assert "No step: every figure stayed at one level" not in flat
    assert f"{SLOW} ⚠ flagged (busy machine), left out of the steps, its largest move" in flat
    # TTFT p50 at the lowest c: 2.5 × 0.995 (NOISE_B's median repeat) against 1.00 (NOISE_A's) = +148.75 %
    assert "dense-a · in 64 / out 16: TTFT p50 (ms), lowest c +148.7 %" in flat


def test_the_runs_index_names_each_runs_engine_and_config(pages):
    """Regression (fault kind: runs that look alike): the Runs index had no engine or config column, so a vLLM and a
    transformers run of one hardware looked the same.  tests/runbuilder.py's runs: engine transformers, config test."""
    rows = [line for line in pages["runs.md"].splitlines() if line.startswith("| [2026")]
    assert rows and all("| cpu | transformers | test |" in r for r in rows)
    assert "| run | source | hardware | engine | config | models |" in pages["runs.md"]
