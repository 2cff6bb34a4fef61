"""Impossible records refused where they are read, whatever wrote them (:mod:`pipeline.store.recordcheck`).

Fault kind: a record file edited or written by another tool whose values cannot be a measurement was summarised
as a clean point (negative token counts gave −2117 tok/s, a request done before it was sent a TTFT of −2 s, a
million overlapping requests at c = 2 gave 498k tok/s, ``done_s`` = inf put NaN and Infinity into
``summaries.json``, which RFC 8259 §6 does not allow, https://www.rfc-editor.org/rfc/rfc8259#section-6, and a
null in an int64 column became INT64_MIN, −2^63, pyarrow's conversion of a null through NumPy).  The right
value of every case is the refusal: one line naming the file, the request and the field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.atomicfiles import atomic_write_json
from pipeline.core.errors import BatchmarkError
from pipeline.store import pointfiles, recordcheck, runs
from tests import runbuilder as rb


def _point(tmp_path: Path, concurrency: int = 2, requests: int = 4) -> tuple[Path, Path]:
    """A served point at ``concurrency`` (waves of ``concurrency`` back to back: never more in flight); its JSON
    and its Parquet file."""
    (tmp_path / "run").mkdir(exist_ok=True)
    path = runs.write_point(tmp_path / "run", rb.served_point_records("m", concurrency, (1.0,), requests))
    return path, pointfiles.requests_path(path)


def _edit(parquet: Path, column: str, row: int, value, type_=None) -> None:
    table = pq.read_table(parquet)
    values = table.column(column).to_pylist()
    values[row] = value
    field = table.schema.field(column)
    col = pa.array(values, type=type_ or field.type)
    schema = table.schema.set(table.schema.get_field_index(column), pa.field(column, col.type, nullable=True))
    pq.write_table(table.set_column(table.schema.get_field_index(column), pa.field(column, col.type), col)
                   .cast(schema), parquet)


def _refused(json_path: Path) -> str:
    with pytest.raises(BatchmarkError) as exc:
        pointfiles.load_point_arrays(json_path)
    msg = str(exc.value)
    assert "\n" not in msg and ".parquet" in msg
    return msg


def test_a_valid_point_reads(tmp_path):
    path, _ = _point(tmp_path)
    assert len(pointfiles.load_point_arrays(path).requests) == 4


@pytest.mark.parametrize("column,value,says", [
    ("output_tokens", -5, "output_tokens = -5: a count below zero"),
    ("input_tokens", -1, "input_tokens = -1: a count below zero"),
    ("done_s", float("inf"), "done_s = inf: not a finite time"),
    ("sent_s", float("nan"), "sent_s = nan: not a finite time"),
    ("done_s", -2.0, "done_s = -2.0 is before"),
    ("first_token_s", -1.0, "first_token_s = -1.0 is before sent_s"),
    ("output_tokens", 33, "output_tokens = 33: over 2 × the point's output_len 16"),
])
def test_an_impossible_value_is_refused_naming_the_field(tmp_path, column, value, says):
    """output_len is :data:`tests.runbuilder.OUTPUT_LEN` = 16: 2 × 16 = 32 tokens still pass, 33 do not."""
    path, parquet = _point(tmp_path)
    _edit(parquet, column, 1, value)
    msg = _refused(path)
    assert says in msg and "request 1 (row 1)" in msg


def test_thirty_two_output_tokens_at_output_len_16_still_read(tmp_path):
    path, parquet = _point(tmp_path)
    _edit(parquet, "output_tokens", 1, 32)
    assert int(pointfiles.load_point_arrays(path).requests.output_tokens[1]) == 32


def test_a_null_in_an_integer_column_is_refused_not_int64_min(tmp_path):
    path, parquet = _point(tmp_path)
    _edit(parquet, "output_tokens", 2, None)
    assert "column 'output_tokens' is null in row 2" in _refused(path)


def test_more_requests_in_flight_than_the_concurrency_is_refused(tmp_path):
    """At c = 2 in waves of 2, 4 requests are at most 2 in flight; sending request 2 at 0 (with the first wave)
    puts 3 in flight at once."""
    path, parquet = _point(tmp_path, concurrency=2, requests=4)
    _edit(parquet, "queued_s", 2, 0.0)
    _edit(parquet, "sent_s", 2, 0.0)
    assert "repeat 0 has 3 requests in flight at once" in _refused(path)


def test_in_flight_max_is_half_open():
    """[0, 1) and [1, 2): one slot (the next is sent when the first is done); [0, 1.5) and [1, 2): two."""
    assert recordcheck.in_flight_max(np.array([0.0, 1.0]), np.array([1.0, 2.0])) == 1
    assert recordcheck.in_flight_max(np.array([0.0, 1.0]), np.array([1.5, 2.0])) == 2


def test_a_non_finite_number_is_never_written_as_json(tmp_path):
    """``json.dumps`` writes NaN and Infinity by default; no JSON parser of RFC 8259 reads them."""
    with pytest.raises(BatchmarkError, match="summaries.json: a value is not a finite number"):
        atomic_write_json(tmp_path / "summaries.json", {"points": [{"tpot_s": float("inf")}]})
    assert not (tmp_path / "summaries.json").exists()


def test_a_point_with_no_measured_request_gets_a_note():
    """A point with 0 completed and 0 failed requests was an all-dash row with no note."""
    from pipeline.views.showtable import point_note

    note = point_note({"completed": 0, "failed": 0, "caveats": []})
    assert note.startswith("NOTHING MEASURED")
    assert point_note({"completed": 3, "failed": 0, "caveats": []}) == ""
