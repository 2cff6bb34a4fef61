"""``show`` and ``show --json`` carry what ``vllm bench serve --metric-percentiles 95,99.9`` prints for
every latency, ITL and E2EL included: p95 and p99.9 (``tails_s``), worked by hand on a two-request point.

Percentiles are numpy's linear interpolation (``np.percentile``'s default, as vLLM's ``calculate_metrics`` uses):
of n sorted values, the q-th lies at index q / 100 × (n − 1), between its two neighbours.
"""

import re

import pytest

from pipeline.metrics.summarize import summarize_point
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord
from pipeline.views.show import build_show, format_table


def _req(i, chunks, out_tokens):
    return RequestRecord(request_id=i, queued_s=0.0, sent_s=0.0, first_token_s=chunks[0][0], done_s=chunks[-1][0],
                         chunks=chunks, input_tokens=10, output_tokens=out_tokens)


def _point() -> PointSummary:
    # A: chunks at 1.0 (1 token), 1.3 (3 tokens), 1.5 (1): TTFT 1.0, E2EL 1.5, per-token gaps 0.1 0.1 0.1 0.2,
    #    per-chunk gaps 0.3 0.2, TPOT (1.5 − 1.0) / 4 = 0.125.
    # B: one token a chunk at 0.5, 1.5, 2.0, 2.5, 4.5: TTFT 0.5, E2EL 4.5, gaps 1.0 0.5 0.5 2.0 (both kinds),
    #    TPOT (4.5 − 0.5) / 4 = 1.0.
    a = _req(0, [[1.0, 1], [1.3, 3], [1.5, 1]], 5)
    b = _req(1, [[0.5, 1], [1.5, 1], [2.0, 1], [2.5, 1], [4.5, 1]], 5)
    return summarize_point(PointRecords(PointKey("m", "vllm", 10, 5, 2), [RepeatRecord(0, "served", 0.0, 4.5, [a, b])]))


def test_tails_of_every_latency_by_hand():
    """Per-token ITL sorted 0.1 0.1 0.1 0.2 0.5 0.5 1.0 2.0 (n = 8): p95 at 6.65 → 1.0 + 0.65 × 1.0 = 1.65, p99.9 at
    6.993 → 1.993.  Per-chunk ITL 0.2 0.3 0.5 0.5 1.0 2.0 (n = 6): p95 at 4.75 → 1.75, p99.9 at 4.995 → 1.995.
    E2EL 1.5 4.5: p95 1.5 + 0.95 × 3 = 4.35, p99.9 1.5 + 0.999 × 3 = 4.497.  TTFT 0.5 1.0: 0.975, 0.9995.
    TPOT 0.125 1.0: 0.125 + 0.95 × 0.875 = 0.95625, 0.125 + 0.999 × 0.875 = 0.999125."""
    t = _point().tails_s
    assert t["itl"] == pytest.approx({"p95": 1.65, "p99_9": 1.993})
    assert t["itl_chunk"] == pytest.approx({"p95": 1.75, "p99_9": 1.995})
    assert t["e2el"] == pytest.approx({"p95": 4.35, "p99_9": 4.497})
    assert t["ttft"] == pytest.approx({"p95": 0.975, "p99_9": 0.9995})
    assert t["tpot"] == pytest.approx({"p95": 0.95625, "p99_9": 0.999125})


def test_show_json_and_table_carry_itl_and_e2el_tails():
    s = _point()
    doc = build_show({"run_id": "tiny"}, [s.as_dict()], {"points": [], "models": []})
    p = doc["points"][0]
    assert p["tails_s"]["itl"] == pytest.approx({"p95": 1.65, "p99_9": 1.993})
    assert p["tails_s"]["itl_chunk"] == pytest.approx({"p95": 1.75, "p99_9": 1.995})
    assert p["tails_s"]["e2el"] == pytest.approx({"p95": 4.35, "p99_9": 4.497})
    assert set(p["itl_s"]) == {"p50", "p90", "p99", "mean"}  # the contract's fields stay as they were
    lines = format_table(doc).splitlines()
    header = next(line for line in lines if line.startswith("model"))
    row = next(line for line in lines if line.startswith("m "))
    got = dict(zip(re.split(r"\s{2,}", header.strip()), re.split(r"\s{2,}", row.strip())))
    assert (got["ITL p95 ms"], got["ITL p99.9 ms"]) == ("1650.0", "1993.0")
    assert (got["E2EL p95 ms"], got["E2EL p99.9 ms"]) == ("4350.0", "4497.0")
    assert (got["TPOT p95 ms"], got["TPOT p99.9 ms"]) == ("956.2", "999.1")


def test_a_summary_written_before_tails_shows_ttft_and_tpot_from_samples_and_no_itl():
    """An older summaries.json (no ``tails_s``): TTFT and TPOT from the per-request samples as before, ITL and
    E2EL unknown (null, ``-`` in the table): never a figure the file cannot support."""
    old = _point().as_dict()
    del old["tails_s"]
    p = build_show({"run_id": "old"}, [old], {"points": [], "models": []})["points"][0]
    assert p["tails_s"]["tpot"] == pytest.approx({"p95": 0.95625, "p99_9": 0.999125})
    assert p["tails_s"]["itl"] is None and p["tails_s"]["e2el"] is None
    assert PointSummary.from_dict(_point().as_dict()).tails_s == _point().tails_s


def test_an_imported_vllm_result_keeps_the_tails_its_file_states(tmp_path):
    """``vllm bench serve --metric-percentiles 95,99.9 --save-result`` writes ``p95_itl_ms`` and ``p99.9_itl_ms``
    (``calculate_metrics``: ``p{int(p) if int(p) == p else p}_{metric}_ms``); the import keeps them (ms → s), vLLM's
    ITL as the per-chunk one, and a metric the file does not state stays null in ``show --json``."""
    from pipeline.importers.vllm_result import point_from_result

    d = {"backend": "vllm", "model_id": "m", "max_concurrency": 4, "request_rate": "inf", "completed": 8, "failed": 0,
         "total_input_tokens": 256, "total_output_tokens": 256, "duration": 4.0, "output_throughput": 64.0,
         "median_ttft_ms": 50.0, "median_tpot_ms": 20.0, "median_itl_ms": 19.0, "median_e2el_ms": 700.0,
         "p95_itl_ms": 31.0, "p99.9_itl_ms": 44.0, "p95_e2el_ms": 810.0, "p99.9_e2el_ms": 905.0}
    s = point_from_result(tmp_path / "r.json", d, "m", "vllm")
    assert s.tails_s["itl_chunk"] == pytest.approx({"p95": 0.031, "p99_9": 0.044})
    assert s.tails_s["e2el"] == pytest.approx({"p95": 0.810, "p99_9": 0.905})
    assert s.tails_s["ttft"] is None and "itl" not in s.tails_s
    p = build_show({"run_id": "imp"}, [s.as_dict()], {"points": [], "models": []})["points"][0]
    assert p["tails_s"]["itl_chunk"] == pytest.approx({"p95": 0.031, "p99_9": 0.044})
    assert p["tails_s"]["itl"] is None and p["tails_s"]["ttft"] is None
