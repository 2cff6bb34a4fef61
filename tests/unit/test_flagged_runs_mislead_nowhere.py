"""A run measured on a busy machine cannot pass as a finding anywhere on the site (must hold).

Regression (fault kind: noisy run as a finding): a run measured while other work loaded the machine was rightly
flagged, and still its MBU (against the busy machine's probe) topped the Bandwidth explainer, the Changes page
called it "+37 pp (better)", the sweep stopped its dense model at c = 4 after two weak doublings that were the
interference, and the model page explained the plateau as "this is batching itself".

Hand-made runs (tests/runbuilder.py, where a point's output throughput is B / step_s(B) with
step_s(B) = 0.010 × (1 + B / 8) s):

- CLEAN (older), hardware ``cpu``: dense-a and moe-b at c = 1 … 16, repeats 0.98 … 1.02: gains per doubling
  88.9 → 160 → 266.7 → 400 → 533.3 tok/s, none below 15 %, so no knee;
- HOGGED (newer), hardware ``cpu``, the same workloads: every point recorded other processes keeping 90 % of the
  machine's 2 CPUs busy (the interference meter's result, as a sweep under a CPU hog stores it; more than the
  25 % limit), its probe warned (and read 150 GB/s where the clean run's read 200), and dense-a's points c ≥ 2 are slowed so that the curve is flat: factor
  T(c) / (88.9 × 1.05) at c = 2, 4, 8, 16 gives ≈ 93.3 tok/s each, a "knee" at c = 1 and a plateau past it;
- LONE (hardware ``h200``), flagged the same way: the only run of its hardware.

Nothing of HOGGED or LONE may be a headline, an explainer's example, a better/worse verdict or an attribution.
"""

from __future__ import annotations

import json
import re

import pytest

from pipeline.sweep.gridwalk import stop_for_knee
from tests.runbuilder import CONCURRENCY, H200_PROFILE, MODELS, NOISE_A, make_run, step_s

CLEAN, HOGGED, LONE = "20261129T100000Z-clean", "20261130T120000Z-hogged", "20261130T130000Z-lone"
BUSY = {(m, c): 0.9 for m in MODELS for c in CONCURRENCY}
T1 = 1 / step_s(1)  # 88.9 tok/s
FLAT = {("dense-a", c): (c / step_s(c)) / (T1 * 1.05) for c in CONCURRENCY if c > 1}
WARNING = "noisy probe (bandwidth repeats spread 2.10x): was the machine busy?"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    import os

    from tests.conftest import make_scratch_root

    root = make_scratch_root(tmp_path_factory.mktemp("flagged"))
    old = os.environ.get("BATCHMARK_ROOT")
    os.environ["BATCHMARK_ROOT"] = str(root)
    try:
        from pipeline.pages.render import render_site

        runs_dir = root / "data" / "runs"
        make_run(runs_dir, CLEAN, noise=NOISE_A)
        make_run(runs_dir, HOGGED, noise=NOISE_A, slow=FLAT, busy=BUSY, probe_warning=WARNING, bandwidth_gb_s=150.0)
        make_run(runs_dir, LONE, noise=NOISE_A, busy=BUSY, hardware=H200_PROFILE)
        render_site(root / "data" / "pages", runs_dir=runs_dir)
        yield root
    finally:
        if old is None:
            os.environ.pop("BATCHMARK_ROOT", None)
        else:
            os.environ["BATCHMARK_ROOT"] = old


def pages_of(root):
    pages = root / "data" / "pages"
    return {str(p.relative_to(pages)): p.read_text() for p in pages.rglob("*.md")}


def test_the_flagged_runs_are_flagged(site):
    from pipeline.pages.views import view_of
    from pipeline.analysis.stages import load_run

    flagged = {r: view_of(load_run(site / "data" / "runs" / r)).flagged for r in (CLEAN, HOGGED, LONE)}
    assert flagged == {CLEAN: False, HOGGED: True, LONE: True}


