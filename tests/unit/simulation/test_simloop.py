"""The simulated continuous-batching server against values worked by hand.

Token times are stored to the microsecond (as a measured stream's), so single times are compared
within 1e-6 s and rates within 1e-4.

The card below is made for hand arithmetic: 1e9 matmul params, 2e9 weight bytes read per step,
10 layers, 8 heads of 64; the machine reads 100 GB/s and computes 10 TFLOP/s; every step costs
1 ms more.  So (docs/definitions.md, roofline):

- decode step at B sequences of context n: bytes = 2e9 + B × kv_per_token × n, time = bytes / 1e11
  (memory bound while 2e9 × B FLOPs / 1e13 < 0.02 s, i.e. B < 100) + 0.001;
- prefill of c prompts of 100 tokens in one step: FLOPs = 2 × 100c × 1e9 + 4 × 8 × 64 × 100c ×
  (10 layers × 50 tokens attended on average) = 2.001024e11 × c, time = 0.02001024 × c + 0.001
  (compute bound: the weights alone take 0.02 s to read).
"""

from __future__ import annotations

import pytest

from pipeline.analysis.analyze import roofline_step_s
from pipeline.analysis.regime import point_regime
from pipeline.metrics.summarize import summarize_point
from pipeline.cards.registry import load_card
from pipeline.cards.modelcards import ModelCard
from pipeline.config.arrivals import Load
from pipeline.simulation.simloop import SimPlan, simulate_repeat
from pipeline.simulation.simserver import ServerModel, kv_blocks
from pipeline.core.records import PointKey, PointRecords, RepeatRecord

OVERHEAD = 0.001
PREFILL_PER_PROMPT = 0.02001024  # s per 100-token prompt, worked above


def card(kv_bytes_per_token: int = 0) -> ModelCard:
    return ModelCard(name="hand", kind="dense", total_params=10**9, active_params=10**9, embedding_params=0,
                     weight_bytes=2 * 10**9, dense_bytes=2 * 10**9, expert_bytes=0, num_layers=10,
                     num_attention_heads=8, num_kv_heads=8, head_dim=64, kv_bytes_per_token=kv_bytes_per_token)


def server(kv: int = 0, max_num_seqs: int = 64, num_blocks: int = 100_000, **kw) -> ServerModel:
    return ServerModel(card=card(kv), bandwidth_gb_s=100.0, peak_tflops=10.0, step_overhead_s=OVERHEAD,
                       max_num_seqs=max_num_seqs, max_num_batched_tokens=8192, max_model_len=4096,
                       num_blocks=num_blocks, **kw)


def point(srv: ServerModel, c: int, n_meas: int, input_len: int = 100, output_len: int = 11, repeats: int = 1):
    reps, t = [], 0.0
    for r in range(repeats):
        res = simulate_repeat(srv, SimPlan(input_len, output_len, c, n_meas, Load(concurrency=c), start_s=t,
                                           id_offset=r * (c + n_meas)))
        meas = [q for q in res.requests if not q.warmup]
        reps.append(RepeatRecord(repeat=r, batching="served", window_start_s=min(q.sent_s for q in meas),
                                 window_end_s=max(q.done_s for q in meas), requests=res.requests,
                                 server_metrics=res.server_metrics))
        t = res.end_s
    return summarize_point(PointRecords(PointKey("hand", "simulated", input_len, output_len, c), reps), None)


def test_c1_tpot_is_the_step_time_at_batch_one():
    # decode steps compute positions 100 … 109 with contexts 101 … 110: mean 105.5 tokens;
    # step = (2e9 + 1e4 × 105.5) / 1e11 + 0.001 = 0.02101055 s
    s = point(server(kv=10_000), 1, 8)
    assert s.tpot_s["p50"] == pytest.approx(0.02101055, abs=1e-6)
    # TTFT = the prefill step alone (nothing else runs): compute bound, 0.02001024 + 0.001
    assert s.ttft_s["p50"] == pytest.approx(PREFILL_PER_PROMPT + OVERHEAD, abs=1e-6)


def test_step_time_is_the_analysis_roofline_plus_overhead():
    qwen = load_card("Qwen3-32B")
    srv = ServerModel(card=qwen, bandwidth_gb_s=273.0, peak_tflops=125.0, step_overhead_s=0.004, max_num_seqs=256,
                      max_num_batched_tokens=8192, max_model_len=1344, num_blocks=10**6)
    for b in (1, 8, 64, 256):
        roof, _ = roofline_step_s(qwen, b, 1152.0, 273.0, 125.0)
        assert srv.decode_step_s(b, 1152.0) == pytest.approx(roof + 0.004, rel=1e-12)


