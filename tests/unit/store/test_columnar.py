"""Columnar records: a point's requests as Parquet and as numpy arrays, and summaries from the arrays.

- Lossless: records written as Parquet read back equal, every time bit for bit, None kept apart
  from a value, every odd case (failed and warm-up requests, zero-token and multi-token chunks,
  hidden tokens, open-loop lags, flags) included; the file is plain Parquet that pyarrow reads
  without batchmark.
- The array formulas give what the per-request functions of ``pipeline.metrics.summarize`` give, value for
  value (``itl_values``, ``tpot_s``, ``ttft_s``, ``repeat_output_throughput``, ``send_rate``,
  ``achieved_rate``, ``slo_goodput``, ``point_caveats``), on randomly drawn records.
- A bad record file is one line naming it.
"""

from __future__ import annotations

import importlib
import json
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.core import arrays
from pipeline.metrics import arrayforms, goodput, registry, summarize as metrics, definitions as requestmetrics
from pipeline.store import pointfiles, runs, schemas
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord


def _request(rng: random.Random, i: int, open_loop: bool) -> RequestRecord:
    sent = rng.uniform(0, 5)
    kind = rng.random()
    if kind < 0.1:  # failed before any token
        return RequestRecord(i, sent - rng.uniform(0, 0.1), sent, None, None, [], 64, 0, usage_reported=False,
                             error=rng.choice(["timeout", "HTTP 500", "not sent: cancelled"]),
                             warmup=rng.random() < 0.2, lag_s=rng.uniform(0, 0.01) if open_loop else None,
                             scheduled_s=sent if open_loop else None)
    t = sent + rng.uniform(0.01, 0.5)
    chunks = [[t, rng.choice([0, 1, 1, 3])]]
    for _ in range(rng.randint(0, 40)):
        t += rng.choice([0.0, rng.uniform(0.001, 0.05)])
        chunks.append([t, rng.choice([0, 1, 1, 1, 2, 5])])
    streamed = sum(int(k) for _, k in chunks)
    hidden = rng.choice([0, 0, 0, 4])
    return RequestRecord(
        i, sent - rng.uniform(0, 0.1), sent, chunks[0][0], t, chunks, rng.randint(1, 200), streamed + hidden,
        usage_reported=rng.random() < 0.8, error="stream cut" if kind < 0.15 else None, warmup=rng.random() < 0.1,
        first_content_s=chunks[0][0] + 0.01 if rng.random() < 0.5 else None, hidden_tokens=hidden,
        token_count_source=rng.choice([None, "usage", "chunk_count"]),
        token_count_reason=rng.choice([None, "server usage"]),
        token_count_flags=rng.choice([[], [], ["usage_below_chunks"], ["a", "b"]]),
        scheduled_s=sent - 0.001 if open_loop else None, lag_s=rng.uniform(0, 0.02) if open_loop else None)


def _point(seed: int, load: str = "closed", batching: str = "served") -> PointRecords:
    rng = random.Random(seed)
    open_loop = load != "closed"
    # up to 30 requests a repeat, each up to 41 chunks of up to 5 tokens: c = 32 (a cap of 32 in the open loop) and
    # output_len 128 hold them as a real point could (pipeline.store.recordcheck refuses more in flight, or tokens)
    key = PointKey("m/odd name", "vllm", 64, 128, None if open_loop else 32, load, 2.5 if open_loop else None,
                   32 if open_loop else None)
    reps = []
    for r in range(rng.randint(1, 3)):
        reqs = [_request(rng, i, open_loop) for i in range(rng.randint(0, 30))]
        steps = sorted(rng.uniform(0, 3) for _ in range(5)) if batching == "static_batch" else None
        reps.append(RepeatRecord(r, batching, 0.1, rng.choice([0.1, 5.0]), reqs,
                                 prefill_start_s=0.05 if steps else None, step_end_s=steps,
                                 server_metrics={"before": {"vllm:num_preemptions_total": 1.0}}))
    return PointRecords(key, reps, meta={"seed": seed, "interference": {"cpu": 0.1}})


