"""The knee with its uncertainty from the repeats (the knee of one config flipped between
two clean runs, c = 32 "plateau" in one and "not reached" in the other, because one doubling sits
near the 15 % threshold).  Values worked by hand below."""

from __future__ import annotations

from pipeline.analysis.analyze import analyze
from pipeline.analysis.knee import knee_per_repeat, knee_uncertainty
from pipeline.core.words import knee_words
from pipeline.core.pointsummary import PointSummary
from pipeline.views.show import show_run

# c = 1, 2, 4 with three repeats.  Repeat 0: 10, 20, 22 -> gains +100 %, +10 % -> knee 2.
# Repeat 1: 10, 20, 30 -> +100 %, +50 % -> not reached.  Repeat 2: 10, 20, 22 -> knee 2.
# Medians: 10, 20, 22 -> knee 2.  So per repeat [2, None, 2], not settled.
SAMPLES = [(1, [10.0, 10.0, 10.0]), (2, [20.0, 20.0, 20.0]), (4, [22.0, 30.0, 22.0])]


def _summary(c: int, thr: list[float]) -> PointSummary:
    return PointSummary(model="m", engine="transformers", input_len=8, output_len=8, concurrency=c, repeats=len(thr),
                        completed=c * len(thr), failed=0, output_throughput_tok_s=sorted(thr)[len(thr) // 2],
                        per_user_tok_s=None, ttft_s=None, ttft_with_queue_s=None, tpot_s=None, itl_s=None,
                        e2el_s=None, prefill_throughput_tok_s=None, step_time_s=None,
                        samples={"output_throughput_tok_s": thr})


def test_knee_of_each_repeat_worked_by_hand():
    assert knee_per_repeat(SAMPLES) == [2, None, 2]
    assert knee_uncertainty(SAMPLES, 2) == {"knee_per_repeat": [2, None, 2], "knee_settled": False}
    settled = [(1, [10.0, 10.0]), (2, [20.0, 20.0]), (4, [22.0, 21.0])]  # +10 %, +5 %: knee 2 in both
    assert knee_uncertainty(settled, 2) == {"knee_per_repeat": [2, 2], "knee_settled": True}


def test_one_repeat_has_nothing_to_compare():
    assert knee_uncertainty([(1, [10.0]), (2, [20.0])], None) == {"knee_per_repeat": [], "knee_settled": None}


def test_knee_words():
    assert knee_words(16, [16, 32, 16], False) == "c = 16, not settled: repeats give 16, 32, 16"
    assert knee_words(2, [2, None, 2], False) == "c = 2, not settled: repeats give 2, not reached, 2"
    assert knee_words(16, [16, 16, 16], True) == "c = 16, settled: all 3 repeats give 16"
    assert knee_words(None, [None, None], True) == "not reached, settled: reached in none of the 2 repeats"
    assert knee_words(16, [], None) == "c = 16"


def test_analysis_reports_knee_per_repeat_beside_the_knee():
    out = analyze([_summary(c, thr) for c, thr in SAMPLES], {}, {"name": "cpu"})
    (m,) = out["models"]
    assert m["knee_concurrency"] == 2
    assert m["knee_per_repeat"] == [2, None, 2]
    assert m["knee_settled"] is False


def test_show_json_carries_it_on_each_model_of_a_committed_run():
    # data/runs/20261129T161329Z-vm, dense-llama-190m: repeat 1 gains 17.8 % from c = 32 to 64
    # (292.6 -> 344.7), above the 15 % threshold; repeats 0 and 2 gain 6.1 % and 2.4 %: knee 32.
    doc = show_run("20261129T161329Z-vm")
    assert set(doc) == {"run_id", "source", "hardware", "points", "models"}
    dense = next(m for m in doc["models"] if m["model"] == "dense-llama-190m")
    assert dense["knee_concurrency"] == 32
    assert dense["knee_per_repeat"] == [32, None, 32]
    assert dense["knee_settled"] is False


def test_benchmarks_page_says_the_knee_is_not_settled(tmp_path):
    from pipeline.pages.render import render_site

    render_site(tmp_path, runs=["20261129T161329Z-vm"])
    text = (tmp_path / "models" / "dense-llama-190m.md").read_text()  # the model's own page
    assert "Knee: **c = 32**, not settled: repeats give 32, not reached, 32" in text
