"""The client's own figures of a served point: requests in flight, lag, CPU, the client-bound check, reads, CI.

Every expected value is worked by hand in its test's docstring; nothing here times anything (timing
comparisons are benchmarks/loadgen_overhead.py's).
"""

from __future__ import annotations

import pytest

from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord
from pipeline.loadgen.clientmeter import time_weighted_mean
from pipeline.loadgen.scheduler import delivered_tokens
from pipeline.metrics import definitions as d
from pipeline.metrics.clientside import CLIENT_CPU_LIMIT, CLIENT_LAG_LIMIT_S, client_bound_reason, client_figures
from pipeline.metrics.summarize import summarize_point


def test_time_weighted_in_flight_worked_by_hand():
    """Sends at 0 and 1 s, ends at 2 and 4 s, window [1, 3]: 2 in flight from 1 to 2, 1 from 2 to 3 → (2·1 + 1·1) / 2
    = 1.5.  Over [0, 4]: 1·1 + 2·1 + 1·2 = 5 → 5 / 4 = 1.25.  Events given out of order are sorted first."""
    ev = [(2.0, -1), (0.0, 1), (4.0, -1), (1.0, 1)]
    assert time_weighted_mean(ev, 1.0, 3.0) == pytest.approx(1.5)
    assert time_weighted_mean(ev, 0.0, 4.0) == pytest.approx(1.25)
    assert time_weighted_mean(ev, 3.0, 3.0) is None
    assert time_weighted_mean([], 0.0, 1.0) == 0.0


def test_delivered_tokens_counts_every_stream_inside_the_window():
    """Chunks at 0.5 (3 tokens), 1.0 (2), 2.0 (4), 3.5 (1) and window [1, 3]: 2 + 4 = 6 (ends included)."""
    assert delivered_tokens([[0.5, 3], [1.0, 2], [2.0, 4], [3.5, 1]], 1.0, 3.0) == 6


def _req(chunks, rid=0, sent=0.0):
    toks = int(sum(k for _, k in chunks))
    return RequestRecord(request_id=rid, queued_s=sent, sent_s=sent, first_token_s=chunks[0][0], done_s=chunks[-1][0],
                         chunks=chunks, input_tokens=4, output_tokens=toks)


def test_itl_inside_one_read_is_never_zero():
    """The fault the issue's saturated client showed: three events in one read (all stamped 0.30 s) after a read at
    0.10 s.  Unjoined, ITL read 0.20 s, 0, 0 (two zeros); joined, the 0.20 s gap spans the read's 3 tokens:
    0.0667 s each, the sum (0.20 s = E2EL − TTFT) unchanged.  Chunk ITL (vLLM's): one gap, 0.20 s, never 0."""
    req = _req([[0.10, 1], [0.30, 1], [0.30, 1], [0.30, 1]])
    assert d.itl_values(req) == pytest.approx([0.2 / 3] * 3)
    assert sum(d.itl_values(req)) == pytest.approx(0.30 - 0.10)
    assert d.itl_chunk_values(req) == pytest.approx([0.2])
    assert d.unresolved_chunks(req) == (2, 4)


def test_time_to_second_token():
    """AIPerf's time to second token: second token − first.  First read 0.05 s (1 token), second 0.07 s → 0.02 s;
    a first read of 2 tokens carried the second token with the first: not timed, None (never 0)."""
    assert d.ttst_s(_req([[0.05, 1], [0.07, 1], [0.09, 1]])) == pytest.approx(0.02)
    assert d.ttst_s(_req([[0.05, 2], [0.07, 1]])) is None
    assert d.ttst_s(_req([[0.05, 1], [0.05, 1], [0.09, 1]])) is None  # the second token came in the first's read


def test_repeat_ci95_worked_by_hand():
    """[10, 12, 14]: mean 12, s = 2, t(0.975, 2) = 4.3027 (any t table) → half-width 4.3027 · 2 / √3 = 4.968."""
    low, high = d.repeat_ci95([10.0, 12.0, 14.0])
    assert low == pytest.approx(12 - 4.968, abs=1e-3) and high == pytest.approx(12 + 4.968, abs=1e-3)
    assert d.repeat_ci95([5.0]) is None