@pytest.mark.parametrize("c", [1, 2, 4, 8])
def test_throughput_grows_with_c_as_the_step_time_says(c):
    # no KV bytes: every decode step is 0.021 s below the compute roof.  Closed loop with all c sent
    # together: waves of one prefill step (c prompts) + 10 decode steps, c × 11 tokens each; the
    # measured window holds whole waves, so throughput = 11c / (0.02001024 c + 0.001 + 10 × 0.021)
    s = point(server(), c, 4 * c if c >= 8 else 32)
    wave_s = PREFILL_PER_PROMPT * c + OVERHEAD + 10 * 0.021
    assert s.output_throughput_tok_s == pytest.approx(11 * c / wave_s, rel=1e-4)
    assert s.tpot_s["p50"] == pytest.approx(0.021, abs=1e-6)


def test_past_max_num_seqs_requests_wait_whole_service_times():
    # K = 2 slots, c = 4: two requests run while two wait; every measured request waits for the
    # pair ahead of it to be served whole: TTFT = W + P, W = P + 10 × 0.021 (one service), P the
    # prefill of two prompts; at c = 2 TTFT = P.
    p2 = PREFILL_PER_PROMPT * 2 + OVERHEAD
    w = p2 + 10 * 0.021
    at2 = point(server(max_num_seqs=2), 2, 32)
    at4 = point(server(max_num_seqs=2), 4, 32)
    assert at2.ttft_s["p50"] == pytest.approx(p2, abs=1e-6)
    assert at4.ttft_s["p50"] == pytest.approx(w + p2, abs=1e-6)
    assert at4.ttft_s["p99"] == pytest.approx(w + p2, abs=1e-6)
    # the same batch of K either way, but the window opens at the first measured send, one service
    # before the first measured request is served: 32 requests = 16 services in 17 W at c = 4, in 16 W at c = 2
    assert at4.output_throughput_tok_s == pytest.approx(at2.output_throughput_tok_s * 16 / 17, rel=1e-4)
    assert at4.server["requests_running_max"] == 2 and at4.server["requests_waiting_max"] == 2
    assert point_regime(4, at4.server, {"max_num_seqs": 2}, "simulated") == "queueing"


def test_kv_exhaustion_preempts_and_the_server_view_says_so():
    # 96-token prompts fill 6 blocks of 16; 3 requests take 18 of 20 blocks.  Decoding token 97 needs
    # a 7th block each: 3 needed, 2 free, so the request admitted last is preempted (recompute) and
    # comes back when blocks are free.  Every request still ends with its 40 tokens.
    srv = server(max_num_seqs=8, num_blocks=20)
    s = point(srv, 3, 32, input_len=96, output_len=40)
    assert s.server["preemptions"] >= 1
    assert s.server["kv_cache_usage_max"] >= 0.95
    assert s.failed == 0 and s.completed == 32
    assert point_regime(3, s.server, {"max_num_seqs": 8}, "simulated") == "kv_cache_full"
    # without the shortage nothing is preempted
    roomy = point(server(max_num_seqs=8, num_blocks=1000), 3, 32, input_len=96, output_len=40)
    assert roomy.server["preemptions"] == 0


def test_preempted_request_keeps_its_tokens_and_recomputes():
    """A preemption must happen here, or the test checks nothing (a KV cache large enough that nothing is preempted
    passed the earlier form of this test: the fault kind of a test that cannot fail on what its name claims).

    Worked by hand (the card above: KV bytes 0, so a decode step is 2e9 / 1e11 + 0.001 = 0.021 s at any B < 100):
    the three 96-token prompts are prefilled in one step, 2 × 288 × 1e9 FLOPs + attention 4 × 8 × 64 × 288 × 10
    layers × 48 tokens on average = 5.7628e11 FLOPs at 1e13 FLOP/s, + 0.001 s = 0.058628 s, the first token of each.
    With 20 blocks of 16 tokens, 6 each are used (18) and the 97th token needs a 7th block each: 3 asked, 2 free, so
    the request admitted last (id 2) is preempted (vLLM's recompute) and the other two decode their 39 further
    tokens undisturbed: done at 0.058628 + 39 × 0.021 = 0.877628 s.  The preempted one ends later, with every
    token it had streamed kept (40 tokens, times in order).  With 1000 blocks nothing is preempted and all three
    end at 0.877628 s."""
    srv = server(max_num_seqs=8, num_blocks=20)
    res = simulate_repeat(srv, SimPlan(96, 40, 0, 3, Load(concurrency=3)))
    counter = "vllm:num_preemptions_total"
    assert srv.preemptions_total >= 1
    assert res.server_metrics["after"][counter] - res.server_metrics["before"][counter] == srv.preemptions_total
    done = {r.request_id: r.done_s for r in res.requests}
    assert all(r.first_token_s == pytest.approx(0.058628, abs=1e-6) for r in res.requests)
    assert done[0] == pytest.approx(0.877628, abs=1e-6) and done[1] == pytest.approx(0.877628, abs=1e-6)
    assert done[2] > done[0] + 0.021  # the preempted request waited and recomputed
    for r in res.requests:
        assert r.ok and r.output_tokens == 40 and len(r.chunks) == 40
        times = [t for t, _ in r.chunks]
        assert times == sorted(times)
    roomy_srv = server(max_num_seqs=8, num_blocks=1000)
    roomy = simulate_repeat(roomy_srv, SimPlan(96, 40, 0, 3, Load(concurrency=3)))
    assert roomy_srv.preemptions_total == 0
    assert all(r.done_s == pytest.approx(0.877628, abs=1e-6) for r in roomy.requests)


