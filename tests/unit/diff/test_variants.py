"""What each setting bought (pipeline.diff.variants): variants of one run against the baseline, on hand-worked repeats.

Welch's t by hand (sample variances, ddof 1): baseline repeats 100, 102, 98 (mean 100, variance 4) against
122, 124, 120 (mean 122, variance 4): t = 22 / sqrt(4/3 + 4/3) = 22 / 1.633 = 13.47 on 4 degrees of freedom,
two-sided p = 0.00018 (the t table: t(0.9995, 4) = 8.61 < 13.47, so p < 0.001).  Baseline 100, 104, 96 (variance 16)
against 110, 114, 106: t = 10 / sqrt(16/3 + 16/3) = 3.062, p = 0.0376 (between t(0.975, 4) = 2.776 and
t(0.99, 4) = 3.747: 0.02 < p < 0.05).
"""

from __future__ import annotations

import pytest

from pipeline.core.pointsummary import PointSummary
from pipeline.diff.variants import NO_DIFFERENCE, NOT_TESTED, format_lines, variant_diff, variant_names


def _s(variant: str, c: int, thr: list[float], *, ttft_p99: list[float] | None = None, user: float = 50.0,
       met: bool | None = None, failed: int = 0) -> PointSummary:
    """A closed-loop point whose per-repeat output throughputs are ``thr`` (median shown) and whose per-repeat
    TTFT p99 is ``ttft_p99`` (s)."""
    med = sorted(thr)[len(thr) // 2]
    samples = {"output_throughput_tok_s": thr}
    ttft = None
    if ttft_p99:
        samples["ttft_p99_s_per_repeat"] = ttft_p99
        p99 = sorted(ttft_p99)[len(ttft_p99) // 2]
        ttft = {"p50": p99 / 2, "p90": p99, "p99": p99, "mean": p99 / 2}
    return PointSummary(model="m", engine="vllm", variant=variant, input_len=64, output_len=16, concurrency=c,
                        repeats=len(thr), completed=100 - failed, failed=failed, output_throughput_tok_s=med,
                        per_user_tok_s=user, ttft_s=ttft, ttft_with_queue_s=None, tpot_s=None, itl_s=None,
                        e2el_s=None, prefill_throughput_tok_s=None, step_time_s=None, samples=samples,
                        slo={"met": met} if met is not None else None)


def _entry(diff, name):
    return next(v for v in diff["variants"] if v["variant"] == name)


def test_called_peak_and_point_changes_in_words():
    # fp8 at c = 4: throughput 122 vs 100 (+22 %, p = 0.00018, module docstring); TTFT p99 0.7 s vs 1.0 s (−30 %):
    # variances 0.0001 a side, t = 0.3 / sqrt(2 × 0.0001 / 3) = 36.7, p < 0.001; c = 1 unchanged (same repeats)
    ss = [_s("default", 1, [50, 51, 49], ttft_p99=[0.1, 0.11, 0.09]), _s("default", 4, [100, 102, 98], ttft_p99=[1.0, 1.01, 0.99]),
          _s("fp8", 1, [50, 51, 49], ttft_p99=[0.1, 0.11, 0.09]), _s("fp8", 4, [122, 124, 120], ttft_p99=[0.7, 0.71, 0.69])]
    d = variant_diff(ss, ["default", "fp8"])
    e = _entry(d, "fp8")
    peak = e["peak"][0]
    assert peak["change"] == pytest.approx(0.22) and peak["p_value"] == pytest.approx(0.000176, rel=0.01)
    assert peak["called"]
    assert e["lines"][0] == "+22 % peak output throughput at c = 4"
    assert "TTFT p99 −30 % at c = 4" in e["lines"]
    assert "output throughput +22 % at c = 4" in e["lines"]
    assert format_lines(d)[1].startswith("  fp8: +22 % peak output throughput at c = 4")


def test_noise_alone_says_no_difference():
    ss = [_s("default", 4, [100, 102, 98]), _s("tp2", 4, [101, 99, 100])]
    e = _entry(variant_diff(ss, ["default", "tp2"]), "tp2")
    assert not e["peak"][0]["called"]
    assert e["lines"] == [NO_DIFFERENCE]


def test_nothing_testable_says_not_tested_and_why_never_no_difference():
    """Fault kind: an untested comparison reported as a finding ("no difference beyond noise" where one repeat a side
    has no spread to test against, or where the variant measured no shape the baseline did).  +50 % from one
    repeat each is no called change and no "no difference" either; a variant at 256/16 beside a baseline at 64/16
    has nothing to pair."""
    one = [_s("default", 4, [100.0]), _s("v", 4, [150.0])]
    e = _entry(variant_diff(one, ["default", "v"]), "v")
    assert not any(r["called"] for r in e["peak"] + e["points"])
    assert e["lines"][0].startswith(f"{NOT_TESTED}: a side has at most 1 repeat at every point") and len(e["lines"]) == 1
    apart = [_s("default", 4, [100, 102, 98]),
             _s("v", 4, [150, 152, 148]).__class__(**{**_s("v", 4, [150, 152, 148]).__dict__, "input_len": 256})]
    e = _entry(variant_diff(apart, ["default", "v"]), "v")
    assert e["lines"] == [f"{NOT_TESTED}: no shape and concurrency was measured (and included) under both it and the "
                          "baseline, so nothing could be compared"]


def test_below_the_minimum_effect_is_not_called():
    # +3 % with almost no spread: t = 3 / sqrt(2 × 0.01 / 3) = 36.7, p < 0.001, but 3 % < the 5 % minimum effect
    ss = [_s("default", 4, [100, 100.1, 99.9]), _s("v", 4, [103, 103.1, 102.9])]
    e = _entry(variant_diff(ss, ["default", "v"]), "v")
    row = next(r for r in e["points"] if r["metric"] == "output_throughput_tok_s")
    assert row["p_value"] < 0.001 and not row["called"]
    assert e["lines"] == [NO_DIFFERENCE]


def test_benjamini_hochberg_takes_back_a_lone_p_below_alpha():
    # c = 2: +10 %, p = 0.0376 (module docstring); c = 4: +1 %, t = 1 / 3.266 = 0.306, p = 0.775.
    # BH over the two points of the metric: q(0.0376) = 0.0376 × 2 / 1 = 0.075 > 0.05: not called, though p < α
    ss = [_s("default", 2, [100, 104, 96]), _s("default", 4, [100, 104, 96]),
          _s("v", 2, [110, 114, 106]), _s("v", 4, [101, 105, 97])]
    e = _entry(variant_diff(ss, ["default", "v"]), "v")
    row = next(r for r in e["points"] if r["metric"] == "output_throughput_tok_s" and r["concurrency"] == 2)
    assert row["p_value"] == pytest.approx(0.0376, abs=1e-3)
    assert row["q_value"] == pytest.approx(0.0752, abs=2e-3)
    assert not row["called"]


def test_excluded_points_are_not_compared():
    # the variant's c = 4 lost 60 of 100 requests (above the 5 % exclusion limit): no row at c = 4, and its peak is c = 1
    ss = [_s("default", 1, [50, 51, 49]), _s("default", 4, [100, 102, 98]),
          _s("v", 1, [50, 51, 49]), _s("v", 4, [200, 202, 198], failed=60)]
    e = _entry(variant_diff(ss, ["default", "v"]), "v")
    assert {r["concurrency"] for r in e["points"]} == {1}
    assert e["peak"][0]["variant_concurrency"] == 1 and e["peak"][0]["base_concurrency"] == 4


def test_best_under_slo_and_frontier_share():
    # under the SLO the baseline's best is c = 2 (c = 4 missed it), the variant's c = 4 (122 vs 100 at c = 2 of the
    # baseline: +22 %, p = 0.00018); the frontier over both: v's c = 4 (122 tok/s, per-user 50) beats every other point
    ss = [_s("default", 2, [100, 102, 98], met=True), _s("default", 4, [110, 112, 108], met=False),
          _s("v", 2, [100, 102, 98], met=True), _s("v", 4, [122, 124, 120], met=True)]
    e = _entry(variant_diff(ss, ["default", "v"]), "v")
    best = e["slo_best"][0]
    assert (best["base_concurrency"], best["variant_concurrency"]) == (2, 4) and best["called"]
    assert e["frontier"][0] == {"model": "m", "engine": "vllm", "input_len": 64, "output_len": 16,
                                "frontier_points": 1, "variant_points": 1}
    assert any(line.startswith("+22 % output throughput at the best point under the SLO") for line in e["lines"])


def test_variant_names_baseline_first():
    ss = [_s("b", 1, [1, 1]), _s("a", 1, [1, 1])]
    assert variant_names({"variants": [{"name": "a", "baseline": True}, {"name": "b"}]}, ss) == ["a", "b"]
    assert variant_names({}, ss) == ["b", "a"]
    assert variant_names({}, []) == ["default"]


def test_the_frontier_moved_up_at_the_same_interactivity():
    # baseline frontier: c = 1 (per-user 50, output 50) and c = 4 (per-user 40, output 160), trading one for the other.
    # At u >= 40 the variant's best is its c = 4 (per-user 45, output 200): 200 vs 160 = +25 %, variances 4 a side,
    # t = 40 / sqrt(4/3 + 4/3) = 24.5 on 4 df, p < 0.001; at u >= 50 only its c = 1 reaches: 50 vs 50, no change.
    # BH over the two: q = 2 × p for the smaller, still < 0.05: called
    ss = [_s("default", 1, [49, 50, 51], user=50.0), _s("default", 4, [158, 160, 162], user=40.0),
          _s("v", 1, [49, 50, 51], user=50.0), _s("v", 4, [198, 200, 202], user=45.0)]
    e = _entry(variant_diff(ss, ["default", "v"]), "v")
    rows = {r["base_concurrency"]: r for r in e["frontier_moved"]}
    assert rows[4]["variant_concurrency"] == 4 and rows[4]["change"] == pytest.approx(0.25) and rows[4]["called"]
    assert rows[1]["variant_concurrency"] == 1 and rows[1]["change"] == 0 and not rows[1]["called"]
    assert "+25 % output throughput at a per-user throughput of at least 40.0 tok/s at c = 4" in e["lines"]


def test_no_frontier_row_where_the_variant_gave_the_interactivity_up():
    # every variant point is slower per user (30 tok/s) than both baseline frontier points (50, 40): nothing to compare
    ss = [_s("default", 1, [49, 50, 51], user=50.0), _s("default", 4, [158, 160, 162], user=40.0),
          _s("v", 4, [298, 300, 302], user=30.0)]
    assert _entry(variant_diff(ss, ["default", "v"]), "v")["frontier_moved"] == []


def test_a_variant_diff_names_each_side_by_its_variant():
    """`batchmark diff RUN --variants A B` printed "A = t1 …, B = t1 …": the run's id for both sides, so the header
    did not say which side was which variant (fault kind: a report header naming the container, not the thing
    compared).  Each side is now ``RUN/variant``, in the text, the Markdown and the JSON."""
    from pathlib import Path

    from pipeline.analysis.stages import RunResults
    from pipeline.diff.match import variant_sides
    from pipeline.diff.report import format_markdown, format_text
    from pipeline.diff.rundiff import diff_runs

    ss = [_s("variant-a", 1, [50, 51, 49]), _s("variant-b", 1, [60, 61, 59])]
    res = RunResults(Path("t1"), {"run_id": "t1", "source": "simulated", "hardware": {"name": "dgx-spark"}}, ss,
                     {"points": [], "models": []})
    d = diff_runs(*variant_sides(res, "variant-a", "variant-b"))
    assert (d.run_a["run_id"], d.run_b["run_id"]) == ("t1/variant-a", "t1/variant-b")
    text = format_text(d)
    assert "A = t1/variant-a (simulated, dgx-spark)\nB = t1/variant-b (simulated, dgx-spark)" in text
    assert "A = t1/variant-a (simulated, dgx-spark), B = t1/variant-b" in format_markdown(d)
    assert len(d.changes) and res.run_id == "t1"  # the points were paired, and the run itself is left as it was


def test_a_line_that_pairs_two_concurrencies_says_each_sides():
    """The peak, SLO-best and frontier lines compare each setting's own best, which may sit at different
    concurrencies (pipeline/diff/variants.py says why that is the honest comparison); a line that did so said one
    concurrency in front and the baseline's aside or not at all (fault kind: a comparison that does not say what it
    paired).  Baseline: c = 4 at 100 (repeats 100, 102, 98), c = 8 at 90; the variant: c = 4 at 95, c = 8 at 122
    (122, 124, 120): peaks c = 8 vs c = 4, +22 %, p = 0.00018 (module docstring).  Frontier: the baseline's frontier
    is its c = 4 (per-user 40; its c = 8 at 30 per user and 90 output is beaten), the variant's best at >= 40 tok/s
    per user is its c = 8 (per-user 41): 122 against 100, +22 %, at c = 8 vs the baseline's frontier point c = 4."""
    ss = [_s("default", 4, [100, 102, 98], user=40.0), _s("default", 8, [90, 92, 88], user=30.0),
          _s("v", 4, [95, 97, 93], user=45.0), _s("v", 8, [122, 124, 120], user=41.0)]
    e = _entry(variant_diff(ss, ["default", "v"]), "v")
    assert e["lines"][0] == "+22 % peak output throughput (c = 8 vs the baseline's c = 4)"
    assert ("+22 % output throughput at a per-user throughput of at least 40.0 tok/s (c = 8 vs the baseline's "
            "frontier point c = 4)") in e["lines"]