def test_no_headline_from_a_flagged_run(site):
    home = pages_of(site)["index.md"]
    head = home.split("<details", 1)[0]
    assert CLEAN in head and HOGGED not in head
    # h200's only run is flagged: its section says so and draws no chart of it
    h200 = head.split("## h200", 1)[1]
    assert "every run is flagged" in h200 and "vega" not in h200.lower() and "peaks at" not in h200


def test_no_explainer_example_from_a_flagged_run(site):
    for name, text in pages_of(site).items():
        if name.startswith("explain/"):
            assert HOGGED not in text and LONE not in text, name
    batching = pages_of(site)["explain/batching.md"]
    assert f"From run <code>{CLEAN}</code>" in batching and "runs flagged for a busy\nmachine are left out of every explainer (2 here)" in batching


def test_no_better_or_worse_verdict_from_a_flagged_run(site):
    from pipeline.diff.rundiff import diff_runs
    from pipeline.analysis.stages import load_run

    d = diff_runs(load_run(site / "data" / "runs" / CLEAN), load_run(site / "data" / "runs" / HOGGED))
    # without the rule: dense-a c = 16 falls from 533 to 93 tok/s, five repeats against five, "worse"
    tput = next(c for c in d.changes if c.model == "dense-a" and c.concurrency == 16 and c.metric == "output_throughput_tok_s")
    assert tput.change == pytest.approx(93.3 / 533.3 - 1, abs=0.01)
    assert {c.verdict for c in d.changes} <= {"~", "n/a"} and not any(c.significant for c in d.changes)
    assert "no verdict: run B flagged" in tput.note
    changes = {k: v for k, v in pages_of(site).items() if k.startswith("changes")}
    assert changes, "the Changes pages were rendered"
    for name, text in changes.items():
        assert not re.search(r"\((better|worse)\)", text), name
    row = next(line for line in changes["changes.md"].splitlines() if HOGGED in line)
    assert "| 0 worse, 0 better; no verdict on " in row and row.endswith(": run B flagged at this point |")


def test_no_attribution_from_a_flagged_run(site):
    from pipeline.views.show import show_run

    model_page = pages_of(site)["models/dense-a.md"]
    hogged = model_page.split(f"## {HOGGED}", 1)[1].split("\n## 2", 1)[0]
    assert "Knee: **c = 1**" in hogged  # the flat curve: 93.3 / 88.9 = 1.05, a 5 % gain, under 15 %
    assert "batching itself" not in hogged and "nothing here is attributed to batching" in hogged
    doc = show_run(site / "data" / "runs" / HOGGED)
    dense = next(m for m in doc["models"] if m["model"] == "dense-a")
    assert dense["knee_concurrency"] == 1 and dense["post_knee_cause"] == "interference"


def test_mbu_against_a_noisy_probe_is_marked_unreliable(site):
    home = pages_of(site)["index.md"]
    rows = [line for line in home.splitlines() if line.startswith("| [") and HOGGED in line]
    assert len(rows) == 2 and all("unreliable, noisy probe" in r for r in rows)
    clean_rows = [line for line in home.splitlines() if line.startswith("| [") and CLEAN in line]
    assert clean_rows and not any("unreliable" in r for r in clean_rows)


def test_flagged_run_lives_on_its_model_and_run_pages(site):
    from pipeline.pages.indexviews import run_page_path

    pages = pages_of(site)
    assert HOGGED in pages["models/dense-a.md"] and "Flagged run" in pages["models/dense-a.md"]
    assert "flagged" in pages[str(run_page_path(HOGGED))]


def test_sweep_does_not_stop_on_flagged_points():
    # 100 → 105 → 110: two weak doublings (5 %, 4.8 %), under a 15 % threshold
    curve = [(1, 100.0), (2, 105.0), (4, 110.0)]
    assert stop_for_knee(curve, set(), 0.15, 2)
    assert not stop_for_knee(curve, {4}, 0.15, 2) and not stop_for_knee(curve, {1}, 0.15, 2)
    assert stop_for_knee([(1, 50.0)] + [(c * 2, t) for c, t in curve], {1}, 0.15, 2)  # the flagged point is not among them
    assert not stop_for_knee(curve, set(), 0.15, 0)  # 0: never