def test_client_bound_rule():
    """At or above 90 % CPU, or a ready read waiting 10 ms or more on average, the client was the limit; below both
    it was not."""
    assert client_bound_reason(0.5, 0.001) is None
    assert client_bound_reason(None, None) is None
    assert "client-bound" in client_bound_reason(CLIENT_CPU_LIMIT, 0.001)
    why = client_bound_reason(0.2, CLIENT_LAG_LIMIT_S * 3)
    assert "waited 30.0 ms" in why and "CPU" not in why


def test_read_wait_weights_lag_by_its_length():
    """The fault a median over wake-ups hid (a loop blocked 1.1 s wakes once): 14 wake-ups, one late by 1.0 s and
    13 by 1 ms, over 15 s.  Median lag 1 ms, but a read ready at a random moment waited Σ L² / 2 / wall =
    (1.0² + 13 · 0.001²) / 2 / 15 = 0.03334 s.  An idle loop (100 wake-ups 1 ms late over 1.1 s): 100 · 1e-6 / 2 /
    1.1 = 45 µs."""
    from pipeline.metrics.clientside import read_wait_s

    assert read_wait_s([1.0] + [0.001] * 13, 15.0) == pytest.approx((1.0 + 13e-6) / 30)
    assert read_wait_s([0.001] * 100, 1.1) == pytest.approx(100e-6 / 2.2)
    assert read_wait_s([], 1.0) is None


def _point(meta):
    """Two repeats of one request each at c = 1: 4 tokens, reads at 0.1, 0.2, 0.3 s, the last read holding 2 events."""
    reps = []
    for r in range(2):
        req = _req([[0.1, 1], [0.2, 1], [0.3, 1], [0.3, 1]], rid=r)
        reps.append(RepeatRecord(repeat=r, batching="served", window_start_s=0.0, window_end_s=0.3, requests=[req]))
    return PointRecords(point=PointKey("m", "openai", 4, 4, 1), repeats=reps, meta=meta)


def test_summary_carries_the_client_figures_and_the_flag():
    """Per repeat: 1.2 and 0.8 requests in flight → median 1.0; CPU 0.95 and 0.97 → median 0.96 ≥ 0.9: client-bound.
    Delivered: 6 and 9 tokens over the 0.3 s window → 20 and 30 tok/s, median 25.  Reads: 1 of 4 chunks came in
    the read of the chunk before it (0.25); 4 tokens / 4 chunks = 1 per chunk, 4 chunks per request; time to second
    token 0.2 − 0.1 = 0.1 s.  Per-token ITL (0.1, 0.1, 0.05, 0.05): no 0."""
    meta = {"client": [{"achieved_concurrency": 1.2, "cpu_share": 0.95, "lag_s": [0.001, 0.002], "delivered_tokens": 6},
                       {"achieved_concurrency": 0.8, "cpu_share": 0.97, "lag_s": [0.003], "delivered_tokens": 9}]}
    s = summarize_point(_point(meta))
    assert s.achieved_concurrency == pytest.approx(1.0)
    assert s.client_cpu_share == pytest.approx(0.96)
    assert s.client_lag_s["p50"] == pytest.approx(0.002)
    assert s.client_read_wait_s is None  # no wall time in these blocks
    assert s.client_bound is True and "CPU was busy 96%" in s.client_bound_reason
    assert s.delivered_output_throughput_tok_s == pytest.approx(25.0)
    assert s.itl_unresolved_share == pytest.approx(0.25)
    assert s.tokens_per_chunk == pytest.approx(1.0) and s.chunks_per_request == pytest.approx(4.0)
    assert s.ttst_s["p50"] == pytest.approx(0.1)
    assert s.itl_s["p50"] > 0 and min(d.itl_values(_point({}).repeats[0].requests[0])) == pytest.approx(0.05)
    kept = summarize_point(_point({"client": [{"cpu_share": 0.3, "lag_s": [0.001], "wall_s": 1.0}]}))
    assert kept.client_bound is False and kept.client_bound_reason is None
    phases = summarize_point(_point({"client": [{"connect_s": [0.002], "first_byte_s": [0.01, 0.03]},
                                                {"connect_s": [], "first_byte_s": [0.02]}]}))
    assert phases.connect_s["p50"] == pytest.approx(0.002)  # pooled over repeats: 0.01, 0.02, 0.03 → median 0.02
    assert phases.first_byte_s["p50"] == pytest.approx(0.02)
    late = summarize_point(_point({"client": [{"cpu_share": 0.3, "lag_s": [0.5, 0.001], "wall_s": 2.0}]}))
    assert late.client_read_wait_s == pytest.approx((0.25 + 1e-6) / 4)  # 62.5 ms ≥ 10 ms: read late
    assert late.client_bound is True and "waited 62.5 ms" in late.client_bound_reason
    assert summarize_point(_point({})).client_bound is None  # nothing measured: unknown, not "kept up"


