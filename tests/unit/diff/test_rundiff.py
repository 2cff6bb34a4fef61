"""Unit tests of pipeline/diff/rundiff.py and pipeline/diff/report.py: the significance floor, the U test, matching, headline and formats.

Runs are hand-made (tests/runbuilder.py) so every expected value below is worked out from
the timings written there, or from the exact Mann-Whitney distribution.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from pipeline.analysis import stages
from pipeline.diff.rundiff import diff_runs
from pipeline.diff.gate import regressions
from pipeline.diff.metrics import METRIC_BY_KEY, METRICS, metric_samples, relative_change, significance
from pipeline.diff.stats import benjamini_hochberg, called, log_min_two_sided_p, min_two_sided_p, welch
from pipeline.pages.changes import previous_runs
from pipeline.diff.report import format_csv, format_json, format_markdown, format_text
from pipeline.core.errors import BatchmarkError
from pipeline.core.pointsummary import PointSummary
from tests.runbuilder import H200_PROFILE, MODELS, NOISE_A, NOISE_B, make_run


# -- pure statistics ------------------------------------------------------------------------

@pytest.mark.parametrize(("n_a", "n_b", "expected"), [
    (3, 3, 0.1),            # 2 / C(6, 3) = 2 / 20 (the figure)
    (5, 5, 2 / 252),        # 2 / C(10, 5)
    (4, 4, 2 / 70),         # 2 / C(8, 4) = 0.0286: 4 + 4 can reach 0.05
    (1, 1, 1.0),            # 2 / C(2, 1) = 1
    (0, 5, 1.0),            # an empty side can never be tested
])
def test_min_two_sided_p_matches_exact_distribution(n_a, n_b, expected):
    assert min_two_sided_p(n_a, n_b) == pytest.approx(expected)


@pytest.mark.parametrize(("n_a", "n_b"), [(515, 515), (1280, 1280), (10_000, 10_000), (3, 10_000)])
def test_min_two_sided_p_never_overflows(n_a, n_b):
    """Regression (fault kind: OverflowError at GPU sample counts): ``2 / math.comb(1030, 515)`` did not fit
    a float.  The floor is now 2 / C(n_a + n_b, n_a) computed in log space; at these counts it underflows to 0."""
    assert 0.0 <= min_two_sided_p(n_a, n_b) < 1e-9


def test_log_min_two_sided_p_hand_worked():
    # ln(2 / C(6, 3)) = ln(2 / 20) = ln 0.1.
    assert log_min_two_sided_p(3, 3) == pytest.approx(math.log(0.1), rel=1e-12)
    # 10,000 a side: C(2n, n) = 4^n / sqrt(pi n) × (1 − 1 / (8n) + …) (Stirling; Graham, Knuth & Patashnik,
    # Concrete Mathematics, eq. 9.93), so ln(2 / C) = ln 2 − 2n ln 2 + ½ ln(pi n) + 1 / (8n) with n = 10,000:
    # 0.693147 − 13862.943611 + 5.176313 + 0.0000125 = −13857.072916 (worked by hand to 6 decimals).
    n = 10_000
    by_hand = math.log(2) - 2 * n * math.log(2) + 0.5 * math.log(math.pi * n) + 1 / (8 * n)
    assert log_min_two_sided_p(n, n) == pytest.approx(-13857.072916, abs=1e-6)
    assert log_min_two_sided_p(n, n) == pytest.approx(by_hand, abs=1e-8)
    # 3 against 10,000: C(10003, 3) = 10003 × 10002 × 10001 / 6 exactly.
    assert log_min_two_sided_p(3, n) == pytest.approx(math.log(2 / (10003 * 10002 * 10001 / 6)), rel=1e-12)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_min_p_equals_scipy_on_fully_separated_samples(n):
    # Fully separated samples are the most extreme arrangement, so scipy's exact Mann-Whitney p is the floor
    # (why the diff uses no rank test: 3 + 3 can never go below 0.1).
    from scipy.stats import mannwhitneyu

    p = mannwhitneyu(list(range(n)), list(range(100, 100 + n)), alternative="two-sided").pvalue
    assert p == pytest.approx(min_two_sided_p(n, n))


def test_welch_three_plus_three_can_be_significant():
    """Regression (fault kind: a test that can never fire): 3 + 3 repeats gave the U test a floor
    of 0.1 > 0.05.  Welch on A = 1, 2, 3 and B = 4, 5, 6, worked by hand: means 2 and 5, variances 1 and 1,
    SE = sqrt(1/3 + 1/3) = 0.8165, t = 3 / 0.8165 = 3.6742, df = (2/3)² / (2 × (1/3)² / 2) = 4; Student's t with
    4 df has the closed form two-sided p = 1 − 1.5 u + 0.5 u³ with u = t / sqrt(t² + 4) = 0.87831, so p = 0.021312."""
    w = welch([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert w.t == pytest.approx(3.674235, abs=1e-6) and w.df == pytest.approx(4.0)
    u = w.t / math.sqrt(w.t ** 2 + 4)
    assert w.p_value == pytest.approx(1 - 1.5 * u + 0.5 * u ** 3, rel=1e-9) == pytest.approx(0.021312, abs=1e-6)
    res = significance([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], alpha=0.05)
    assert res.significant and res.note is None and res.p_floor == 0.0


def test_welch_ten_thousand_a_side():
    """Numerically safe at any count: A = 0, 2, 0, 2, … (10,000 values: mean 1, variance
    10,000 / 9,999), B = A + 0.03.  By hand: SE = sqrt(2 × (10,000 / 9,999) / 10,000) = 0.0141428, t = 0.03 / SE
    = 2.12121, df = 2 × 9,999 = 19,998 (equal variances and counts), so t is all but normal:
    p = 2 × (1 − Φ(2.1212)) = 2 × 0.016952 = 0.03390 (normal table; the t tail at 19,998 df is 1e-5 wider)."""
    a = [0.0, 2.0] * 5000
    w = welch(a, [x + 0.03 for x in a])
    assert w.t == pytest.approx(2.12121, abs=1e-5) and w.df == pytest.approx(19998, rel=1e-9)
    assert w.p_value == pytest.approx(0.03390, abs=5e-5)


def test_welch_edge_cases():
    # Identical samples: t = 0, p = 1.  Constant but different sides: no spread, a certain difference, p = 0.
    assert welch([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).p_value == pytest.approx(1.0)
    w = welch([1.0, 1.0], [2.0, 2.0])
    assert w.t == math.inf and w.p_value == 0.0
    assert welch([1.0], [2.0, 3.0]) is None  # one value has no variance: no test
    res = significance([1.0], [2.0, 3.0], alpha=0.05)
    assert res.p_value is None and res.p_floor == 1.0 and "at least 2 repeats" in res.note
    assert "no samples to test" in significance([], [1.0, 2.0], alpha=0.05).note


def test_welch_many_keeps_order_across_sample_counts():
    """The batch groups pairs by their sample counts for scipy; each answer must land at its own pair.  Values
    worked by hand: (1, 2, 3) vs (4, 5, 6) is t = 3.674235, df = 4 (above); (1, 1) vs (2, 2) has no spread and a
    certain difference (t = inf, p = 0); a side of one value has no test (None)."""
    from pipeline.diff.stats import welch_many

    got = welch_many([([1.0, 1.0], [2.0, 2.0]), ([1.0], [2.0, 3.0]), ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
                      ([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])])
    assert got[0].t == math.inf and got[0].p_value == 0.0 and got[0].df == 2.0
    assert got[1] is None
    assert got[2].t == pytest.approx(3.674235, abs=1e-6) and got[2].df == pytest.approx(4.0)
    assert got[3].t == pytest.approx(-3.674235, abs=1e-6) and got[3].p_value == pytest.approx(got[2].p_value)


def test_benjamini_hochberg_hand_worked():
    """p = 0.01, 0.04, 0.03, 0.2 (m = 4), sorted 0.01, 0.03, 0.04, 0.2: p × m / rank = 0.04, 0.06, 0.0533, 0.2;
    the running minimum from the largest rank down gives q = 0.04, 0.0533, 0.0533, 0.2 (sorted order), as R's
    p.adjust(method = "BH") does.  None (not tested) stays None and does not count in m."""
    q = benjamini_hochberg([0.01, 0.04, None, 0.03, 0.2])
    assert q[2] is None
    assert [q[0], q[1], q[3], q[4]] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    from scipy.stats import false_discovery_control  # the published implementation agrees

    assert [q[0], q[1], q[3], q[4]] == pytest.approx(list(false_discovery_control([0.01, 0.04, 0.03, 0.2])))


def test_called_needs_both_q_and_the_minimum_effect():
    assert called(0.01, -0.10, 0.05, 0.05)
    assert not called(0.01, -0.04, 0.05, 0.05)  # certain but small: below the minimum effect
    assert not called(0.06, -0.50, 0.05, 0.05)  # large but could be noise
    assert not called(None, -0.50, 0.05, 0.05) and not called(0.01, None, 0.05, 0.05)


def test_relative_change():
    # (b - a) / a by definition; a = 0 has no relative change.
    assert relative_change(100.0, 80.0) == pytest.approx(-0.2)
    assert relative_change(0.0, 1.0) is None and relative_change(None, 1.0) is None


def test_latency_is_tested_per_repeat_served_and_static():
    """Regression (fault kind: requests of one repeat taken as independent): served latencies were
    tested per request (173 of 200 A/A comparisons called).  Now one value per repeat for every engine: the median
    for p50, the repeat's own p99 for p99, and the medians when a run predates the per-repeat p99."""
    base = dict(model="m", engine="vllm", input_len=1, output_len=2, concurrency=4, repeats=2, completed=8,
                failed=0, output_throughput_tok_s=1.0, per_user_tok_s=1.0, ttft_s=None, ttft_with_queue_s=None,
                tpot_s=None, itl_s=None, e2el_s=None, prefill_throughput_tok_s=None, step_time_s=0.1)
    ttft50, ttft99 = METRIC_BY_KEY["ttft_p50_s"], METRIC_BY_KEY["ttft_p99_s"]
    served = PointSummary(**base, samples={"ttft_s": [0.1] * 8, "ttft_s_per_repeat": [0.1, 0.2], "step_time_s": [],
                                           "ttft_p99_s_per_repeat": [0.3, 0.4]})
    old = PointSummary(**base, samples={"ttft_s": [0.1] * 8, "ttft_s_per_repeat": [0.1, 0.2], "step_time_s": [0.1, 0.1]})
    assert metric_samples(ttft50, served, None) == ([0.1, 0.2], "repeat")
    assert metric_samples(ttft99, served, None) == ([0.3, 0.4], "repeat")
    assert metric_samples(ttft99, old, None) == ([0.1, 0.2], "repeat median")