def test_mfu_above_one_is_marked_with_its_roof():
    """The committed vLLM run: MFU 1.016 at c = 32 of dense-llama-190m, its compute roof probed in float32 while
    the model ran in bfloat16 (run.json probe.dtype, models/dense-llama-190m.json dtype)."""
    from pipeline.analysis.quality import implausible_mfu
    from pipeline.pages.pointrows import point_rows
    from pipeline.pages.views import view_of
    from pipeline.analysis.stages import load_run
    from tests.conftest import REPO

    assert implausible_mfu({"mfu": 1.0, "concurrency": 4}) is None
    assert implausible_mfu({"mfu": 1.2, "concurrency": 4}, "float32", "bfloat16") == (
        "MFU 1.20 at c = 4 is above 1: the compute roof was probed in float32 while the model ran in bfloat16")
    run = REPO / "data" / "runs" / "20261130T010035Z-vm"
    if not run.is_dir():
        pytest.skip(f"{run} is not in this checkout")
    view = view_of(load_run(run))
    w = next(w for w in view.workloads if w.model["model"] == "dense-llama-190m")
    rows = {r["c"]: r for r in point_rows(w)}
    assert rows["32"]["mfu"] == "⚠ 1.016: above 1, impossible (roof probed in float32, model in bfloat16)"
    assert rows["16"]["mfu"] == "0.853"
    assert json.loads((run / "run.json").read_text())["probe"]["dtype"] == "float32"


def test_show_marks_mbu_of_a_noisy_probe(site):
    from pipeline.views.show import format_table, show_run

    text = format_table(show_run(site / "data" / "runs" / HOGGED))
    row = next(line for line in text.splitlines() if line.startswith("dense-a ") and line.split()[1] == "1")
    assert "?" in row and f"MBU marked ? is unreliable: measured against a bandwidth probe this run calls noisy ({WARNING})" in text
    clean = format_table(show_run(site / "data" / "runs" / CLEAN))
    assert "MBU marked ?" not in clean


def test_no_verdict_from_an_impossible_mfu():
    """The committed vLLM run against itself with c = 32's MFU raised: a change of an MFU above 1 is no finding."""
    from pipeline.diff.metrics import MetricChange
    from pipeline.diff.withhold import withhold_flagged

    def change(metric, a, b):
        return MetricChange("m", "vllm", 64, 32, 32, metric, metric.upper(), "fraction", True, a, b, b - a, 0.001,
                            5, 5, 0.004, "repeat", True, "better", None)

    cs = [change("mfu", 0.9, 1.016), change("mbu", 0.2, 0.3)]
    withhold_flagged(cs, {"verdict": "clean"}, {"verdict": "clean"})
    assert (cs[0].verdict, cs[0].significant) == ("~", False) and "MFU above 1 is impossible" in cs[0].note
    assert (cs[1].verdict, cs[1].significant) == ("better", True)


def test_summary_line_gives_the_verdict_and_its_main_reason(site):
    from pipeline.views.verdict import summary_line

    # HOGGED's reasons, condensed: its probe's warning, then 2 models × 5 points measured at 90 % outside load
    assert summary_line(site / "data" / "runs" / HOGGED, "site/index.html") == (
        f"run {HOGGED}: ⚠ flagged: noisy bandwidth probe (+1 more) · see: batchmark show {HOGGED} · site: site/index.html")
    assert summary_line(site / "data" / "runs" / CLEAN).startswith(f"run {CLEAN}: clean · see: batchmark show {CLEAN} · site: ")


def test_home_says_every_way_a_run_is_flagged(site):
    """Regression: Home said a run is flagged for a warned probe, repeats that disagree or impossible numbers only,
    while HOGGED (flagged for 90 % outside load at every point, its "flagged points" column "–") sat in its table.
    The limits are pipeline.analysis.quality's and pipeline.machine.interference's (10 % probe drift, 25 % of the CPUs, 1.5×)."""
    home = " ".join(pages_of(site)["index.md"].split())
    assert ("the probe repeated after the sweep warned or moved more than 10 %, other processes kept more than 25 % of "
            "its CPUs busy while a point ran, or the repeats of a point disagree by more than 1.5×") in home
    assert "A point measured on a busy machine is marked on its model's page and its run's page." in home


