"""The client against a server of known timing that keeps its own record, and a client driven past its limit.

The reference is ``fake_stream_server.py --record``: 50 ms prefill, one token every 10 ms, 64 tokens (the
timing the peers' clients were compared on in docs/reliability.md), recording when each request arrived and when it wrote each chunk, on the clock the
client stamps with (``time.perf_counter``: one monotonic clock for every process on Linux).  Its record, not a
number worked from its sleeps, is the truth: on this 2-core machine shared with other jobs its sleeps overshoot
by a millisecond or more, and that lateness is the server's, not the client's.

Tolerances, each against the server's own record (two shared cores, so they are what the client can be held to
here, not the benchmark's figures).  Where a timing is asserted, the client's own p99 event-loop lag widens it: a
read late by δ moves TTFT by δ and a TPOT by at most 2δ / 63 — lateness the machine's other jobs cause and the
client reports (``client_lag_s``) rather than hides:

- output throughput counting what the server delivered in the measured window
  (``delivered_output_throughput_tok_s``) within 1 % of the server's tokens written in that window: the two
  count the same tokens and differ only by the transit of the window's edge chunks.  The measured requests'
  own tokens over the same window (``steady_output_throughput_tok_s``) read low by the warm-up still finishing
  at its start and the cool-down streaming at its end — the 1–4 % of a measurement window's own making;
- TPOT's median within 2 % of the server's own per-request TPOT, ITL's mean within 2 % of the server's mean gap
  between writes (the mean, not the median: each read's arrival jitters by the client's wake-up, which leaves
  the mean gap as it is but widens a skewed distribution, so its median moves by a few per cent on two shared
  cores — read jitter, not a client error, and the TPOT median, over whole requests, is not moved by it);
- TTFT median within 5 % + 3 ms of the server's own first write after the client's send (per request, the
  server's first chunk written − the client's send): what the client adds to TTFT by reading late.  The transit
  from the client's send to the server's handler is in both (on two shared cores, load average 7–12 while this
  was written, it reached 10–40 ms at c ≥ 8: each process waits for a core), as it is in any client's TTFT,
  a minimal socket client's too.  The lag that widens it is the larger of the point's p99 and the client's own
  lag where its first reads came (:func:`_lag_at_first_reads_s`): at c = 1,024 every measured request is sent as
  the warm-up ends, so their first chunks arrive together and a loop held then delays them all, which a p99 over
  the whole point does not see (a CI run read +21.9 ms of 220 ms with a p99 of 8.6 ms);
- none of these points is client-bound.

The same tolerances hold at every concurrency, 1,024 included (one client core; ``pytest -s`` prints each point's
deviations).  Measured on this 2-core machine with one other job running (2026-12-02): delivered throughput
+0.00 % at c = 1 … 256 and −0.03 % at 1,024; TPOT p50 +0.01 … +0.27 %; ITL mean within ±0.06 %; TTFT p50
+0.05 … +0.32 ms of 51–57 ms (c = 1 … 256) and +0.00 ms of 163 ms at 1,024.  At c = 1,024 the server itself
falls behind its own timing (Python, one core for 1,024 streams: TPOT 40 ms instead of 10, TTFT 163 ms), and
the client still reads its record within those tolerances (client CPU about 50 %): what is measured is the
server's slowness, which its record shows too.

The saturated client: every read the read loop keeps costs 3 ms of CPU more (its timestamp's ``append`` wrapped
with a spin; the loop parses nothing, so the read is where its cost is), so 16 streams of a token per 10 ms ask
4.8 CPU-seconds per second of one thread: the client cannot keep up, whatever the machine, and the point must say
it is client-bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from pipeline.analysis.analyze import analyze, point_warnings
from pipeline.config.sweepconfig import parse_config
from pipeline.core.records import PointKey
from pipeline.backends import get_backend
from pipeline.metrics.summarize import summarize_point
from tests.integration.served_helpers import build_tokenizer, free_port, wait_healthy

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: its figures are wall-clock timings of a server of known timing (run alone: a second test process would share the client's core)

HERE = Path(__file__).resolve().parent
N_TOKENS = 64


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


def _measure(tmp: Path, tok_dir: Path, concurrency: int, requests: int, processes: int = 1):
    """One point (64 out, 1 repeat, warm-up on) against a fresh recording server, its closed loop over ``processes``
    client processes; (records, summary, server record)."""
    port = free_port()
    log = tmp / f"server-c{concurrency}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "fake_stream_server.py"), "--port", str(port),
                                 "--prefill-ms", "50", "--token-ms", "10", "--record"],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, 30, log)
        cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8,
                            "output_len": N_TOKENS, "concurrency": [concurrency], "repeats": 1,
                            "openai": {"base_url": f"http://127.0.0.1:{port}/v1", "requests_per_point": requests,
                                       "tokenizer": str(tok_dir), "timeout_s": 60, "client_processes": processes},
                            "models": [{"name": "m", "served_name": "m"}]})
        engine = get_backend(cfg)
        engine.load(cfg.models[0])
        n_probe = len(json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/record", timeout=10).read()))
        rec = engine.measure(PointKey("m", "openai", 8, N_TOKENS, concurrency), 1, True, 0)
        server = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/record", timeout=10).read())[n_probe:]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return rec, summarize_point(rec), server


def _server_truth(rec, server, n_warm):
    """The server's own figures over the client's measured window and requests: (tokens/s, median TTFT, median
    TPOT, mean gap between writes).

    The measured requests are the server's in arrival order after the ``n_warm`` warm-up ones (all sent at the
    start, each measured one only after a warm-up one finished) and before the cool-down ones (sent after the last
    measured one), paired with the client's in send order.  The clocks are one, but the records count from the
    point's start: per pair, the server's write − the client's read of the same chunk is the offset less that
    chunk's read delay (≥ 0), so its largest value is the offset less the request's quickest read; the median of
    those over the pairs is the offset (a pair that swapped places moves it by no more than one of them)."""
    rep = rec.repeats[0]
    meas = sorted((r for r in rep.requests if not r.warmup), key=lambda r: r.sent_s)
    done = sorted(server, key=lambda q: q["arrival_s"])[n_warm:n_warm + len(meas)]
    assert all(len(q["chunks"]) == N_TOKENS for q in done)
    offset = float(np.median([max(sc[0] - cc[0] for sc, cc in zip(q["chunks"], r.chunks)) for q, r in zip(done, meas)]))
    start, end = rep.window_start_s + offset, rep.window_end_s + offset
    tokens = sum(k for q in server for t, k in q["chunks"] if start <= t <= end)
    ttft = [q["chunks"][0][0] - offset - r.sent_s for q, r in zip(done, meas)]
    tpot = [(q["chunks"][-1][0] - q["chunks"][0][0]) / (N_TOKENS - 1) for q in done]
    gaps = [b[0] - a[0] for q in done for a, b in zip(q["chunks"], q["chunks"][1:])]
    return tokens / (end - start), float(np.median(ttft)), float(np.median(tpot)), float(np.mean(gaps))


def _lag_at_first_reads_s(rec) -> float:
    """The client's own lateness where its TTFT is read (s): per measured request, the longest event-loop lag the
    client recorded within one lag period of its first read (the block that held that read, if one did), the median
    over the requests.

    The lag monitor (:class:`pipeline.loadgen.clientmeter.ClientMeter`) wakes every period and keeps how late it
    woke; sample i woke at the meter's start + Σ_{j ≤ i} (period + lag_j), the meter starting at the point's origin.
    A point's p99 lag misses a burst that holds the loop at the moment many first chunks arrive together (c = 1,024:
    every measured request is sent as the warm-up ends together); this is the lag at those moments, from the
    client's own record, so a client that adds more to TTFT than it says it was held still fails."""
    from pipeline.loadgen.clientmeter import LAG_PERIOD_S

    if len(rec.meta.get("client") or []) != 1 or rec.meta.get("client_processes", 1) != 1:
        return 0.0  # several processes pool their samples: no one timeline
    lags = np.asarray(rec.meta["client"][0].get("lag_s") or [], dtype=float)
    if not len(lags):
        return 0.0
    woke = np.cumsum(LAG_PERIOD_S + lags)
    firsts = [r.chunks[0][0] for r in rec.repeats[0].requests if not r.warmup and r.chunks]
    held = []
    for read in firsts:
        near = lags[(woke >= read - 0.002) & (woke <= read + LAG_PERIOD_S + 0.002)]
        held.append(float(near.max()) if len(near) else 0.0)
    return float(np.median(held)) if held else 0.0


