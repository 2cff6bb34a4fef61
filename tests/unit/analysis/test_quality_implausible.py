"""Numbers that cannot be right are flagged, never shown as plain results.

Regression (fault kind: impossible figure shown as a result): a llama-batched-bench import of a q4_0 model took
bf16 weights for it and reported MBU 1.53 (single stream 27.6 tok/s against a ceiling of 18.0) without a word.
Hand-made case: a dense card of 1 GB read per step, hardware spec 100 GB/s, no probe, so the ceiling is
100e9 / 1e9 = 100 tok/s; a single stream of 150 tok/s (step 1/150 s) reads 1 GB / (1/150 s) = 150 GB/s,
MBU = 150 / 100 = 1.50.  At c = 2 the step is 1/100 s: 100 GB/s, MBU exactly 1.00 (possible, not flagged).
"""

from __future__ import annotations

import pytest

from pipeline.analysis.analyze import analyze
from pipeline.core.pointsummary import PointSummary
from pipeline.cards.modelcards import ModelCard
from pipeline.pages.render import RunView, WorkloadView, make_env
from pipeline.views.show import build_show, format_table

HW = {"name": "x", "bandwidth_gb_s_spec": 100, "peak_tflops_spec": 1000, "memory_gb": 16}
CARD = ModelCard(name="d", kind="dense", total_params=10**9, active_params=10**9, embedding_params=0,
                 weight_bytes=1e9, dense_bytes=1e9, expert_bytes=0, num_layers=1, num_attention_heads=1,
                 num_kv_heads=1, head_dim=1, kv_bytes_per_token=0)


def _summary(c, thr, step):
    return PointSummary(model="d", engine="llama-batched-bench", input_len=0, output_len=0, concurrency=c, repeats=1,
                        completed=c, failed=0, output_throughput_tok_s=thr, per_user_tok_s=1 / step, ttft_s=None,
                        ttft_with_queue_s=None, tpot_s=None, itl_s=None, e2el_s=None, prefill_throughput_tok_s=None,
                        step_time_s=step)


@pytest.fixture
def analysed():
    summaries = [_summary(1, 150.0, 1 / 150), _summary(2, 200.0, 1 / 100)]
    return summaries, analyze(summaries, {"d": CARD}, HW)


def test_analysis_flags_mbu_above_one(analysed):
    _, res = analysed
    p1, p2 = res["points"]
    assert p1["mbu"] == pytest.approx(1.5) and p2["mbu"] == pytest.approx(1.0)
    assert p1["implausible"].startswith("MBU 1.50 at c = 1 is above 1: the model card or its weight format")
    assert p2["implausible"] is None
    m = res["models"][0]
    assert m["ceiling_tok_s"] == pytest.approx(100.0)
    assert m["implausible"] == ("single stream 150.0 tok/s is above its bandwidth ceiling 100.0 tok/s; "
                                "MBU above 1 at c = 1 (up to 1.50): the model card or its weight format "
                                "(quantisation) does not match what was served")


def test_show_says_implausible(analysed):
    summaries, res = analysed
    doc = build_show({"run_id": "r", "source": "imported:llama-batched-bench"}, [s.as_dict() for s in summaries], res)
    assert doc["points"][0]["implausible"] and doc["points"][1]["implausible"] is None
    assert doc["models"][0]["implausible"].startswith("single stream 150.0 tok/s is above")
    text = format_table(doc)
    assert "1.50!" in text and "IMPLAUSIBLE, not a result: single stream 150.0 tok/s" in text
    assert "MBU marked ! is above 1" in text


def test_show_flags_an_older_analysis_without_the_field(analysed):
    """An analysis.json written before the flag existed is flagged from its figures."""
    summaries, res = analysed
    for row in res["points"] + res["models"]:
        row.pop("implausible")
    doc = build_show({"run_id": "r"}, [s.as_dict() for s in summaries], res)
    assert doc["points"][0]["implausible"] and doc["models"][0]["implausible"]


def test_pages_mark_implausible_numbers(analysed, scratch_root):
    summaries, res = analysed
    view = RunView(run_id="20261101T000000Z-x", meta={"source": "imported:llama-batched-bench"}, analysis=res)
    view.workloads.append(WorkloadView(model=res["models"][0], points=[s.as_dict() for s in summaries],
                                   analysis_points=res["points"], run_meta=view.meta))
    env = make_env()
    home = env.get_template("index.md.j2").render(runs=[view], chart=lambda spec: "", page="index.md")
    row = next(line for line in home.splitlines() if line.startswith("| [d]"))
    # neither the ceiling nor the MBU stands as a plain number
    # an imported run with no word against its probe: the card first, and `--quant` (an import's option) advised
    assert "| ⚠ 100.0: exceeded, wrong card or format? | ⚠ 1.50: above 1, impossible |" in row
    assert "| 1.50 |" not in row and "⚠ implausible: wrong model card or weight format?" in row
    assert '!!! danger "Implausible numbers: d in run 20261101T000000Z-x (wrong model card or weight format?)"' in home
    assert "--quant&#96; on import" in home  # the advice, its backticks escaped for the page
    from pipeline.pages.indexviews import model_pages

    bench = env.get_template("each/model.md.j2").render(runs=[view], chart=lambda spec: "", page="models/d.md",
                                                         mp=model_pages([view])[0])
    assert '!!! danger "Implausible numbers: wrong model card or weight format?"' in bench
    assert "| ⚠ 1.50: above 1, impossible |" in bench and "| 1.00 |" in bench