def test_client_figures_without_blocks_are_none():
    assert set(client_figures(None, []).values()) == {None}


def test_arrays_match_the_reference_definitions():
    """summarize computes over arrays what the per-request definitions compute, value for value (a first chunk of 0
    tokens joined by a chunk in its read, a read of 3 events, a 2-token first read)."""
    import numpy as np

    from pipeline.core.arrays import from_records
    from pipeline.metrics.reads import itl_array, itl_chunk_array, read_figures, ttst_array

    reqs = [_req([[0.1, 0], [0.1, 1], [0.2, 1], [0.2, 2]], rid=0), _req([[0.1, 1], [0.3, 1], [0.3, 1], [0.4, 1]], rid=1),
            _req([[0.2, 2], [0.25, 1]], rid=2)]
    rep = RepeatRecord(repeat=0, batching="served", window_start_s=0.0, window_end_s=0.4, requests=reqs)
    a = from_records(PointRecords(point=PointKey("m", "openai", 4, 4, 1), repeats=[rep])).requests
    rows = np.ones(len(a), dtype=bool)
    assert itl_array(a, rows).tolist() == pytest.approx([v for r in reqs for v in d.itl_values(r)])
    assert itl_chunk_array(a, rows).tolist() == pytest.approx([v for r in reqs for v in d.itl_chunk_values(r)])
    fig = read_figures(a, rows)
    ttsts = [t for r in reqs if (t := d.ttst_s(r)) is not None]
    assert fig["ttst_s"]["mean"] == pytest.approx(np.mean(ttsts))
    assert ttst_array(a, rows).tolist() == pytest.approx(ttsts)
    joined, chunks = map(sum, zip(*(d.unresolved_chunks(r) for r in reqs)))
    assert fig["itl_unresolved_share"] == pytest.approx(joined / chunks)


def _curve(bound_at: int | None):
    """A closed-loop curve at c = 1, 2, 4, 8 of one repeat each: c requests × 4 tokens sent at 0 and done at 0.04 s,
    so 4c / 0.04 = 100 · c tok/s; the point at ``bound_at`` with a saturated client (CPU 0.99), the others at 0.2."""
    out = []
    for c in (1, 2, 4, 8):
        reqs = [_req([[0.01, 1], [0.02, 1], [0.03, 1], [0.04, 1]], rid=i) for i in range(c)]
        rep = RepeatRecord(repeat=0, batching="served", window_start_s=0.0, window_end_s=0.04, requests=reqs)
        cpu = 0.99 if c == bound_at else 0.2
        meta = {"client": [{"cpu_share": cpu, "lag_s": [0.001], "wall_s": 1.0, "achieved_concurrency": float(c)}]}
        out.append(summarize_point(PointRecords(point=PointKey("m", "openai", 4, 4, c), repeats=[rep], meta=meta)))
    return out