def test_bad_alpha_is_a_user_error(tmp_path: Path):
    make_run(tmp_path, "a")
    r = stages.load_run(tmp_path / "a")
    with pytest.raises(BatchmarkError, match="--alpha"):
        diff_runs(r, r, alpha=1.5)


# -- the scenario -------------------------------------------------------------------

@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """Run A and run B, 5 repeats each; only (dense-a, c=8) is 25 % slower in time (throughput × 0.8)."""
    d = tmp_path_factory.mktemp("runs")
    a = make_run(d, "20261129T100000Z-a", noise=NOISE_A)
    b = make_run(d, "20261129T110000Z-b", noise=NOISE_B, slow={("dense-a", 8): 1.25})
    return stages.load_run(a), stages.load_run(b)


def test_only_the_slowed_point_is_significant(scenario):
    d = diff_runs(*scenario)
    sig = {(c.model, c.concurrency) for c in d.changes if c.significant}
    assert sig == {("dense-a", 8)}
    # Every metric of the slowed point moved, all for the worse; every other row is "~".
    slowed = [c for c in d.changes if (c.model, c.concurrency) == ("dense-a", 8)]
    assert len(slowed) == len(METRICS) and all(c.verdict == "worse" for c in slowed)
    assert all(c.verdict == "~" for c in d.changes if (c.model, c.concurrency) != ("dense-a", 8))


