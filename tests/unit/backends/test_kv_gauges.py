"""A data-parallel server's per-engine gauges (fault kind: two engines' KV-cache fractions summed into "120 % full").

vLLM with ``--data-parallel-size 2`` exports one series per engine (``engine="0"``, ``engine="1"``); its
``kv_cache_usage_perc`` is a fraction 0–1 of that engine's cache.  Values worked by hand: engines at 0.6 and 0.5 are
0.6 full (the fullest), never 1.1; their running requests (3 and 2) are 5 in all.
"""

from __future__ import annotations

from pipeline.core.records import PointKey, PointRecords, RepeatRecord
from pipeline.backends.scrape import fold_during, parse_prometheus
from pipeline.metrics.summarize import server_state

PAGE = """# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.6
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 2
sglang:token_usage{dp_rank="0"} 0.7
sglang:token_usage{dp_rank="1"} 0.65
"""


def test_per_engine_fractions_are_the_fullest_engine_and_counts_add_up():
    got = parse_prometheus(PAGE)
    assert got["vllm:kv_cache_usage_perc"] == 0.6  # was 1.1
    assert got["sglang:token_usage"] == 0.7  # was 1.35
    assert got["vllm:num_requests_running"] == 5.0


def test_the_sampler_keeps_the_fullest_engine_over_time():
    during: dict[str, float] = {}
    fold_during(during, parse_prometheus(PAGE))
    fold_during(during, parse_prometheus(PAGE.replace(" 0.6\n", " 0.2\n").replace(" 0.5\n", " 0.9\n")))
    assert during["vllm:kv_cache_usage_perc"] == 0.9  # the highest engine at any sample, not 0.6 + 0.5 nor 1.1


def _point(max_during: dict[str, float]) -> PointRecords:
    rep = RepeatRecord(repeat=0, batching="served", window_start_s=0.0, window_end_s=1.0, requests=[],
                       server_metrics={"before": {}, "after": {}, "max_during": max_during})
    return PointRecords(point=PointKey("m", "vllm", 8, 16, 4), repeats=[rep], meta={})


def test_a_stored_kv_fraction_above_one_is_never_shown():
    """A run stored before (engines summed: 1.2) shows no KV usage rather than "120 % full"; 0.6 shows as is."""
    assert server_state(_point({"vllm:kv_cache_usage_perc": 1.2}))["kv_cache_usage_max"] is None
    assert server_state(_point({"vllm:kv_cache_usage_perc": 0.6}))["kv_cache_usage_max"] == 0.6
