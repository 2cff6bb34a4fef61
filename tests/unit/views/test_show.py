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


def _cells(lines: list[str], header_start: str, row_start: str) -> dict[str, str]:
    """The cells of the first row starting ``row_start`` under the first header starting ``header_start``, by column."""
    at = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    row = next(line for line in lines[at + 1:] if line.startswith(row_start))
    return dict(zip(re.split(r"\s{2,}", lines[at].strip()), re.split(r"\s{2,}", row.strip())))


def test_table_shows_each_figure_with_its_interval_and_the_client_and_stream_table():
    """:func:`tests.runbuilder.three_repeat_served_point` (three repeats, g = 10, 20, 30 ms), the half-width
    t(0.975, 2) · s / √3 = 4.302653 / √3 · s = 2.484138 · s worked by hand:

    - output throughput per repeat: 4 tokens / (0.1 + 4g) = 28.571, 22.222, 18.182 tok/s, median 22.2; s = 5.2374
      → ±13.0;
    - TTFT 100 ms in every repeat: s = 0 → ±0.0; TPOT (4g / 3) 13.3, 26.7, 40.0 ms, median 26.7; s = 13.33 → ±33.1;
    - ITL p50 of 10 10 20 | 20 20 40 | 30 30 60 ms = 20.0, the repeats' medians 10, 20, 30: s = 10 → ±24.8;
      E2EL 140, 180, 220 ms: 180.0, s = 40 → ±99.4;
    - client: in flight 1.0 ±0.2 (s = 0.1), CPU 30 ±25 % (s = 10 %), delivered 10.0 ±5.0 tok/s (s = 2),
      TTST 20.0 ±24.8 ms, 1.00 token a chunk, 4.0 chunks a request; no read wait, connect or first byte kept (-)."""
    from tests.runbuilder import three_repeat_served_point

    s = summarize_point(three_repeat_served_point())
    doc = build_show({"run_id": "ci"}, [s.as_dict()], {"points": [], "models": []})
    lines = format_table(doc).splitlines()
    got = _cells(lines, "model", "m ")
    assert got["out tok/s"] == "22.2 ±13.0"
    assert (got["TTFT p50 ms"], got["TPOT p50 ms"]) == ("100.0 ±0.0", "26.7 ±33.1")
    assert (got["ITL p50 ms"], got["E2EL p50 ms"]) == ("20.0 ±24.8", "180.0 ±99.4")
    assert got["TTFT p99 ms"] == "100.0"  # no interval on a figure not tested per repeat here
    client = _cells(lines[lines.index("client and stream:"):], "model", "m ")
    assert client == {"model": "m", "c": "1", "in flight": "1.0 ±0.2", "client CPU %": "30 ±25", "read wait ms": "-",
                      "delivered tok/s": "10.0 ±5.0", "connect p50 ms": "-", "first byte p50 ms": "-",
                      "TTST p50 ms": "20.0 ±24.8", "tok/chunk": "1.00", "chunks/req": "4.0"}
    assert any(line.startswith("± is half the 95 % confidence interval") for line in lines)


def test_one_repeat_or_an_in_process_point_shows_no_interval_and_no_client_table():
    """One repeat has no spread (no ci95): no ±, no note.  :func:`_point` has no client block but streamed chunks,
    so the second table shows its stream's figures and dashes for the client's; a point with neither (an import)
    has no second table."""
    s = _point()  # one served repeat, no client blocks
    lines = format_table(build_show({"run_id": "one"}, [s.as_dict()], {"points": [], "models": []})).splitlines()
    assert not any("±" in line for line in lines)
    client = _cells(lines[lines.index("client and stream:"):], "model", "m ")
    assert client["in flight"] == "-" and client["tok/chunk"] == "1.25"  # 5 + 5 tokens over 3 + 5 chunks (A, B)
    imported = {**s.as_dict(), "ttst_s": None, "tokens_per_chunk": None, "chunks_per_request": None,
                "itl_unresolved_share": None}
    text = format_table(build_show({"run_id": "imp"}, [imported], {"points": [], "models": []}))
    assert "client and stream:" not in text