def test_a_client_bound_point_is_marked_wherever_it_is_shown():
    """The point at c = 8 is client-bound: the analysis leaves it out (peak 400 tok/s at c = 4, not 800 at c = 8),
    the run's verdict and the point's say so, show marks its read wait ``!`` and notes why, the model page's client
    cell starts CLIENT-BOUND, and the diff takes back a called change there with that reason."""
    from pipeline.analysis.analyze import analyze
    from pipeline.analysis.quality import run_quality
    from pipeline.diff.metrics import MetricChange
    from pipeline.diff.withhold import withhold_flagged
    from pipeline.pages.pointrows import client_cell
    from pipeline.views.show import build_show, format_table

    summaries = _curve(bound_at=8)
    assert [s.output_throughput_tok_s for s in summaries] == pytest.approx([100, 200, 400, 800])
    analysis = analyze(summaries, {}, {"name": "cpu"})
    model = analysis["models"][0]
    assert model["excluded_concurrency"] == [8] and model["peak_concurrency"] == 4
    dicts = [s.as_dict() for s in summaries]
    quality = run_quality({}, dicts)
    assert quality["verdict"] == "flagged" and any("client-bound" in r for r in quality["reasons"])
    assert [p["concurrency"] for p in quality["points"]] == [8]
    doc = build_show({"run_id": "r"}, dicts, analysis)
    row = doc["points"][3]
    assert row["client_bound"] is True and row["excluded"] and row["quality"]["verdict"] == "flagged"
    table = format_table(doc)
    assert "FLAGGED: client-bound" in table and "read wait marked ! is a client-bound point" in table
    assert client_cell(dicts[3]).startswith("**CLIENT-BOUND**") and not client_cell(dicts[2]).startswith("**")
    assert client_cell(dicts[2]) == "4.0 in flight, CPU 20 %, read wait 0.0 ms"
    change = MetricChange(model="m", engine="openai", input_len=4, output_len=4, concurrency=8,
                          metric="output_throughput_tok_s", label="output throughput", unit="tok/s",
                          higher_is_better=True, a=800.0, b=400.0, change=-0.5, p_value=0.001, n_a=3, n_b=3,
                          p_floor=0.0, sample_unit="repeat", significant=True, verdict="worse", note=None)
    withhold_flagged([change], {"verdict": "clean", "points": []}, quality)
    assert change.verdict == "~" and "client-bound" in change.note


def test_summaries_csv_carries_the_client_columns():
    """The download's CSV had no client figure: a client-bound point read as a server measurement there.  The point
    of :func:`test_summary_carries_the_client_figures_and_the_flag` (in flight 1.0, CPU 0.96, delivered 25 tok/s,
    lag p50 2 ms, client-bound) and one without client blocks (every client cell empty)."""
    import csv
    import io
    from types import SimpleNamespace

    from pipeline.pages.downloads import _summaries_csv

    meta = {"client": [{"achieved_concurrency": 1.2, "cpu_share": 0.95, "lag_s": [0.001, 0.002], "delivered_tokens": 6,
                        "connect_s": [0.004], "first_byte_s": [0.01, 0.03]},
                       {"achieved_concurrency": 0.8, "cpu_share": 0.97, "lag_s": [0.003], "delivered_tokens": 9}]}
    text = _summaries_csv(SimpleNamespace(summaries=[summarize_point(_point(meta)), summarize_point(_point({}))]))
    bound, none = list(csv.DictReader(io.StringIO(text)))
    assert float(bound["achieved_concurrency"]) == pytest.approx(1.0)
    assert float(bound["client_cpu_share"]) == pytest.approx(0.96)
    assert float(bound["delivered_output_throughput_tok_s"]) == pytest.approx(25.0)
    assert float(bound["client_lag_s_p50"]) == pytest.approx(0.002) and float(bound["connect_s_p50"]) == 0.004
    assert float(bound["first_byte_s_p50"]) == pytest.approx(0.02)
    assert bound["client_bound"] == "True" and "CPU was busy 96%" in bound["client_bound_reason"]
    assert bound["client_read_wait_s"] == ""  # no wall time in these blocks: unknown, an empty cell
    assert bound["ttft_s_p50"] != "" and list(bound)[:1] == ["model"]
    client_cols = [c for c in bound if c.startswith(("client_", "achieved_", "connect_", "first_byte_", "delivered_"))]
    assert len(client_cols) == 18 and all(none[c] == "" for c in client_cols)