def test_slowed_point_is_minus_twenty_percent(scenario):
    d = diff_runs(*scenario)
    row = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("dense-a", 8, "output_throughput_tok_s"))
    # Throughput = B / step time; A's median multiplier is 1.00, B's is 0.995 × 1.25, so the
    # change is 1 / (1.25 × 0.995) − 1 = −19.6 %, i.e. the −20 % slow-down under B's 0.5 % noise.
    assert row.change == pytest.approx(1 / (1.25 * 0.995) - 1)
    assert round(row.change * 100) == -20
    # Welch on the five repeats, by hand: A = 400 / m (m = 0.98 … 1.02, sd 0.0158), B = 320 / m' (m' = 0.975 …
    # 1.015): means ≈ 400.04 and 321.64, variances of the means ≈ (400 × 0.0158)² / 5 = 8.0 and
    # (321.6 × 0.0158)² / 5 = 5.2, so t ≈ −78.4 / sqrt(13.2) = −21.6 at df ≈ 7.7: p < 1e-6, and q ≤ 0.05.
    assert row.p_value < 1e-6 and row.q_value <= 0.05 and row.n_a == row.n_b == 5


def test_noise_rows_have_the_interleaved_p(scenario):
    d = diff_runs(*scenario)
    row = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("moe-b", 8, "output_throughput_tok_s"))
    # B's multipliers are A's less 0.005, so the means of 400 / m differ by ≈ 400 × 0.005 = 2.0 tok/s against a
    # standard error of ≈ sqrt(8.0 + 8.0) = 4.0: t ≈ 0.50 at df ≈ 8, two-sided p ≈ 0.63 (t table; scipy's
    # ttest_ind(equal_var=False) gives 0.6305).
    assert row.p_value == pytest.approx(0.6305, abs=1e-3) and row.verdict == "~"
    # Median change 1 / 0.995 − 1 = +0.5 %.
    assert row.change == pytest.approx(1 / 0.995 - 1)


