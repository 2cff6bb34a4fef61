"""Open loop and SLOs, the pure parts: the point key, SLO goodput, send/achieved rate, schedule
keeping, the rate sweep's saturation and SLO limit, the auto rates and the bisection, the config.

Every expected value is worked by hand in the comment beside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.analysis.ratesweep import rate_sweep, slo_limit
from pipeline.config.sweepconfig import parse_config
from pipeline.config.arrivals import schedule_gaps
from pipeline.core.errors import BatchmarkError
from pipeline.metrics.goodput import slo_goodput
from pipeline.metrics.summarize import summarize_point
from pipeline.metrics.definitions import achieved_rate, schedule_rate, schedule_kept, send_rate
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord
from pipeline.sweep.ratewalk import bisect_rate, open_rates


def _req(i: int, sent: float, arrivals: list[float] | None, error: str | None = None) -> RequestRecord:
    chunks = [[t, 1] for t in arrivals or []]
    return RequestRecord(request_id=i, queued_s=sent, sent_s=sent, first_token_s=arrivals[0] if arrivals else None,
                         done_s=arrivals[-1] if arrivals else None, chunks=chunks, input_tokens=8,
                         output_tokens=len(chunks), error=error, scheduled_s=sent, lag_s=0.001)


KEY = PointKey("m", "openai", 8, 3, None, "poisson", 2.0)


def _records() -> PointRecords:
    reqs = [_req(0, 0.0, [0.1, 0.2, 0.3]),  # TTFT 0.1, TPOT (0.3 − 0.1) / 2 = 0.1, E2EL 0.3: good
            _req(1, 0.5, [0.8, 0.9, 1.0]),  # TTFT 0.3 > 0.2: not good
            _req(2, 1.0, [1.1, 1.5, 1.9]),  # TPOT (1.9 − 1.1) / 2 = 0.4 > 0.2: not good
            _req(3, 1.5, None, error="HTTP 503"),  # failed: not good
            _req(4, 1.6, [1.7, 1.8, 2.0])]  # TTFT 0.1, TPOT 0.15: good
    return PointRecords(KEY, [RepeatRecord(0, "served", 0.0, 2.0, reqs)])


def _both(ttft: float | None = None, tpot: float | None = None, e2el: float | None = None) -> dict[str, float | None]:
    """An SLO whose per-request goodput limits and p99 bounds are the same figures (ms)."""
    return {**{f"goodput_{m}_ms": v for m, v in (("ttft", ttft), ("tpot", tpot), ("e2el", e2el))},
            **{f"{m}_p99_max_ms": v for m, v in (("ttft", ttft), ("tpot", tpot), ("e2el", e2el))}}


def test_slo_goodput_by_hand():
    g = slo_goodput(_records(), _both(ttft=200, tpot=200))
    assert (g["good"], g["measured"]) == (2, 5)  # requests 0 and 4
    assert g["share_ok"] == pytest.approx(0.4)  # 2 / 5
    assert g["goodput_rps"] == pytest.approx(1.0)  # 2 requests / 2.0 s window
    assert g["goodput_tok_s"] == pytest.approx(3.0)  # 2 × 3 tokens / 2.0 s
    # p99 TTFT over the 4 finished: sorted [0.1, 0.1, 0.1, 0.3], rank 0.99 × 3 = 2.97 → 0.1 + 0.97 × 0.2 = 0.294 s > 0.2
    # p99 TPOT: sorted [0.1, 0.1, 0.15, 0.4] → 0.15 + 0.97 × 0.25 = 0.3925 s > 0.2: not ok either
    assert g["p99_ok"] == {"ttft": False, "tpot": False}
    assert g["met"] is False
    loose = slo_goodput(_records(), _both(ttft=1000, e2el=1000))
    assert loose["good"] == 4 and loose["p99_ok"] == {"ttft": True, "e2el": True}
    assert loose["met"] is False  # every p99 within, but 1 of 5 failed (20 % > 1 %)


def test_slo_met_when_nothing_failed():
    recs = _records()
    recs.repeats[0].requests = [r for r in recs.repeats[0].requests if r.ok]
    g = slo_goodput(recs, _both(ttft=1000, tpot=500))
    assert g["met"] is True and g["good"] == 4 and g["goodput_rps"] == pytest.approx(2.0)  # 4 / 2.0 s


def test_goodput_limits_and_p99_bounds_are_apart():
    # the per-request goodput limit (vLLM's --goodput) and the p99 bound are two figures.  Over the four
    # finished requests of _records (TTFT 0.1, 0.1, 0.1, 0.3 s; p99 0.294 s worked in test_slo_goodput_by_hand):
    recs = _records()
    recs.repeats[0].requests = [r for r in recs.repeats[0].requests if r.ok]
    # a strict per-request limit (150 ms: the 0.3 s request is not good) beside a loose p99 bound (300 ms ≥ 0.294 s)
    g = slo_goodput(recs, {"goodput_ttft_ms": 150, "ttft_p99_max_ms": 300})
    assert (g["good"], g["share_ok"], g["p99_ok"], g["met"]) == (3, 0.75, {"ttft": True}, True)
    assert (g["goodput_ttft_ms"], g["ttft_p99_max_ms"], g["goodput_tpot_ms"], g["tpot_p99_max_ms"]) == (150, 300, None, None)
    # and the other way round: every request good (≤ 400 ms), the p99 bound (250 ms < 0.294 s) missed
    g = slo_goodput(recs, {"goodput_ttft_ms": 400, "ttft_p99_max_ms": 250})
    assert (g["good"], g["p99_ok"], g["met"]) == (4, {"ttft": False}, False)


def test_rates_and_schedule_by_hand():
    rep = _records().repeats[0]
    assert send_rate(rep) == pytest.approx(4 / 1.6)  # 5 sends from 0.0 to 1.6 s: 4 gaps in 1.6 s
    assert achieved_rate(rep) == pytest.approx(4 / 2.0)  # 4 completed in the 2.0 s window
    assert schedule_rate(rep) == pytest.approx(4 / 1.6)  # sent on schedule: the same 5 from 0.0 to 1.6 s
    for r, t in zip(rep.requests, (0.0, 0.2, 0.8, 1.0, 1.2)):
        r.scheduled_s = t
    assert schedule_rate(rep) == pytest.approx(4 / 1.2)  # scheduled from 0.0 to 1.2 s (the sends waited for a slot)
    for r in rep.requests:
        r.scheduled_s = None
    assert schedule_rate(rep) is None  # no schedule (closed loop, imported points)
    # limit at 2 requests/s: max(10 ms, 0.1 / 2) = 50 ms.  One 0.5 s lag in 100: p99 rank 98.01 →
    # 0.001 + 0.01 × 0.499 ≈ 0.006 s: kept.  Two: rank 98.01 lands between two 0.5 s lags: 0.5 s, not kept.
    assert schedule_kept([0.001] * 99 + [0.5], 2.0) is True
    assert schedule_kept([0.001] * 98 + [0.5, 0.5], 2.0) is False
    assert schedule_kept([], 2.0) is None
    s = summarize_point(_records(), {"goodput_ttft_ms": 200})
    assert (s.load, s.rate_rps, s.concurrency) == ("poisson", 2.0, None)
    assert s.send_rate_rps == pytest.approx(2.5) and s.achieved_rate_rps == pytest.approx(2.0)
    assert s.slo["good"] == 3  # ttft only: requests 0, 2 and 4 (TTFT 0.1 s each)
    assert s.key == KEY


def test_schedules_are_the_processes_they_claim():
    # 20 000 Poisson gaps at 4/s: mean 0.25 s within 2 % (standard error 1/√20000 = 0.7 %, so ~3 σ);
    # an exponential's coefficient of variation is 1, estimated here to about ±1 %: within 0.04.
    g = schedule_gaps("poisson", 4.0, seed=7)
    gaps = np.array([next(g) for _ in range(20_000)])
    assert abs(gaps.mean() / 0.25 - 1) < 0.02
    assert abs(gaps.std() / gaps.mean() - 1) < 0.04
    c = schedule_gaps("constant", 4.0, seed=7)
    assert [next(c) for _ in range(3)] == [0.25, 0.25, 0.25]  # CV exactly 0
    a, b = schedule_gaps("poisson", 4.0, 1), schedule_gaps("poisson", 4.0, 1)
    assert [next(a) for _ in range(5)] == [next(b) for _ in range(5)]  # seeded


def test_point_key_identity():
    closed = PointKey("m", "vllm", 64, 32, 8)
    assert closed.slug() == "vllm-in64-out32-c8" and closed.as_dict() == {
        "model": "m", "engine": "vllm", "variant": "default", "input_len": 64, "output_len": 32,
        "concurrency": 8}  # the file name unchanged; the stored form says its variant (default)
    opened = PointKey("m", "vllm", 64, 32, None, "poisson", 2.5, max_concurrency=16)
    assert opened.slug() == "vllm-in64-out32-poisson-r2.5-c16"  # the cap in the file name, as before
    assert opened.label() == "poisson 2.5 req/s, cap 16" and opened.as_dict() == {
        "model": "m", "engine": "vllm", "variant": "default", "input_len": 64, "output_len": 32, "concurrency": None,
        "load": "poisson", "rate_rps": 2.5, "max_concurrency": 16}
    assert PointKey("m", "vllm", 64, 32, None, "constant", 10.0).slug() == "vllm-in64-out32-constant-r10"
    assert PointKey.of(opened.as_dict()) == opened and PointKey.of(closed.as_dict()) == closed
    assert sorted([opened, closed]) == [closed, opened]  # closed grid first, then the rates
    tuned = PointKey("m", "vllm", 64, 32, 8, variant="fp8-kv")
    assert tuned.slug() == "vllm-fp8-kv-in64-out32-c8" and tuned != closed and PointKey.of(tuned.as_dict()) == tuned
    assert sorted([tuned, opened, closed]) == [closed, opened, tuned]  # per variant after model and engine
    for bad in (dict(concurrency=None), dict(rate_rps=1.0), dict(load="poisson"), dict(load="poisson", rate_rps=float("nan")),
                dict(max_concurrency=16), dict(load="poisson", rate_rps=2.5)):  # the last: an open point has no concurrency
        with pytest.raises(ValueError):
            PointKey(**{**closed.as_dict(), **bad})


def _summary(rate: float, sent: float, achieved: float, met: bool | None, cap: int | None = None,
             scheduled: float | None = None) -> PointSummary:
    return PointSummary(max_concurrency=cap, schedule_rate_rps=scheduled, model="m", engine="openai", input_len=8, output_len=3, concurrency=None, repeats=1,
                        completed=10, failed=0, output_throughput_tok_s=1.0, per_user_tok_s=None, ttft_s=None,
                        ttft_with_queue_s=None, tpot_s=None, itl_s=None, e2el_s=None, prefill_throughput_tok_s=None,
                        step_time_s=None, load="poisson", rate_rps=rate, send_rate_rps=sent, achieved_rate_rps=achieved,
                        slo=None if met is None else {"met": met, "goodput_rps": achieved if met else 0.0})


def test_rate_sweep_saturation_and_slo_limit():
    pts = [_summary(1, 1.0, 1.0, True), _summary(2, 2.1, 2.0, True), _summary(4, 3.9, 3.3, False),
           _summary(8, 8.2, 3.4, False)]
    rs = rate_sweep(pts)
    # 3.3 < 0.9 × 3.9 = 3.51: saturated from offered 4; at 2, 2.0 ≥ 0.9 × 2.1 = 1.89 still follows
    assert rs["saturation_rate_rps"] == 4 and rs["max_achieved_rps"] == 3.4
    assert [p["saturated"] for p in rs["points"]] == [False, False, True, True]
    assert rs["slo"] == {"max_ok": 2, "first_failing": 4}
    assert slo_limit([(1, True), (2, False), (4, True)]) == {"max_ok": 1, "first_failing": 2}  # a pass after a fail does not count
    assert slo_limit([(1, True), (2, True)]) == {"max_ok": 2, "first_failing": None}


def test_a_capped_point_that_cannot_sustain_its_offered_rate_is_saturated():
    # Under a cap of 4 the client sends only when a slot frees: sent 3.3/s follows the achieved 3.2/s although the
    # schedule asked 3.9/s (offered 4, Poisson as drawn).  3.2 < 0.9 × 3.9 = 3.51: saturated.  Uncapped, the same
    # figures mean the client fell behind its own schedule (schedule_kept says so): 3.2 ≥ 0.9 × 3.3 = 2.97, not.
    capped = rate_sweep([_summary(4, 3.3, 3.2, None, cap=4, scheduled=3.9)])
    assert capped["points"][0]["saturated"] is True and capped["saturation_rate_rps"] == 4
    uncapped = rate_sweep([_summary(4, 3.3, 3.2, None, scheduled=3.9)])
    assert uncapped["points"][0]["saturated"] is False and uncapped["saturation_rate_rps"] is None
    # a summary written before schedule_rate_rps existed keeps the sent rate as the reference
    assert rate_sweep([_summary(4, 3.3, 3.2, None, cap=4)])["points"][0]["saturated"] is False


def test_auto_rates_and_bisection():
    # closed grid at output_len 32: c = 1 → 32 tok/s = 1 req/s; peak 320 tok/s = 10 req/s; high = 1.25 × 10 = 12.5
    rates = open_rates([(1, 32.0), (4, 200.0), (8, 320.0), (16, 300.0)], 32, 4)
    assert rates == [1.0, 4.83, 8.67, 12.5]  # 1 + 11.5 × i / 3, 3 significant digits
    with pytest.raises(BatchmarkError, match="auto"):
        open_rates([(1, None)], 32, 4)
    assert bisect_rate({1.0: True, 2.0: True, 4.0: False}) == 3.0  # midpoint of the last pass and the first fail
    assert bisect_rate({1.0: True, 2.0: True, 3.0: False, 2.5: True, 2.75: True, 2.88: False}) == 2.81
    assert bisect_rate({1.0: True, 2.0: True}) is None and bisect_rate({1.0: False}) is None


BASE = {"name": "t", "hardware": "cpu", "backend": "openai", "models": [{"name": "m", "served_name": "m"}]}


def test_config_open_loop_and_slo():
    cfg = parse_config({**BASE, "concurrency": [], "open_loop": {"rates": [4, 1, 2], "max_concurrency": 8},
                        "slo": {"goodput_ttft_ms": 2000, "tpot_p99_max_ms": 100}})
    assert cfg.open_loop.rates == [1, 2, 4] and cfg.open_loop.load == "poisson" and cfg.max_in_flight() == 8
    assert (cfg.slo.goodput_ttft_ms, cfg.slo.ttft_p99_max_ms, cfg.slo.tpot_p99_max_ms) == (2000, None, 100)


def test_an_old_slo_key_is_read_as_both_limits_with_one_warning_line(capsys):
    # ttft_p99_ms was both the goodput limit and the p99 bound; a config that says it keeps meaning both
    old = parse_config({**BASE, "slo": {"ttft_p99_ms": 2000, "tpot_p99_ms": 100, "e2el_p99_ms": None}}, "old.yaml")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("batchmark: warning: old.yaml: slo: ttft_p99_ms → goodput_ttft_ms and "
                                                   "ttft_p99_max_ms, tpot_p99_ms → ")
    new = parse_config({**BASE, "slo": {"goodput_ttft_ms": 2000, "ttft_p99_max_ms": 2000, "goodput_tpot_ms": 100,
                                        "tpot_p99_max_ms": 100}}, "new.yaml")
    assert capsys.readouterr().err == ""
    assert old == new
    # the same config keeps its digest (a run measured for it resumes): hashed as before the keys were apart
    assert old.digest() == new.digest()
    apart = parse_config({**BASE, "slo": {"goodput_ttft_ms": 2000, "ttft_p99_max_ms": 1000}})
    assert apart.digest() != new.digest()
    assert parse_config({**BASE, "open_loop": {"rates": "auto"}}).open_loop.auto_rates == 8


@pytest.mark.parametrize("extra, match", [
    ({"open_loop": {"rates": [1, -2]}}, r"open_loop\.rates: rates\[1\] = -2: must be a number of requests/s above 0"),
    ({"open_loop": {"rates": [1, 1]}}, r"open_loop\.rates: rates must be distinct"),
    ({"open_loop": {"rates": []}}, r"open_loop\.rates"),
    ({"open_loop": {"rates": "fast"}}, r"open_loop\.rates"),
    ({"open_loop": {"rates": [1, float("nan")]}}, r"open_loop\.rates: rates\[1\] = nan"),
    ({"open_loop": {"rates": [True]}}, r"open_loop\.rates: rates\[0\] = True"),
    ({"open_loop": {"rates": [1], "load": "bursty"}}, r"open_loop\.load"),
    ({"open_loop": {"rates": [1], "max_concurrency": 0}}, r"open_loop\.max_concurrency"),
    ({"concurrency": [], "open_loop": {"rates": "auto"}}, r"auto measures the concurrency grid first"),
    ({"concurrency": []}, r"concurrency: give at least one"),
    ({"slo": {}}, r"slo: give at least one"),
    ({"slo": {"goodput_ttft_ms": -5}}, r"slo\.goodput_ttft_ms"),
    ({"slo": {"ttft_p99_max_ms": float("inf")}}, r"slo\.ttft_p99_max_ms"),
    ({"slo": {"ttft_p99_ms": -5}}, r"slo\.ttft_p99_ms \(read as goodput_ttft_ms\): Input should be greater than 0"),  # the key the file has
    ({"slo": {"ttft_p99_ms": 5, "ttft_p99_max_ms": 5}}, r"slo: ttft_p99_ms \(deprecated\) and ttft_p99_max_ms are both given"),
    ({"slo": {"ttft_p99": 5}}, r"slo\.ttft_p99: unknown key"),
    ({"backend": "transformers", "models": [{"name": "m", "architecture": {"model_type": "llama"}}],
      "open_loop": {"rates": [1]}}, r"open_loop: the transformers backend"),
])
def test_config_refuses_bad_open_loop_values(extra, match):
    with pytest.raises(BatchmarkError, match=match) as exc:
        parse_config({**BASE, **extra}, "cfg.yaml")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("cfg.yaml: ")