def test_a_model_page_says_why_the_newer_flagged_run_comes_last(site):
    """Regression: a model page said "newest run first" and listed the newer HOGGED after CLEAN (clean_first)."""
    page = pages_of(site)["models/dense-a.md"]
    assert "newest run first (a flagged run after the clean runs of its\nhardware)" in page
    assert page.index(f"## {CLEAN}") < page.index(f"## {HOGGED}")


def test_summary_of_a_run_names_the_built_site_once_it_has_the_runs_page(scratch_root):
    """Regression: after the main job had built the site with the run (its last line said ``site: site/index.html``),
    ``batchmark summary RUN``, which the README says prints that line again, said "site: not built with this run
    yet".  The site counts as built with the run when ``site/runs/<run id, lower case>.html`` exists (the Runs
    index's page per run, as ``mkdocs build`` writes it)."""
    from pipeline.pages.indexviews import built_site
    from pipeline.views.verdict import summary_line

    def summary_line_of(run_id):  # as `batchmark summary RUN` makes it (pipeline/cli.py)
        return summary_line(run_id, built_site(run_id))

    make_run(scratch_root / "data" / "runs", CLEAN, noise=NOISE_A)
    assert summary_line_of(CLEAN).endswith("site: not built with this run yet (snakemake --cores 1 committed builds it)")
    (scratch_root / "site" / "runs").mkdir(parents=True)
    (scratch_root / "site" / "index.html").write_text("<html></html>")
    (scratch_root / "site" / "runs" / "20261129t100000z-other.html").write_text("<html></html>")
    assert summary_line_of(CLEAN).endswith("not built with this run yet (snakemake --cores 1 committed builds it)")
    (scratch_root / "site" / "runs" / f"{CLEAN.lower()}.html").write_text("<html></html>")
    assert summary_line_of(CLEAN) == f"run {CLEAN}: clean · see: batchmark show {CLEAN} · site: site/index.html"


def test_a_run_flagged_only_for_an_impossible_figure_is_not_a_busy_machine():
    """Such a run (the llama.cpp DGX Spark reference: gpt-oss-20b's MBU 1.02 against its card) stays in the
    explainers with that figure marked; a busy machine's run does not."""
    from pipeline.analysis.quality import run_quality

    pts = [{"model": "m", "concurrency": 1, "samples": {"output_throughput_tok_s": [10.0, 10.1]}}]
    only_card = run_quality({"probe": {"warning": None}}, pts, [{"model": "m", "implausible": "MBU above 1 at c = 8"}])
    assert only_card["verdict"] == "flagged" and only_card["interference"] is False
    busy = run_quality({"probe": {"warning": "spread 2.1x"}}, pts, [{"model": "m", "implausible": "MBU above 1"}])
    assert busy["verdict"] == "flagged" and busy["interference"] is True


def test_the_diff_headline_counts_no_withheld_call(site):
    from pipeline.diff.rundiff import diff_runs
    from pipeline.analysis.stages import load_run

    d = diff_runs(load_run(site / "data" / "runs" / CLEAN), load_run(site / "data" / "runs" / HOGGED))
    assert d.n_called == 0 and d.calls.startswith("0 change(s) called")


def test_the_diff_gives_a_flagged_runs_reasons_condensed(site):
    """Regression: `batchmark diff` of a clean and a busy run printed B's reasons in full on one line (1,548
    characters for a real vLLM CPU run: the probe's sentence once per model, then every busy point).  HOGGED's,
    condensed as on the Runs index: its probe's warning, then its 10 points (2 models × 5) at 90 % outside load."""
    from pipeline.diff.rundiff import diff_runs
    from pipeline.diff.report import format_text
    from pipeline.analysis.stages import load_run

    text = format_text(diff_runs(load_run(site / "data" / "runs" / CLEAN), load_run(site / "data" / "runs" / HOGGED)))
    line = next(x for x in text.splitlines() if x.startswith("run quality of B: "))
    assert line == "run quality of B: FLAGGED: noisy bandwidth probe; machine busy during 10 point(s), up to 90% of its CPUs"
    assert "run quality of A: clean" in text