def test_fail_above_counts_only_significant_throughput_drops(scenario):
    d = diff_runs(*scenario)
    regs = regressions(d, 10)
    # Output and per-user throughput of the slowed point, both −19.6 % < −10 %.
    assert {(c.model, c.concurrency, c.metric) for c in regs} == {
        ("dense-a", 8, "output_throughput_tok_s"), ("dense-a", 8, "per_user_tok_s")}
    assert regressions(d, 25) == []  # a 19.6 % drop does not exceed 25 %


def test_self_diff_reports_no_change(scenario):
    a, _ = scenario
    d = diff_runs(a, a)
    # Identical samples: every change is 0 and every p is 1 (t = 0).
    assert all(c.change in (0.0, None) and c.verdict in ("~", "n/a") for c in d.changes)
    assert all(c.p_value == 1.0 for c in d.changes if c.p_value is not None)
    assert not any(m.changed for m in d.models)
    assert d.comparable and d.headline.startswith("Comparable")
    assert not d.only_in_a and not d.only_in_b


def test_three_repeats_can_call_a_change(tmp_path: Path):
    """Regression (fault kind: a gate that can never fire): with 3 + 3 repeats the U test's floor was
    2 / C(6, 3) = 0.1 > 0.05, so even a 20 % slow-down was "~".  Welch on the per-repeat values calls it: A = 400 / m
    for m = 0.99, 1.00, 1.01 (sd ≈ 4.0 tok/s), B = 320 / m (sd ≈ 3.2): t ≈ −80 / sqrt(16 / 3 + 10.2 / 3) ≈ −27."""
    a = make_run(tmp_path, "a", noise=(0.99, 1.0, 1.01))
    b = make_run(tmp_path, "b", noise=(0.99, 1.0, 1.01), slow={("dense-a", 8): 1.25})
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    assert {(c.model, c.concurrency) for c in d.changes if c.significant} == {("dense-a", 8)}
    row = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("dense-a", 8, "output_throughput_tok_s"))
    assert row.verdict == "worse" and row.p_value < 1e-4 and row.p_floor == 0.0
    # the JSON and CSV name it p_floor, never min_p (the sampling parameter's name)
    doc = json.loads(format_json(d))
    assert doc["changes"][0]["p_floor"] == 0.0 and "min_p" not in doc["changes"][0]
    assert "p_floor" in format_csv(d).splitlines()[0].split(",")
    # the headline's second sentence: 8 calls (every metric of the slowed point) among 2 × 5 × 8 = 80 tests
    assert d.n_called == 8 and d.n_tests == 80
    assert "8 change(s) called among 80 tests" in format_text(d).splitlines()[2]


