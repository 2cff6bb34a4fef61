"""Unit tests of pipeline/diff.py and pipeline/diffreport.py: the significance floor, the U test, matching, headline and formats.

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

from pipeline import stages
from pipeline.diff import (METRICS, diff_runs, log_min_two_sided_p, metric_samples, min_two_sided_p, previous_runs, regressions,
                           relative_change, significance)
from pipeline.diffreport import format_csv, format_json, format_markdown, format_text
from pipeline.errors import BatchmarkError
from pipeline.metrics import PointSummary
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
    """Regression (issue 22, fault kind: OverflowError at GPU sample counts): ``2 / math.comb(1030, 515)`` did not fit
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
    # Fully separated samples are the most extreme arrangement, so scipy's exact p is the floor.
    res = significance(list(range(n)), list(range(100, 100 + n)), alpha=0.05)
    assert res.p_value == pytest.approx(min_two_sided_p(n, n))


def test_three_plus_three_cannot_be_significant_even_when_separated():
    # 3 + 3 fully separated: p = 0.1 (the floor) > 0.05 -> never significant, with a note saying why.
    res = significance([1.0, 2.0, 3.0], [10.0, 11.0, 12.0], alpha=0.05)
    assert res.p_value == pytest.approx(0.1)
    assert not res.significant
    assert "no change can be significant" in res.note and "0.1" in res.note


def test_five_plus_five_separated_is_significant():
    # 5 + 5 fully separated: p = 2/252 = 0.0079 <= 0.05.
    res = significance([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], alpha=0.05)
    assert res.significant and res.note is None


def test_identical_samples_give_p_one():
    # All values tied: U = n1 n2 / 2, the null's centre -> p = 1.
    res = significance([1.0] * 5, [1.0] * 5, alpha=0.05)
    assert res.p_value == 1.0 and not res.significant


def test_relative_change():
    # (b - a) / a by definition; a = 0 has no relative change.
    assert relative_change(100.0, 80.0) == pytest.approx(-0.2)
    assert relative_change(0.0, 1.0) is None and relative_change(None, 1.0) is None


def test_served_latency_is_tested_per_request_static_per_repeat():
    # Module docstring: per-request samples for served engines, per-repeat medians for static batches.
    base = dict(model="m", engine="vllm", input_len=1, output_len=2, concurrency=4, repeats=2, completed=8,
                failed=0, output_throughput_tok_s=1.0, per_user_tok_s=1.0, ttft_s=None, ttft_with_queue_s=None,
                tpot_s=None, itl_s=None, e2el_s=None, prefill_throughput_tok_s=None, step_time_s=0.1)
    ttft = METRICS[2]
    served = PointSummary(**base, samples={"ttft_s": [0.1] * 8, "ttft_s_per_repeat": [0.1, 0.1], "step_time_s": []})
    static = PointSummary(**base, samples={"ttft_s": [0.1] * 8, "ttft_s_per_repeat": [0.1, 0.1], "step_time_s": [0.1, 0.1]})
    assert metric_samples(ttft, served, None) == ([0.1] * 8, "request")
    assert metric_samples(ttft, static, None) == ([0.1, 0.1], "repeat")


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
    # Five B repeats all below five A repeats: the exact two-sided p is the 5 + 5 floor, 2 / 252.
    assert row.p_value == pytest.approx(2 / 252)


def test_noise_rows_have_the_interleaved_p(scenario):
    d = diff_runs(*scenario)
    row = next(c for c in d.changes if (c.model, c.concurrency, c.metric) == ("moe-b", 8, "output_throughput_tok_s"))
    # A's and B's multipliers interleave (B A B A ...): U = 0+1+2+3+4 = 10 of 25; exact two-sided p = 0.690.
    assert row.p_value == pytest.approx(0.6905, abs=1e-3)
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
    # Identical samples: every change is 0 and every p is 1 (all ranks tied).
    assert all(c.change in (0.0, None) and c.verdict in ("~", "n/a") for c in d.changes)
    assert all(c.p_value == 1.0 for c in d.changes if c.p_value is not None)
    assert not any(m.changed for m in d.models)
    assert d.comparable and d.headline.startswith("Comparable")
    assert not d.only_in_a and not d.only_in_b


def test_three_repeats_say_no_change_can_be_significant(tmp_path: Path):
    # 3 + 3 repeats: floor 2 / C(6, 3) = 0.1 > 0.05, so even the 20 % slow-down is "~" with a note.
    a = make_run(tmp_path, "a", noise=(0.99, 1.0, 1.01))
    b = make_run(tmp_path, "b", noise=(0.99, 1.0, 1.01), slow={("dense-a", 8): 1.25})
    d = diff_runs(stages.load_run(a), stages.load_run(b))
    assert not any(c.significant for c in d.changes)
    assert all(c.p_floor == pytest.approx(0.1) for c in d.changes)
    # the JSON and CSV name it p_floor, never min_p (the sampling parameter's name; issue 14)
    row = json.loads(format_json(d))["changes"][0]
    assert row["p_floor"] == pytest.approx(0.1) and "min_p" not in row
    assert "p_floor" in format_csv(d).splitlines()[0].split(",")
    assert any("no change can be significant" in n for n in d.notes)
    text = format_text(d)
    assert "the smallest two-sided p is 0.1 > α = 0.05" in text


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
    # 2 models × 5 concurrencies × 8 metrics (MFU added in issue 13).
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
    """Regression (issue 13, fault kind: relative change of a percentage): MBU 37.3 % → 20.4 % was shown as
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
    """Regression (issue 13, fault kind: raw enum text): ``diff`` printed ``post-knee not_reached``. The hand-made
    curve (throughput B / (0.01 × (1 + B / 8))) gains 80, 67, 50, 33 % per doubling, so the knee is not reached."""
    d = diff_runs(*scenario)
    text = format_text(d)
    assert "not_reached" not in text
    row = next(x for x in text.splitlines() if x.startswith("dense-a") and "post-knee" in x)
    assert row.split()[-1] == "same" and "knee not reached  knee not reached" in row


def test_significance_many_gives_what_one_call_per_pair_gives():
    """The batched test (one scipy call per group of equal counts and tie status; issue 13, "A site for a lab") gives
    each pair exactly the p value, significance and note of its own call: exact and normal methods, ties, one
    sample each (p = 1), no samples, all tied (NaN → 1), counts too small for α, and large samples."""
    import random

    from pipeline.diff import significance, significance_many

    rng = random.Random(7)
    pairs = [([1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]),  # exact, p = 2/252
             ([1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 2.5, 3.5, 4.5, 5.5]),  # exact, no ties
             ([1.0, 2.0, 2.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]),  # a tie: normal approximation
             ([3.0, 3.0, 3.0], [3.0, 3.0, 3.0]),  # all tied: NaN → 1
             ([1.0], [2.0]), ([], [1.0]), ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
             ([rng.random() for _ in range(40)], [rng.random() + 0.3 for _ in range(50)])]
    pairs += [([rng.random() for _ in range(5)], [rng.random() for _ in range(5)]) for _ in range(20)]
    assert significance_many(pairs, 0.05) == [significance(a, b, 0.05) for a, b in pairs]
    assert significance_many(pairs[:1], 0.05)[0].p_value == pytest.approx(2 / 252)
