"""Trace replay (``open_loop.load: trace``): a Mooncake-format trace file read and checked line by line, its gaps
scaled to each offered rate, its lengths every request's, and the same replay in the simulated server and the plan."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.config.tracefile import read_trace
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey
from pipeline.config.arrivals import schedule_gaps
from tests.conftest import REPO

TRACE = REPO / "tests" / "data" / "traces" / "mooncake-small.jsonl"
BASE = {"name": "t", "hardware": "dgx-spark", "backend": "simulated", "input_len": 100, "output_len": 12,
        "concurrency": [], "repeats": 1, "seed": 0, "simulated": {"requests_per_point": 8},
        "models": [{"name": "gpt-oss-20b", "card": "gpt-oss-20b"}]}


def _cfg(**open_loop):
    return parse_config({**BASE, "open_loop": {"load": "trace", "trace_file": str(TRACE), **open_loop}}, "t.yaml")


def test_the_shipped_trace_reads_as_its_offsets_rate_and_lengths():
    """Fault kind: a trace read in the wrong unit (Mooncake's timestamps are milliseconds) or its rate miscounted.

    tests/data/traces/mooncake-small.jsonl: 8 arrivals at 0, 0, 250, 500, 1250, 1500, 2750, 3500 ms, so offsets
    0 … 3.5 s and R₀ = (8 − 1) / 3.5 s = 2.0 req/s; at 4 req/s (a speed-up of 2) its gaps are halved and the gap
    back to its first line is 1 / 4 s."""
    tr = read_trace(TRACE)
    assert tr.offsets_s.tolist() == [0.0, 0.0, 0.25, 0.5, 1.25, 1.5, 2.75, 3.5]
    assert tr.rate_rps == pytest.approx(2.0)
    assert tr.input_lens.tolist() == [120, 64, 200, 32, 96, 160, 48, 80]
    assert tr.output_lens.tolist() == [16, 8, 24, 4, 12, 20, 6, 10]
    assert tr.gaps_s(4.0).tolist() == pytest.approx([0.0, 0.125, 0.125, 0.375, 0.125, 0.625, 0.375, 0.25])
    gaps = schedule_gaps("trace", 4.0, 0, None, tr.gaps_s(4.0))
    assert [next(gaps) for _ in range(10)] == pytest.approx([0.0, 0.125, 0.125, 0.375, 0.125, 0.625, 0.375, 0.25,
                                                             0.0, 0.125])  # round again after the last line


@pytest.mark.parametrize("lines, says", [
    (['{"timestamp": 0}', '{"timestamp": 500}', '{"timestamp": 400}'], "line 3: timestamp 400 ms is before"),
    (['{"timestamp": 0}', '{"timestamp": NaN}'], "line 2: timestamp: nan is not a finite number"),
    (['{"timestamp": 0}', 'not json'], "line 2: not JSON"),
    (['{"timestamp": 0, "input_length": 5, "output_length": 0}', '{"timestamp": 1}'],
     "line 1: output_length: 0 is not a positive number of tokens"),
    (['{"timestamp": 0, "input_length": 5, "output_length": 2}', '{"timestamp": 1}'],
     "line 2: states no input_length/output_length, unlike the first line"),
    (['{"timestamp": 7}', '{"timestamp": 7}'], "2 arrival(s) spanning 0 ms"),
    (['[1, 2]'], "line 1: not a JSON object"),
])
def test_a_bad_trace_is_refused_in_one_line_naming_its_line(tmp_path, lines, says):
    """Fault kind: a trace out of order, non-finite, not JSONL, with a length ≤ 0, half-stated or without a rate
    replayed as a wrong schedule (or a traceback) instead of one line naming the file's line."""
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BatchmarkError) as exc:
        read_trace(path)
    assert says in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(BatchmarkError) as cfg_exc:  # the config refuses it at the edge, naming the key
        parse_config({**BASE, "open_loop": {"load": "trace", "trace_file": str(path), "rates": [1.0]}}, "t.yaml")
    assert "trace_file" in str(cfg_exc.value) and says in str(cfg_exc.value)


def test_trace_config_keys_refused_where_they_mean_nothing():
    """Fault kind: a trace load without its file, a file beside another load, speed-ups beside rates, or drawn
    lengths beside a trace that states them, accepted and silently ignored."""
    for open_loop, says in (({"load": "trace", "rates": [1.0]}, "trace_file: load trace needs it"),
                            ({"load": "poisson", "trace_file": str(TRACE), "rates": [1.0]}, "only with load trace"),
                            ({"load": "trace", "trace_file": str(TRACE), "rates": [1.0], "speedups": [2]},
                             "speedups: only with load trace")):
        with pytest.raises(BatchmarkError, match=says):
            parse_config({**BASE, "open_loop": open_loop}, "t.yaml")
    with pytest.raises(BatchmarkError, match="the trace_file states every request's lengths"):
        parse_config({**BASE, "lengths": {"input": {"distribution": "uniform", "range_ratio": 0.5}},
                      "open_loop": {"load": "trace", "trace_file": str(TRACE), "rates": [1.0]}}, "t.yaml")


def test_speedups_are_rates_and_the_simulated_server_replays_the_trace():
    """Fault kinds: a speed-up not applied to the trace's own rate; a simulated trace point sent on another
    schedule or at the nominal lengths instead of the trace's; a server too short for the trace's longest request.

    Speed-ups 1 and 2 of R₀ = 2 req/s are rates 2 and 4; at 4 req/s the 8 requests go out at the trace's offsets
    halved (0, 0, 0.125, 0.25, 0.625, 0.75, 1.375, 1.75 s) with its lengths; max_model_len = 200 + 24 + 64 = 288."""
    from pipeline.backends.simulated import SimulatedBackend

    cfg = _cfg(speedups=[1.0, 2.0])
    assert cfg.open_loop.rates == [2.0, 4.0]
    engine = SimulatedBackend(cfg)
    engine.load(cfg.models[0])
    rec = engine.measure(PointKey("gpt-oss-20b", "simulated", 100, 12, None, "trace", 4.0, None), 1, False, 0)
    got = sorted(rec.repeats[0].requests, key=lambda q: q.request_id)
    assert [q.sent_s for q in got] == pytest.approx([0.0, 0.0, 0.125, 0.25, 0.625, 0.75, 1.375, 1.75])
    assert [q.input_tokens for q in got] == [120, 64, 200, 32, 96, 160, 48, 80]
    assert [q.drawn_output_len for q in got] == [16, 8, 24, 4, 12, 20, 6, 10]
    assert engine.server.max_model_len == 288 and rec.meta["trace_file"] == str(TRACE)


def test_plan_prices_the_trace_it_replays():
    """Fault kind: ``plan`` of a trace config planning nothing, or every request at the nominal 100/12 lengths.

    Both speed-ups are planned as trace points at 2 and 4 req/s; the same rates planned as Poisson arrivals of
    fixed 100/12 requests predict another TTFT."""
    from pipeline.plan.estimate import make_plan

    points = make_plan(_cfg(speedups=[1.0, 2.0])).models[0].points
    assert [(p.load, p.rate_rps) for p in points] == [("trace", 2.0), ("trace", 4.0)]
    poisson = parse_config({**BASE, "open_loop": {"load": "poisson", "rates": [2.0, 4.0]}}, "t.yaml")
    assert [p.ttft_s for p in points] != [p.ttft_s for p in make_plan(poisson).models[0].points]
    assert np.all([p.output_throughput_tok_s > 0 for p in points])