def test_kv_blocks_from_memory_left_after_weights():
    # 128 GB x 0.85 = 108.8 GB; 2 GB of weights; 1e4 bytes a token x 16 = 1.6e5 a block:
    # (108.8e9 - 2e9) / 1.6e5 = 667 500 blocks
    assert kv_blocks(card(10_000), 128, 0.85, 16) == 667_500


def test_seeded_noise_repeats_differ_and_reproduce():
    import numpy as np

    srv = server(step_time_cv=0.05, repeat_time_cv=0.05)
    a = simulate_repeat(srv, SimPlan(100, 11, 1, 8, Load(concurrency=1)), np.random.default_rng(1))
    b = simulate_repeat(srv, SimPlan(100, 11, 1, 8, Load(concurrency=1)), np.random.default_rng(1))
    c = simulate_repeat(srv, SimPlan(100, 11, 1, 8, Load(concurrency=1)), np.random.default_rng(2))
    assert [r.chunks for r in a.requests] == [r.chunks for r in b.requests]
    assert [r.chunks for r in a.requests] != [r.chunks for r in c.requests]


def test_open_loop_below_capacity_follows_the_rate():
    # one request every 10 s (constant), each served in well under a second: no queue, TTFT = one prefill step
    srv = server()
    res = simulate_repeat(srv, SimPlan(100, 11, 1, 10, Load("constant", rate_rps=0.1)))
    meas = [r for r in res.requests if not r.warmup]
    assert [round(r.sent_s, 6) for r in meas] == [round(10.0 * i, 6) for i in range(1, 11)]
    assert all(r.first_token_s - r.sent_s == pytest.approx(PREFILL_PER_PROMPT + OVERHEAD, abs=1e-6) for r in meas)
    assert all(r.lag_s == 0.0 and r.scheduled_s == r.sent_s for r in meas)
    assert res.server_metrics["max_during"]["vllm:num_requests_running"] == 1


def test_prefix_caching_skips_the_cached_blocks_of_the_prefill():
    """Fault kind: prefix caching on a shared-prefix workload simulated as if off (the variant said to change
    nothing), or the whole prefix reused where vLLM reuses full blocks only, or reused before any request computed it.

    By hand (the module's card, compute bound in prefill): a prompt of a 1000-token prefix + 8 of its own, 16-token
    blocks: ⌊1000 / 16⌋ × 16 = 992 tokens cached.  The first request computes all 1008 tokens from 0 in one step:
    FLOPs = 2e9 × 1008 + 4 × 8 × 64 × 10 layers × 1008 × 504 (mean context) = 2.02640449536e12, time 0.202640449536 +
    0.001 s = its TTFT.  Each next one (c = 1: sent when the one before finished) computes 16 tokens from 992: FLOPs
    3.23e10 → 0.0032 s, below the weights' 0.02 s read: TTFT 0.02 + 0.001 = 0.021 s.  With caching off every TTFT
    is the first's."""
    from pipeline.simulation.simserver import cached_prefix

    assert (cached_prefix(1000, 16, True), cached_prefix(1000, 16, False), cached_prefix(15, 16, True)) == (992, 0, 0)
    first = 0.202640449536 + OVERHEAD
    for cached, later in ((992, 0.021), (0, first)):
        res = simulate_repeat(server(cached_prefix_tokens=cached), SimPlan(1008, 2, 0, 3, Load(concurrency=1)))
        ttft = [q.first_token_s - q.sent_s for q in res.requests[:3]]
        assert ttft == pytest.approx([first, later, later], abs=1e-6), cached