def test_minimum_effect_keeps_a_small_certain_change_quiet(tmp_path: Path):
    # (dense-a, c = 8) 3 % slower with 0.2 % noise: certain (p tiny) but below a 5 % minimum effect, so "~";
    # with --min-effect 2 % it is called.  Throughput change 1 / 1.03 − 1 = −2.9 %.
    noise = (0.998, 1.0, 1.002, 0.999, 1.001)
    a = make_run(tmp_path, "a", noise=noise)
    b = make_run(tmp_path, "b", noise=noise, slow={("dense-a", 8): 1.03})
    ra, rb = stages.load_run(a), stages.load_run(b)
    row = next(c for c in diff_runs(ra, rb, min_effect=0.05).changes
               if (c.model, c.concurrency, c.metric) == ("dense-a", 8, "output_throughput_tok_s"))
    assert row.change == pytest.approx(1 / 1.03 - 1) and row.q_value < 0.05 and row.verdict == "~"
    assert "< min effect" in format_text(diff_runs(ra, rb, min_effect=0.05))
    row = next(c for c in diff_runs(ra, rb, min_effect=0.02).changes
               if (c.model, c.concurrency, c.metric) == ("dense-a", 8, "output_throughput_tok_s"))
    assert row.verdict == "worse"
    with pytest.raises(BatchmarkError, match="--min-effect"):
        diff_runs(ra, rb, min_effect=-0.01)


def test_different_hardware_is_the_first_line(tmp_path: Path):
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", hardware=H200_PROFILE, noise=NOISE_B)
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    assert not d.comparable
    for out in (format_text(d), format_markdown(d)):
        first = out.splitlines()[0]
        assert "different hardware" in first and "cpu" in first and "h200" in first
    assert next(iter(json.loads(format_json(d)))) == "headline"


def test_different_workload_and_unmatched_points(tmp_path: Path):
    a = make_run(tmp_path, "a", concurrency=(1, 2, 4))
    b = make_run(tmp_path, "b", models=("dense-a", "dense-c"), concurrency=(2, 4, 8), noise=NOISE_B)
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    first = format_text(d).splitlines()[0]
    assert "different workload" in first and "only in A: moe-b" in first and "only in B: dense-c" in first
    # Matched: dense-a at c = 2, 4.  Only in A: dense-a c=1 and moe-b 1, 2, 4; only in B: dense-a 8, dense-c 2, 4, 8.
    assert sorted({c.concurrency for c in d.changes}) == [2, 4]
    assert [(p["model"], p["concurrency"]) for p in d.only_in_a] == [("dense-a", 1), ("moe-b", 1), ("moe-b", 2), ("moe-b", 4)]
    assert [(p["model"], p["concurrency"]) for p in d.only_in_b] == [("dense-a", 8), ("dense-c", 2), ("dense-c", 4), ("dense-c", 8)]


def test_provenance_names_what_differs(tmp_path: Path):
    # Same hardware; B upgraded transformers, switched dtype and probed 10 % more bandwidth (> 5 % tolerance).
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", noise=NOISE_B, transformers_version="4.58.0", dtype="bfloat16", bandwidth_gb_s=220.0)
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    differs = {p.field for p in d.provenance if p.differs}
    # (the engine's own package version is reported once, as the engine version)
    assert {"engine_version", "engine_flags.dtype", "bandwidth_gb_s_probed"} <= differs
    assert "hardware" not in differs and d.comparable
    text = format_text(d)
    assert "4.57.0" in text and "4.58.0" in text and "DIFFERS" in text


