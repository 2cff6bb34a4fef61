"""Served-run predictions through the simulated server driven by the calibrated terms (pipeline/predict/servedsim.py).

The hand-worked values follow the simulated server's rules (pipeline/simulation/simserver.py docstring) with the
calibrated step formula (pipeline/cards/stepcost.py ``calibrated_step_s``).  A dense card without a compute roof
(``peak_tflops`` None) keeps the arithmetic to bytes: a step reads the weights once (a dense model's ``dense_bytes``,
the weights less the embedding table, which is looked up, not read; they do not depend on the token count) and the
KV of every scheduled sequence at its context.
"""

import pytest

from pipeline.predict.calibrate import Roofs, StepTerms, step_time_s
from pipeline.cards.registry import load_card
from pipeline.simulation.simserver import ServerModel
from pipeline.core.pointsummary import PointSummary
from pipeline.views.predict import predict_workload
from pipeline.predict.servedsim import ServedLimits, ServedSetup, calibrated_server, predict_served

BW = 273.0  # GB/s, data/hardware/dgx-spark.yaml
IN, OUT = 100, 11
TERMS = StepTerms(overhead_s=0.002, bandwidth_fraction=0.8, compute_fraction=1.0, prefill_tok_s=10_000.0,
                  prefill_overhead_s=0.05)


def _hand(card):
    """P2: the prefill step of two prompts; T2: a decode step of two sequences at the mean decode context; W: a wave.

    P2 = 2 ms + (dense bytes + 2 × 100 tokens of KV) / (0.8 × 273 GB/s) + 200 prompt tokens / 10,000 tokens/s.
    T2: the decode steps of a request read KV at contexts 101 … 110 (its prompt and the tokens generated before),
    linear in the context, so their mean is the step at 105.5 = input + output / 2 (analysis.mean_decode_context):
    T2 = 2 ms + (dense bytes + 2 × 105.5 × KV bytes per token) / (0.8 × 273 GB/s).
    W = P2 + 10 × T2: the first token comes with the prefill step, the other 10 with one decode step each.
    """
    kv = card.kv_bytes_per_token
    p2 = 0.002 + (card.dense_bytes + 2 * 100 * kv) / (0.8 * BW * 1e9) + 200 / 10_000
    t2 = 0.002 + (card.dense_bytes + 2 * 105.5 * kv) / (0.8 * BW * 1e9)
    return p2, t2, p2 + 10 * t2


def test_one_step_formula_for_the_fit_and_the_server():
    # calibrated, the server's decode step is calibrate.step_time_s at the same batch and context (one formula)
    card = load_card("qwen3-30b-a3b")
    terms = StepTerms(0.004, 0.7, 0.3)
    server = calibrated_server(Roofs(card, 600.0, BW, 125.0), terms, ServedLimits(), 512, 176, 64)
    for b in (1, 2, 64):
        assert server.decode_step_s(b, 600.0) == pytest.approx(step_time_s(Roofs(card, 600.0, BW, 125.0), terms, [b])[0])
    # the roofline server (calibrated=False) keeps max(memory, compute) + overhead
    roof = ServerModel(card=card, bandwidth_gb_s=BW, peak_tflops=125.0, step_overhead_s=0.004, max_num_seqs=8,
                       max_num_batched_tokens=8192, max_model_len=2048, num_blocks=1000)
    assert roof.decode_step_s(1, 600.0) < server.decode_step_s(1, 600.0)