POINTS = [_point(s, load, b) for s in range(12) for load, b in
          (("closed", "served"), ("poisson", "served"), ("closed", "static_batch"))]


@pytest.mark.parametrize("pt", POINTS[:9])
def test_records_survive_parquet_bit_for_bit(tmp_path: Path, pt: PointRecords):
    (tmp_path / "run").mkdir()
    path = runs.write_point(tmp_path / "run", pt)
    assert pointfiles.load_point(path) == pt  # dataclass equality: every field, every chunk, None kept None
    back = pointfiles.load_point_arrays(path).requests
    mine = arrays.from_records(pt).requests
    for name in ("sent_s", "queued_s", "first_token_s", "done_s", "lag_s", "chunk_t_s"):
        # bit for bit: the same float64 bytes (NaN where None), not merely close
        assert getattr(back, name).tobytes() == getattr(mine, name).tobytes(), name
    header = json.loads(path.read_text())
    assert header["schema_version"] == schemas.PointRecordsFile.current and header["requests_file"] == pointfiles.requests_path(path).name
    assert all("requests" not in rep for rep in header["repeats"])


def test_the_parquet_file_is_plain_parquet(tmp_path: Path):
    pt = POINTS[0]
    (tmp_path / "run").mkdir()
    path = runs.write_point(tmp_path / "run", pt)
    table = pq.read_table(pointfiles.requests_path(path))  # no batchmark needed to read it
    reqs = [r for rep in pt.repeats for r in rep.requests]
    assert table.num_rows == len(reqs)
    assert table.column("sent_s").to_pylist() == [r.sent_s for r in reqs]
    assert table.column("first_token_s").to_pylist() == [r.first_token_s for r in reqs]  # None is a null
    assert table.column("chunk_t_s").to_pylist() == [[c[0] for c in r.chunks] for r in reqs]
    assert table.column("chunk_tokens").to_pylist() == [[int(c[1]) for c in r.chunks] for r in reqs]


@pytest.mark.parametrize("pt", POINTS)
def test_array_formulas_equal_the_per_request_ones(pt: PointRecords):
    a = arrays.from_records(pt).requests
    reqs = [r for rep in pt.repeats for r in rep.requests]
    ok = a.ok
    assert ok.tolist() == [r.ok for r in reqs]
    assert metrics.itl_array(a, ok).tolist() == [v for r in reqs if r.ok for v in requestmetrics.itl_values(r)]
    tp = arrayforms.tpot_array(a)
    assert [None if np.isnan(v) else v for v in tp[ok].tolist()] == [requestmetrics.tpot_s(r) for r in reqs if r.ok]
    ts = arrayforms.tpot_streamed_array(a)
    assert [None if np.isnan(v) else v for v in ts[ok].tolist()] == [requestmetrics.tpot_streamed_s(r) for r in reqs if r.ok]
    assert metrics.itl_chunk_array(a, ok).tolist() == [v for r in reqs if r.ok for v in requestmetrics.itl_chunk_values(r)]

    slo = {"goodput_ttft_ms": 300.0, "goodput_tpot_ms": 20.0, "ttft_p99_max_ms": 250.0, "e2el_p99_max_ms": 900.0}
    s = metrics.summarize_point(pt, slo)
    measured = [r for r in reqs if not r.warmup]
    good = [r for r in measured if r.ok]
    assert s.completed == len(good) and s.failed == len(measured) - len(good)
    assert s.slo == goodput.slo_goodput(pt, slo)
    assert (s.caveats, s.token_count_sources) == requestmetrics.point_caveats(measured)
    thr = [v for v in map(requestmetrics.repeat_output_throughput, pt.repeats) if v is not None]
    assert s.samples["output_throughput_tok_s"] == thr
    assert s.samples["ttft_s"] == [requestmetrics.ttft_s(r) for r in good]
    assert s.samples["tpot_s"] == [t for t in map(requestmetrics.tpot_s, good) if t is not None]
    if pt.repeats[0].batching == "served":
        assert s.duration_s == metrics._med([requestmetrics.repeat_duration_s(rep) for rep in pt.repeats])
        assert s.steady_output_throughput_tok_s == metrics._med([requestmetrics.repeat_steady_throughput(rep) for rep in pt.repeats])
    if pt.point.open_loop:
        assert s.send_rate_rps == metrics._med([requestmetrics.send_rate(rep) for rep in pt.repeats])
        assert s.achieved_rate_rps == metrics._med([requestmetrics.achieved_rate(rep) for rep in pt.repeats])
        assert s.schedule_rate_rps == metrics._med([requestmetrics.schedule_rate(rep) for rep in pt.repeats])
        assert s.schedule_rate_rps is not None
    if pt.repeats[0].batching == "static_batch":
        assert s.prefill_throughput_tok_s == metrics._med([requestmetrics.repeat_prefill_throughput(rep) for rep in pt.repeats])