def test_model_figures_are_compared(tmp_path: Path):
    # Probed bandwidth 200 -> 220 GB/s: the ceiling (bandwidth / bytes per step) rises by exactly 10 %.
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", noise=NOISE_A, bandwidth_gb_s=220.0)
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    ceil = [m for m in d.models if m.field == "ceiling_tok_s"]
    assert len(ceil) == len(MODELS) and all(m.change == pytest.approx(0.10) for m in ceil)


def test_csv_has_a_row_per_point_and_metric(scenario):
    d = diff_runs(*scenario)
    rows = list(csv.DictReader(io.StringIO(format_csv(d))))
    point_rows = [r for r in rows if r["scope"] == "point"]
    # 2 models × 5 concurrencies × 8 metrics (MFU included).
    assert len(point_rows) == 2 * 5 * len(METRICS)
    slowed = [r for r in point_rows if r["significant"] == "True"]
    assert {(r["model"], r["concurrency"]) for r in slowed} == {("dense-a", "8")}
    assert math.isclose(float(slowed[0]["change"]), 1 / (1.25 * 0.995) - 1)


def test_markdown_tables_are_well_formed(scenario):
    md = format_markdown(diff_runs(*scenario))
    assert md.startswith("**Comparable")
    assert "## output throughput (tok/s; higher is better)" in md
    assert "| dense-a | transformers | 64/16 | 8 |" in md


def test_previous_runs_pairs_same_hardware_and_workload():
    # Run ids sort by time; each run pairs with the latest earlier run of the same hardware,
    # engine and lengths that shares a model, skipping runs of other hardware in between.
    def prov(hw, wl="in 64 / out 16", models=("m",)):
        return {"hardware": hw, "engine": "transformers", "workloads": [wl], "models": list(models)}
    got = previous_runs([("20261101T000000Z-a", prov("cpu")), ("20261102T000000Z-b", prov("h200")),
                         ("20261103T000000Z-c", prov("cpu")), ("20261104T000000Z-d", prov("cpu", "in 128 / out 16")),
                         ("20261105T000000Z-e", prov("cpu", models=("other",))), ("20261106T000000Z-f", prov("cpu"))])
    assert got == {"20261101T000000Z-a": None, "20261102T000000Z-b": None, "20261103T000000Z-c": "20261101T000000Z-a",
                   "20261104T000000Z-d": None, "20261105T000000Z-e": None, "20261106T000000Z-f": "20261103T000000Z-c"}


def test_imported_runs_without_samples_are_compared_but_not_tested(tmp_path: Path):
    # An import of a summary block keeps one value per point and no samples: the change is
    # reported (100 -> 90 tok/s = -10 %) and every test says there is nothing to test.
    from tests.runbuilder import make_imported_run

    a = make_imported_run(tmp_path, "ia", {1: 100.0, 8: 400.0})
    b = make_imported_run(tmp_path, "ib", {1: 90.0, 8: 400.0})
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    row = next(c for c in d.changes if c.concurrency == 1 and c.metric == "output_throughput_tok_s")
    assert row.change == pytest.approx(-0.10) and row.verdict == "~" and "no samples" in row.note
    mbu = next(c for c in d.changes if c.metric == "mbu")
    assert mbu.a is None and mbu.verdict == "n/a"
    assert d.comparable and "vllm" in d.headline
    assert "no samples to test" in format_text(d)