@pytest.mark.parametrize("concurrency,processes", [(1, 1), (8, 1), (32, 1), (256, 1), (1024, 1), (32, 2), (256, 2)])
def test_figures_match_the_servers_own_record(tmp_path, tok_dir, concurrency, processes):
    """The same tolerances whether the closed loop runs in one client process or over two (the concurrency split
    between them, :mod:`pipeline.loadgen.clientprocs`): the same numbers either way."""
    rec, summ, server = _measure(tmp_path, tok_dir, concurrency, max(4 * concurrency, 16), processes)
    assert rec.meta["client_processes"] == processes
    tok_s, ttft, tpot, gap = _server_truth(rec, server, concurrency)
    held = _lag_at_first_reads_s(rec)
    print(f"\nc={concurrency} ({processes} client process(es)): delivered {summ.delivered_output_throughput_tok_s / tok_s - 1:+.2%}, TPOT p50 "
          f"{summ.tpot_s['p50'] / tpot - 1:+.2%}, ITL mean {summ.itl_s['mean'] / gap - 1:+.2%}, TTFT p50 "
          f"{(summ.ttft_s['p50'] - ttft) * 1e3:+.2f} ms of {ttft * 1e3:.1f}; the server's {tok_s:,.0f} tok/s, TPOT "
          f"{tpot * 1e3:.2f} ms; client lag p99 {summ.client_lag_s['p99'] * 1e3:.2f} ms, at first reads {held * 1e3:.2f} ms, "
          f"CPU {summ.client_cpu_share:.0%}")
    assert summ.failed == 0
    assert summ.client_bound is False, summ.client_bound_reason
    assert summ.delivered_output_throughput_tok_s == pytest.approx(tok_s, rel=0.01)
    assert summ.steady_output_throughput_tok_s <= summ.delivered_output_throughput_tok_s * 1.001
    late = summ.client_lag_s["p99"]  # the client's own lateness, which the machine's other jobs set here
    assert summ.tpot_s["p50"] == pytest.approx(tpot, rel=0.02, abs=2 * late / (N_TOKENS - 1))
    assert summ.itl_s["mean"] == pytest.approx(gap, rel=0.02, abs=2 * late / (N_TOKENS - 1))
    # 5 % (2.5 ms of 50), or the lag: the p99, or where the first reads came, the client's own lag there
    assert summ.ttft_s["p50"] == pytest.approx(ttft, rel=0.05, abs=max(late, held))
    assert summ.achieved_concurrency == pytest.approx(concurrency, rel=0.05)  # closed loop: c in flight
    assert summ.itl_unresolved_share is not None and summ.ttst_s is not None
    assert summ.tokens_per_chunk == pytest.approx(1.0)  # the server sends one token per event
    # HTTP phases: the fake server sends its headers at once, before its 50 ms prefill: first byte before TTFT
    assert summ.connect_s is not None and 0 < summ.first_byte_s["p50"] < summ.ttft_s["p50"]
    assert summ.chunks_per_request == pytest.approx(N_TOKENS, rel=0.02)


def test_a_saturated_client_is_flagged_everywhere_it_counts(tmp_path, tok_dir, monkeypatch):
    from dataclasses import dataclass, field

    from pipeline.loadgen import scheduler, streamrecord

    class SlowStamps(list):
        def append(self, value):  # 3 ms of CPU per read: the client's limit is ~330 reads/s
            end = time.process_time() + 0.003
            while time.process_time() < end:
                pass
            super().append(value)

    @dataclass
    class SlowStream(streamrecord.RawStream):
        read_s: list = field(default_factory=SlowStamps)

    monkeypatch.setattr(scheduler, "RawStream", SlowStream)
    rec, summ, _ = _measure(tmp_path, tok_dir, 16, 16)
    assert summ.client_bound is True
    assert summ.client_bound_reason.startswith("client-bound")
    assert summ.client_cpu_share >= 0.9 or summ.client_read_wait_s >= 0.010
    warned = point_warnings(summ)
    assert any("client-bound" in w and "core of its own" in w for w in warned), warned
    point = analyze([summ], {}, {"name": "cpu"})["points"][0]
    assert point["excluded"] and "client-bound" in point["excluded_reason"]
