"""Analysis formulas (ceiling, roofline, MBU, knee, post-knee, efficiency) against hand-computed values."""

import pytest

from pipeline.analysis.analyze import analyze, ceiling_tok_s, roofline_step_s
from pipeline.analysis.knee import find_knee, post_knee, scaling_efficiency
from pipeline.core.pointsummary import PointSummary
from pipeline.cards.modelcards import ModelCard


def _dense(bytes_):
    return ModelCard(name="d", kind="dense", total_params=10**9, active_params=10**9, embedding_params=0,
                     weight_bytes=bytes_, dense_bytes=bytes_, expert_bytes=0, num_layers=1, num_attention_heads=1,
                     num_kv_heads=1, head_dim=1, kv_bytes_per_token=0)


def test_ceiling_qwen_7b_q8_on_spark():
    # 7.54 GiB read per token at 273 GB/s: 273e9 / (7.54 * 2**30) = 33.72 tok/s
    card = _dense(7.54 * 2**30)
    assert ceiling_tok_s(card, 0, 273) == pytest.approx(273e9 / (7.54 * 2**30))
    assert ceiling_tok_s(card, 0, 273) == pytest.approx(33.72, abs=0.01)


def test_roofline_memory_then_compute_bound():
    # 1 GB weights, 1e9 params: at 100 GB/s memory time 10 ms; compute 2*B*1e9 FLOP at 10 TFLOP/s = 0.2 ms * B
    card = _dense(1e9)
    assert roofline_step_s(card, 1, 0, 100, 10) == (pytest.approx(0.01), "memory")
    # B=100: compute 2*100*1e9/1e13 = 0.02 s > 0.01 s memory
    assert roofline_step_s(card, 100, 0, 100, 10) == (pytest.approx(0.02), "compute")


def test_knee_reference_dense_not_reached():
    # Qwen2.5-Coder-7B Q8_0, PP 512, DGX Spark (llama.cpp benches/dgx-spark.md): last doubling +77 %
    curve = [(1, 29.24), (2, 54.46), (4, 104.33), (8, 195.67), (16, 335.01), (32, 593.27)]
    assert find_knee(curve) is None
    assert post_knee(curve, None) == "not_reached"
    # efficiency at 32: 593.27 / (32 * 29.24) = 0.634
    assert scaling_efficiency(curve)[32] == pytest.approx(593.27 / (32 * 29.24))


def test_knee_found_and_plateau():
    # gains: 1->2 0.9, 2->4 0.895, 4->8 0.111, 8->16 0.025, 16->32 0.012: weak from c=4 on
    curve = [(1, 100), (2, 190), (4, 360), (8, 400), (16, 410), (32, 415)]
    assert find_knee(curve, 0.15) == 4
    assert post_knee(curve, 4) == "plateau"


def test_lone_weak_step_is_not_a_knee():
    # MoE-like: 1->2 gains 5 % then strong doublings: not a knee
    curve = [(1, 100), (2, 105), (4, 200), (8, 400), (16, 800)]
    assert find_knee(curve, 0.15) is None


def test_decline_after_knee():
    # peak 300 at c=4; last 250 < 0.9 * 300 = 270 -> decline; gains after c=4 negative -> knee 4
    curve = [(1, 100), (2, 200), (4, 300), (8, 280), (16, 250)]
    assert find_knee(curve) == 4
    assert post_knee(curve, 4) == "decline"


def _summary(c, thr, step):
    return PointSummary(model="d", engine="transformers", input_len=0, output_len=0, concurrency=c, repeats=3,
                        completed=3 * c, failed=0, output_throughput_tok_s=thr, per_user_tok_s=None, ttft_s=None,
                        ttft_with_queue_s=None, tpot_s=None, itl_s=None, e2el_s=None, prefill_throughput_tok_s=None,
                        step_time_s=step)


def test_analyze_mbu_against_spec_and_probe():
    # 1 GB per step in 20 ms = 50 GB/s achieved; vs probe 80 GB/s = 0.625 (the figure the ceiling uses too),
    # vs spec 100 GB/s = 0.5
    card = _dense(1e9)
    hw = {"name": "x", "bandwidth_gb_s_spec": 100, "peak_tflops_spec": 10, "memory_gb": 16}
    res = analyze([_summary(1, 50, 0.02), _summary(2, 95, 0.021)], {"d": card}, hw, {"bandwidth_gb_s": 80, "peak_tflops": 5})
    p1 = res["points"][0]
    assert p1["mbu"] == pytest.approx(0.625)
    assert p1["mbu_probed"] == pytest.approx(0.625)
    assert p1["mbu_spec"] == pytest.approx(0.5)
    # MFU: 2e9 FLOP / 0.02 s = 0.1 TFLOP/s against the probed 5 TFLOP/s = 0.02
    assert p1["mfu"] == pytest.approx(0.02)
    # single stream / ceiling = MBU at c = 1: 50 / 80 = 0.625 (one bandwidth for both)
    assert res["models"][0]["single_stream_tok_s"] / res["models"][0]["ceiling_tok_s"] == pytest.approx(p1["mbu"])
    m = res["models"][0]
    assert m["ceiling_tok_s"] == pytest.approx(80.0)  # probed 80 GB/s / 1 GB
    assert m["ceiling_tok_s_spec"] == pytest.approx(100.0)
    assert m["scaling_efficiency"]["2"] == pytest.approx(95 / 100)


def test_kneedle_second_opinion_by_hand():
    from pipeline.analysis.knee import kneedle

    # Kneedle (Satopaa et al. 2011) on x = log2 c normalised to [0, 1] = 0, .2, .4, .6, .8, 1 and
    # y = (T - 100) / 315 = 0, .286, .825, .952, .984, 1: y - x = 0, .086, .425, .352, .184, 0 -> max at c = 4
    assert kneedle([(1, 100), (2, 190), (4, 360), (8, 400), (16, 410), (32, 415)]) == 4
    # a knee at an end point of the grid is no knee
    assert kneedle([(1, 10), (2, 20), (4, 40), (8, 80)]) is None


def test_kneedle_of_a_flat_curve_is_none_without_a_warning():
    """A curve whose throughput is the same at every c (a server that serialises requests) has no knee, and Kneedle's
    normalisation (y − min) / (max − min) is 0 / 0 there: numpy printed a RuntimeWarning into ``analyze`` (breaker
    trial, 2026-12-01)."""
    import warnings

    from pipeline.analysis.knee import kneedle
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kneedle([(1, 88.9), (2, 88.9), (4, 88.9), (8, 88.9)]) is None