def test_share_changes_are_percentage_points(scenario):
    """Regression (fault kind: relative change of a percentage): MBU 37.3 % → 20.4 % was shown as
    −45.3 %. Shares (MBU, MFU) now change by B − A in percentage points. At (dense-a, c = 8) B's median step is
    1.25 × 0.995 × A's, so MBU_B = MBU_A / 1.24375: the change is MBU_A × (1 / 1.24375 − 1) points, not the
    relative −19.6 %."""
    d = diff_runs(*scenario)
    for metric in ("mbu", "mfu"):
        row = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("dense-a", 8, metric))
        assert row.change_kind == "points" and row.b == pytest.approx(row.a / (1.25 * 0.995))
        assert row.change == pytest.approx(row.a * (1 / (1.25 * 0.995) - 1)) == pytest.approx(row.b - row.a)
    thr = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("dense-a", 8, "output_throughput_tok_s"))
    assert thr.change_kind == "relative"
    mbu = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("dense-a", 8, "mbu"))
    text = format_text(d)
    line = next(x for x in text.splitlines() if x.startswith("dense-a") and f"{mbu.a * 100:.1f}%" in x
                and f"{mbu.b * 100:.1f}%" in x)
    assert f"{(mbu.b - mbu.a) * 100:+.1f} pp" in line and "-19.6%" not in line
    assert "MBU and MFU B - A in percentage points (pp)" in text
    assert json.loads(format_json(d))["changes"][0]["change_kind"] in ("relative", "points")


def test_model_figures_are_words_not_enums(scenario):
    """Regression (fault kind: raw enum text): ``diff`` printed ``post-knee not_reached``. The hand-made
    curve (throughput B / (0.01 × (1 + B / 8))) gains 80, 67, 50, 33 % per doubling, so the knee is not reached."""
    d = diff_runs(*scenario)
    text = format_text(d)
    assert "not_reached" not in text
    row = next(x for x in text.splitlines() if x.startswith("dense-a") and "post-knee" in x)
    assert row.split()[-1] == "same" and "knee not reached  knee not reached" in row


def test_significance_many_gives_what_one_call_per_pair_gives():
    """The batched test (one vectorised t-tail call for every pair; a site diffs ~25,000 pairs) gives each pair exactly
    the p value, significance and note of its own call: separated, interleaved, ties, all tied, one value a side,
    no values, and large samples; and the p values of scipy's own Welch test (``ttest_ind(equal_var=False)``)."""
    import random

    from scipy.stats import ttest_ind

    from pipeline.diff.metrics import significance, significance_many

    rng = random.Random(7)
    pairs = [([1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]),
             ([1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 2.5, 3.5, 4.5, 5.5]),
             ([1.0, 2.0, 2.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]),
             ([3.0, 3.0, 3.0], [3.0, 3.0, 3.0]),  # all tied: t = 0, p = 1
             ([1.0], [2.0]), ([], [1.0]), ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
             ([rng.random() for _ in range(40)], [rng.random() + 0.3 for _ in range(50)])]
    pairs += [([rng.random() for _ in range(5)], [rng.random() for _ in range(5)]) for _ in range(20)]
    many = significance_many(pairs, 0.05)
    assert many == [significance(a, b, 0.05) for a, b in pairs]
    for (a, b), res in zip(pairs, many):
        if len(a) >= 2 and len(b) >= 2 and len(set(a + b)) > 1:
            assert res.p_value == pytest.approx(ttest_ind(b, a, equal_var=False).pvalue, rel=1e-9)
    assert many[3].p_value == 1.0 and many[4].p_value is None and many[5].p_value is None


def test_open_loop_points_match_by_rank_not_float_rate(tmp_path: Path):
    """Regression (fault kind: points never matched): ``rates: auto`` places rates from each run's
    measured peak, so A swept 1.13, 2.26, 4.52 req/s and B 1.17, 2.34, 4.68; with the float rate in the key no point
    matched.  By rank they pair up, and B's top rate, 25 % slower in time, is called worse like any closed point:
    throughput 1 / (1.25 × 0.995) − 1 = −19.6 % (runbuilder: B's median multiplier 0.995)."""
    a = make_run(tmp_path, "a", models=("dense-a",), concurrency=(8,), open_loop_rates=(1.13, 2.26, 4.52))
    b = make_run(tmp_path, "b", models=("dense-a",), concurrency=(8,), open_loop_rates=(1.17, 2.34, 4.68),
                 noise=NOISE_B, slow={("dense-a", -3): 1.25})
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    assert not d.only_in_a and not d.only_in_b
    thr = [c for c in d.changes if c.metric == "output_throughput_tok_s" and c.load == "poisson"]
    assert [(c.rate_a_rps, c.rate_rps) for c in thr] == [(1.13, 1.17), (2.26, 2.34), (4.52, 4.68)]
    assert [c.verdict for c in thr] == ["~", "~", "worse"]
    assert thr[2].change == pytest.approx(1 / (1.25 * 0.995) - 1, rel=1e-3)
    text = format_text(d)
    assert "poisson 4.68 req/s (A 4.52)" in text
    rows = [r for r in csv.DictReader(io.StringIO(format_csv(d))) if r["load"] == "poisson"]
    assert {(r["rate_a_rps"], r["rate_rps"]) for r in rows} == {("1.13", "1.17"), ("2.26", "2.34"), ("4.52", "4.68")}