def test_a_bad_requests_file_is_named(tmp_path: Path):
    (tmp_path / "run").mkdir()
    path = runs.write_point(tmp_path / "run", POINTS[0])
    pq_path = pointfiles.requests_path(path)
    pq_path.write_bytes(b"not parquet at all")
    with pytest.raises(BatchmarkError, match=r"\.parquet: not a readable Parquet file") as exc:
        pointfiles.load_point_arrays(path)
    assert "\n" not in str(exc.value)
    pq_path.unlink()
    with pytest.raises(BatchmarkError, match=r"\.parquet: file not found"):
        pointfiles.load_point(path)
    header = json.loads(path.read_text())
    path.write_text(json.dumps({**header, "requests_file": "../../run.json"}))
    with pytest.raises(BatchmarkError, match="is not a file name beside it"):
        pointfiles.load_point(path)


def test_a_point_left_half_written_is_measured_again(tmp_path: Path):
    """A writer killed between the two files leaves a Parquet file without its JSON: the point counts as not
    measured, and writing it again replaces the orphan."""
    run = tmp_path / "run"
    run.mkdir()
    pt = POINTS[1]
    orphan = pointfiles.requests_path(pointfiles.point_path(run, pt.point))
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"left by a killed writer")
    assert not runs.has_point(run, pt.point)
    path = runs.write_point(run, pt)
    assert pointfiles.load_point(path) == pt
    with pytest.raises(BatchmarkError, match="never overwritten"):
        runs.write_point(run, pt)


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


#: The registry's per-request metrics: an array form over a point's rows and a reference form over one record.
PER_REQUEST = [m for m in registry.METRICS if m.reference and m.computed_by.endswith("_array")]


@pytest.mark.parametrize("m", PER_REQUEST, ids=lambda m: m.name)
@pytest.mark.parametrize("pt", POINTS)
def test_every_per_request_array_form_is_its_reference_form(pt: PointRecords, m):
    """Each metric's array form (the registry's ``computed_by``) against its reference form over the records
    (``reference``, pipeline.metrics.definitions), value for value over the finished requests: a row's value (NaN for
    None) of a per-row form (``arrayforms``), or the concatenated values of a per-read form (``reads``: a request
    with none, such as a TTST whose second token came in the first read, gives none)."""
    a = arrays.from_records(pt).requests
    ok_reqs = [r for rep in pt.repeats for r in rep.requests if r.ok]
    array_form, reference = _resolve(m.computed_by), _resolve(m.reference)
    if m.computed_by.startswith("pipeline.metrics.reads."):
        want = []
        for r in ok_reqs:
            v = reference(r)
            want.extend(v if isinstance(v, list) else [] if v is None else [v])
        assert array_form(a, a.ok).tolist() == want
    else:
        got = array_form(a)[a.ok].tolist()
        assert [None if np.isnan(v) else v for v in got] == [reference(r) for r in ok_reqs]
    assert len(PER_REQUEST) >= 7  # TTFT, TPOT, streamed TPOT, E2EL, ITL, chunk ITL, TTST
