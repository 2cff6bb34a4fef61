"""Each request's drawn lengths in its point's Parquet record: kept through a round trip, and a record file written
before the columns existed loads unchanged (its drawn lengths None)."""

from __future__ import annotations

import pyarrow.parquet as pq

from pipeline.core import arrays
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord
from pipeline.store import columnar
from tests.conftest import REPO

OLD = REPO / "data" / "runs" / "20261202T073413Z-vm" / "points" / "dense-llama-190m" / "vllm-max-num-seqs-8-in64-out32-c16.parquet"


def _records(drawn: bool) -> PointRecords:
    reqs = [RequestRecord(i, 0.0, 0.1 * i, 0.2 + i, 0.3 + i, [[0.2 + i, 1], [0.3 + i, 2]], 40 + i, 3,
                          drawn_input_len=40 + i if drawn else None, drawn_output_len=7 - i if drawn else None)
            for i in range(3)]
    return PointRecords(PointKey("m", "vllm", 64, 8, 1), [RepeatRecord(0, "served", 0.0, 4.0, reqs)])


def test_drawn_lengths_survive_the_parquet_file(tmp_path):
    """Fault kind: a per-request drawn length lost (or a None turned into a number) on its way to disk and back.

    By hand: requests 0, 1, 2 drew prompts of 40, 41, 42 tokens and outputs of 7, 6, 5; a fixed workload's are None."""
    for drawn in (True, False):
        rec = _records(drawn)
        path = tmp_path / f"{drawn}.parquet"
        columnar.write_parquet(path, arrays.from_records(rec))
        back = arrays.to_records(columnar.read_parquet(path, rec.point, [RepeatRecord(0, "served", 0.0, 4.0, [])], {}))
        got = [(q.drawn_input_len, q.drawn_output_len) for q in back.repeats[0].requests]
        assert got == ([(40, 7), (41, 6), (42, 5)] if drawn else [(None, None)] * 3)
        assert back.repeats[0].requests == rec.repeats[0].requests


def test_a_record_file_written_before_drawn_lengths_loads_unchanged():
    """Fault kind: a new column that makes every stored run unreadable ("column missing").

    A committed run's file lacks both columns: it reads with every drawn length None and its other columns as
    stored (its input_tokens, column for column)."""
    table = pq.read_table(OLD)
    assert "drawn_input_len" not in table.column_names
    point = PointKey("dense-llama-190m", "vllm", 64, 32, 16, variant="max-num-seqs-8")
    n_repeats = int(max(table.column("repeat").to_pylist())) + 1
    got = columnar.from_table(table, point, [RepeatRecord(r, "served", 0.0, 1.0, []) for r in range(n_repeats)], {})
    assert (got.requests.drawn_input_len == -1).all() and (got.requests.drawn_output_len == -1).all()
    assert got.requests.input_tokens.tolist() == table.column("input_tokens").to_pylist()
    assert all(q.drawn_input_len is None for rep in arrays.to_records(got).repeats for q in rep.requests)
