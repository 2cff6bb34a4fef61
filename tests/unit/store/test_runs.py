"""Run folder: ids, atomic writes, immutability, corrupt files."""

from datetime import datetime, timezone

import pytest

from pipeline.store import pointfiles, runs
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord


def test_run_id_format():
    when = datetime(2026, 11, 29, 15, 4, 5, tzinfo=timezone.utc)
    assert runs.new_run_id(when, "spark.local") == "20261129T150405Z-spark"


def _point(c=1):
    req = RequestRecord(0, 0.0, 0.0, 0.1, 0.3, [[0.1, 1], [0.2, 1], [0.3, 1]], 4, 3)
    return PointRecords(PointKey("m", "transformers", 4, 3, c),
                        [RepeatRecord(0, "static_batch", 0.1, 0.3, [req], 0.0, [0.1, 0.2, 0.3])])


def test_complete_run_is_immutable(tmp_path):
    rd = tmp_path / "r1"
    runs.create_run(rd, {"source": "measured"})
    runs.write_point(rd, _point(1))
    with pytest.raises(BatchmarkError, match="never overwritten"):
        runs.write_point(rd, _point(1))
    runs.complete_run(rd)
    assert runs.is_complete(rd)
    with pytest.raises(BatchmarkError, match="immutable"):
        runs.write_point(rd, _point(2))
    with pytest.raises(BatchmarkError, match="already exists"):
        runs.create_run(rd, {"source": "measured"})
    assert [p.point.concurrency for p in pointfiles.load_points(rd)] == [1]


def test_corrupt_point_file_is_named(tmp_path):
    rd = tmp_path / "r2"
    runs.create_run(rd, {"source": "measured"})
    path = runs.write_point(rd, _point(1))
    path.write_text(path.read_text()[:40])
    with pytest.raises(BatchmarkError) as err:
        pointfiles.load_points(rd)
    assert str(path) in str(err.value) and "corrupt JSON" in str(err.value)


def test_unknown_run_is_named(tmp_path):
    with pytest.raises(BatchmarkError, match="unknown run 'nope'"):
        runs.resolve_run("nope", tmp_path)


def test_atomic_write_leaves_no_temp_files(tmp_path):
    runs.atomic_write_json(tmp_path / "a.json", {"x": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