def test_past_max_num_seqs_throughput_plateaus_and_ttft_grows_by_waves():
    card = load_card("llama-3.1-8b")
    roofs = Roofs(card, IN + OUT / 2, BW, None)
    p2, t2, w = _hand(card)
    limits = ServedLimits(max_num_seqs=2)
    c2, c4, c8 = predict_served(roofs, TERMS, [2, 4, 8],
                                ServedSetup(IN, OUT, limits, requests={2: 8, 4: 8, 8: 16}, warmup=False))
    # every request decodes in a batch of two: TPOT = T2 at every c
    for p in (c2, c4, c8):
        assert p["tpot_s"] == pytest.approx(t2, rel=1e-5)
        assert p["step_time_s"] == pytest.approx(t2, rel=1e-9)
    # c = 2 (= max_num_seqs): lock step.  Each wave is sent when the last finished, reaches the scheduler 50 ms
    # later, prefills (P2) and decodes (10 T2): 8 requests = 4 waves of 0.05 + W; TTFT = 0.05 + P2
    assert c2["ttft_s"] == pytest.approx(0.05 + p2, rel=1e-5)
    assert c2["output_throughput_tok_s"] == pytest.approx(8 * OUT / (4 * (0.05 + w)), rel=1e-5)
    # c = 4: two run, two queue.  The queued pair starts the moment a wave ends, so after the first arrival (0.05 s)
    # the server is never idle: 8 requests = 4 waves back to back, throughput 88 / (0.05 + 4 W).  TTFTs: 2 × (0.05
    # + P2) (wave 1), 2 × (0.05 + W + P2) (queued behind it from t = 0), 4 × (W + P2) (sent when a wave ended, started
    # when the next one ended): the median of the 8 is W + P2, a whole wave of queueing more than c = 2's
    assert c4["output_throughput_tok_s"] == pytest.approx(8 * OUT / (0.05 + 4 * w), rel=1e-5)
    assert c4["ttft_s"] == pytest.approx(w + p2, rel=1e-5)
    # c = 8: three pairs queue.  16 requests = 8 waves back to back: 176 / (0.05 + 8 W), the rate of the
    # max_num_seqs batch (22 tokens per W) but for the first arrival's 50 ms: the plateau.  TTFTs: 0.05 + k W + P2
    # for k = 0 … 3 (2 each, sent at t = 0), then 8 × (3 W + P2) (each pair sent at a wave's end waits for the
    # three pairs ahead of it): median 3 W + P2
    assert c8["output_throughput_tok_s"] == pytest.approx(16 * OUT / (0.05 + 8 * w), rel=1e-5)
    assert c8["ttft_s"] == pytest.approx(3 * w + p2, rel=1e-5)
    plateau = 2 * OUT / w
    assert c8["output_throughput_tok_s"] == pytest.approx(plateau, rel=0.01)
    assert c4["output_throughput_tok_s"] < c8["output_throughput_tok_s"] < plateau


def test_prompts_over_the_token_budget_are_prefilled_in_chunks():
    # max_num_batched_tokens 150 < 2 × 100 prompt tokens: the first step prefills 150 (all of one prompt, half of
    # the other), the second the last 50 tokens beside the first sequence's decode token.  The second prompt's first
    # token comes after two steps: TTFT p50 (mean of the two) = 0.05 + (S1 + S2 / 2)... worked per request:
    card = load_card("llama-3.1-8b")
    roofs = Roofs(card, IN + OUT / 2, BW, None)
    kv, wb = card.kv_bytes_per_token, card.dense_bytes
    bw = 0.8 * BW * 1e9
    s1 = 0.002 + (wb + (100 + 50) * kv) / bw + 150 / 10_000  # KV: sequence 1 at 100 tokens, sequence 2 at 50
    s2 = 0.002 + (wb + (101 + 100) * kv) / bw + 50 / 10_000  # sequence 1 decodes at 101, sequence 2 completes at 100
    limits = ServedLimits(max_num_seqs=2, max_num_batched_tokens=150)
    (p,) = predict_served(roofs, TERMS, [2], ServedSetup(IN, OUT, limits, requests={2: 2}, warmup=False))
    # TTFT: 0.05 + s1 (the first), 0.05 + s1 + s2 (the second); numpy's median of two is their mean
    assert p["ttft_s"] == pytest.approx(0.05 + s1 + s2 / 2, rel=1e-5)


def _summary(c, pred, repeats=1, requests=None):
    lat = lambda v: {"p50": v, "p90": v, "p99": v, "mean": v}  # noqa: E731
    n = requests or max(4 * c, 32)
    return PointSummary(model="m", engine="vllm", input_len=IN, output_len=OUT, concurrency=c, repeats=repeats,
                        completed=n * repeats, failed=0, output_throughput_tok_s=pred["output_throughput_tok_s"],
                        per_user_tok_s=None, ttft_s=lat(pred["ttft_s"]), ttft_with_queue_s=None,
                        tpot_s=lat(pred["tpot_s"]), itl_s=None, e2el_s=None, prefill_throughput_tok_s=None,
                        step_time_s=pred["tpot_s"], output_throughput_window="send_to_completion")