def test_open_loop_sweeps_of_different_lengths_match_by_fraction_of_the_top_rate():
    # A: 1, 2, 4 req/s (fractions 0.25, 0.5, 1.0 of its top); B: 1.1, 2.2, 3.3, 4.4 (0.25, 0.5, 0.75, 1.0).
    # Fractions within 0.05 pair: 1↔1.1, 2↔2.2, 4↔4.4; B's 3.3 (0.75) has no partner.
    from pipeline.diff.match import match_open_loop
    from pipeline.core.records import PointKey

    def k(rate):
        return PointKey("m", "vllm", 64, 16, None, "poisson", rate)

    pairs = match_open_loop([k(1.0), k(2.0), k(4.0)], [k(1.1), k(2.2), k(3.3), k(4.4)])
    assert [(a.rate_rps, b.rate_rps) for a, b in pairs] == [(1.0, 1.1), (2.0, 2.2), (4.0, 4.4)]
    # the very same rate pairs first (explicit rates): 2.4 ↔ 2.4, though 2.4 is A's top and 4.8 B's
    assert match_open_loop([k(2.4)], [k(2.4), k(4.8)]) == [(k(2.4), k(2.4))]
    # other load patterns and caps are other sweeps: never matched with these
    assert match_open_loop([k(1.0)], [PointKey("m", "vllm", 64, 16, None, "constant", 1.0)]) == []


def test_parse_fail_above():
    from pipeline.diff.gate import parse_fail_above

    # one number: both throughput metrics (the gate's first form)
    assert parse_fail_above("10") == {"output_throughput_tok_s": 10.0, "per_user_tok_s": 10.0}
    assert parse_fail_above("output_throughput:5%,ttft_p99:10%") == {"output_throughput_tok_s": 5.0, "ttft_p99_s": 10.0}
    assert parse_fail_above("tpot_p50_s:2.5") == {"tpot_p50_s": 2.5}  # a full key, % optional
    for bad, words in (("ttft_p95:10%", "unknown metric 'ttft_p95'"), ("mbu:5%,mbu:6%", "given twice"),
                       ("ttft_p99:nan%", "finite percentage"), ("ttft_p99:-1%", "finite percentage"),
                       ("ttft_p99:", "finite percentage")):
        with pytest.raises(BatchmarkError, match=words):
            parse_fail_above(bad)


def test_fail_above_per_metric(scenario):
    """The slowed point's TTFT p99 (static batch: TTFT = prefill = 0.016 s × m for every request of a repeat): A's p99 over
    its 40 requests is 0.016 × 1.02 (the top two repeats' values coincide), B's 0.016 × 1.25 × 1.015, so the change is
    1.25 × 1.015 / 1.02 − 1 = +24.4 %: a 20 % gate fires, a 30 % one does not; output throughput −19.6 % against 5 %."""
    from pipeline.diff.gate import parse_fail_above

    d = diff_runs(*scenario)
    ttft = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("dense-a", 8, "ttft_p99_s"))
    assert ttft.change == pytest.approx(1.25 * 1.015 / 1.02 - 1) and ttft.verdict == "worse"
    assert [c.metric for c in regressions(d, parse_fail_above("ttft_p99:20%"))] == ["ttft_p99_s"]
    assert regressions(d, parse_fail_above("ttft_p99:30%")) == []
    assert {c.metric for c in regressions(d, parse_fail_above("output_throughput:5%,ttft_p99:30%"))} == {
        "output_throughput_tok_s"}
