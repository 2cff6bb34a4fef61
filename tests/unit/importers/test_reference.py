"""The reference stage (``batchmark reference``): the shared reference file → a stored, versioned run under data/reference/.

What needs the reference file itself skips and says so when ``../shared/reference/`` is absent (the
``reference_file`` fixture); a missing or foreign file is refused in one line either way.
"""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from pipeline.importers.reference import REFERENCE_RUN_ID, import_reference, reference_run_dir
from pipeline.store.schemas import RunFile
from pipeline.analysis.stages import load_run


def test_missing_reference_file_is_one_line(scratch_root, capsys):
    with pytest.raises(BatchmarkError, match=r"nowhere\.md: reference file not found"):
        import_reference(scratch_root / "nowhere.md")
    assert main(["reference", str(scratch_root / "nowhere.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere.md: reference file not found" in err
    assert not reference_run_dir().exists()


def test_foreign_file_leaves_no_half_reference(scratch_root):
    bad = scratch_root / "not-a-table.md"
    bad.write_text("# no batched-bench table here\n", encoding="utf-8")
    with pytest.raises(BatchmarkError, match="not-a-table.md"):
        import_reference(bad)
    assert not reference_run_dir().exists()
    assert not list(reference_run_dir().parent.glob("*.tmp"))  # the scratch folder is gone too


def test_reference_is_stored_versioned_and_replaced(reference_file, scratch_root):
    out = import_reference(reference_file)
    assert out == reference_run_dir() and out.name == REFERENCE_RUN_ID
    meta = json.loads((out / "run.json").read_text())
    assert meta["source"] == "imported:llama-batched-bench" and meta["run_id"] == REFERENCE_RUN_ID
    assert meta["schema_version"] == RunFile.current
    first = load_run(out)
    # a second import replaces the first (derived data), atomically: same points, no leftovers beside it
    assert import_reference(reference_file) == out
    again = load_run(out)
    assert [s.output_throughput_tok_s for s in again.summaries] == [s.output_throughput_tok_s for s in first.summaries]
    assert sorted(p.name for p in out.parent.iterdir()) == [REFERENCE_RUN_ID]