def test_a_served_curve_made_by_the_server_is_predicted_back_from_three_points():
    # "Measurements" made by the simulated server from known terms (max_num_seqs 16 of a grid to 64, prompts of 8
    # requests per step): the fit on c = 1, 8, 64, corrected by the same server (servedsim.fit_served), predicts
    # the other points' throughput within 3 % and TTFT within 15 %, queueing past 16 included
    card = load_card("llama-3.1-8b")
    roofs = Roofs(card, IN + OUT / 2, BW, 125.0)
    truth = StepTerms(0.003, 0.8, 0.4, prefill_tok_s=8000.0, prefill_overhead_s=0.02)
    grid = [1, 2, 4, 8, 16, 32, 64]
    raw = {"max_num_seqs": 16, "max_num_batched_tokens": 800}
    made = predict_served(roofs, truth, grid, ServedSetup(IN, OUT, ServedLimits.of(raw)))
    pts = [_summary(c, p) for c, p in zip(grid, made)]
    entry = predict_workload(pts, {}, card, {"bandwidth_gb_s": BW, "peak_tflops": 125.0}, None, raw)
    assert entry["error"] is None and entry["calibrated_on"] == [1, 8, 64]
    others = [p for p in entry["points"] if p["measured"] and not p["calibration"]]
    assert len(others) == 4
    for p in others:
        assert abs(p["error"]["output_throughput_tok_s"]) < 0.03, p
        assert abs(p["error"]["ttft_s"]) < 0.15, p
    # past max_num_seqs the throughput stays at the 16-sequence batch's (the plateau), and the prediction says so
    by_c = {p["concurrency"]: p["predicted"]["output_throughput_tok_s"] for p in entry["points"]}
    assert by_c[128] == pytest.approx(by_c[64], rel=0.05)


def test_limits_from_run_json():
    # vLLM's own figures (the committed vLLM CPU run's run.json): KV 81,920 tokens in blocks of 128
    got = ServedLimits.of({"max_num_seqs": 64, "max_model_len": 160, "max_num_batched_tokens": None,
                           "kv_cache_size_tokens": 81920.0, "num_gpu_blocks": 1024.0, "block_size": 128.0})
    assert got == ServedLimits(64, None, 160, 81920, 128)
    assert ServedLimits.of({"num_gpu_blocks": 10, "block_size": 16}).kv_cache_tokens == 160
    assert ServedLimits.of(None) == ServedLimits()


def test_limits_from_outside_that_no_server_has_are_not_stated():
    """run.json's limits come from a server's /metrics and command line (untrusted): a non-finite, negative or
    beyond-32-bit figure is read as "not stated" (as a missing one), never an OverflowError or a 10^300-sequence
    simulation."""
    limits = ServedLimits.of({"max_num_seqs": float("inf"), "max_num_batched_tokens": -5, "max_model_len": 1e300,
                              "kv_cache_size_tokens": float("nan"), "num_gpu_blocks": 100, "block_size": 16})
    assert limits == ServedLimits(None, None, None, 1600, 16)  # the KV cache from blocks × block size: 100 × 16


def test_a_drawn_workload_is_predicted_with_the_requests_the_sweep_draws():
    """Fault kind: ``predict`` (and an adaptive sweep's predictions) of a drawn workload made at the nominal lengths.

    Outputs of 11 at range ratio 0.5 draw in [floor(5.5), ceil(16.5)] = [5, 17]: the calibrated server is sized for
    100 + 17 tokens, and the predicted E2EL moves off the fixed one's; a one-repeat sweep of the config draws the
    same requests the prediction sends."""
    from types import SimpleNamespace

    from pipeline.config.workload import LengthDist, Lengths

    card = load_card("Llama-3.1-8B")
    roofs = Roofs(card, IN + OUT / 2, BW, None)
    drawn = SimpleNamespace(lengths=Lengths(output=LengthDist(distribution="uniform", range_ratio=0.5)), seed=0)
    assert calibrated_server(roofs, TERMS, ServedLimits(), IN, OUT, 2, drawn.lengths).max_model_len == 117
    fixed = predict_served(roofs, TERMS, [1, 2], ServedSetup(IN, OUT, requests={1: 32, 2: 32}))
    got = predict_served(roofs, TERMS, [1, 2], ServedSetup(IN, OUT, requests={1: 32, 2: 32}, workload=drawn))
    assert [p["e2el_s"] for p in got] != [p["e2el_s"] for p in fixed]
    again = predict_served(roofs, TERMS, [1, 2], ServedSetup(IN, OUT, requests={1: 32, 2: 32}, workload=drawn))
    assert got == again  # seeded
