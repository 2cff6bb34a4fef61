"""``pipeline.api.load_run``: a committed run read typed and checked, its figures the ones its files hold (read back
with the json module here), and a run it cannot read refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.api import Run, load_run
from pipeline.core.errors import BatchmarkError
from pipeline.core.pointsummary import PointSummary
from pipeline.store.schemas import AnalysisFile, RunFile

REPO = Path(__file__).resolve().parents[3]
RUN = REPO / "data" / "runs" / "20261129T161329Z-vm"


@pytest.fixture(scope="module")
def run() -> Run:
    if not RUN.is_dir():
        pytest.skip(f"{RUN} is not in this checkout")
    return load_run(RUN)


def test_the_run_is_typed_and_holds_what_its_files_hold(run):
    meta = json.loads((RUN / "run.json").read_text())
    stored = json.loads((RUN / "summaries.json").read_text())["points"]
    analysis = json.loads((RUN / "analysis.json").read_text())
    assert isinstance(run.run, RunFile) and run.run_id == meta["run_id"] == RUN.name
    assert run.run.status == "complete" and run.run.model_extra["host"] == meta["host"]
    assert all(isinstance(s, PointSummary) for s in run.summaries) and len(run.summaries) == len(stored)
    assert [s.output_throughput_tok_s for s in run.summaries] == [p["output_throughput_tok_s"] for p in stored]
    assert isinstance(run.analysis, AnalysisFile)
    assert [m.knee_concurrency for m in run.analysis.models] == [m["knee_concurrency"] for m in analysis["models"]]
    assert [k.concurrency for k in run.points] == [p["concurrency"] for p in stored]


def test_show_is_the_contracts_model_of_show_json(run):
    from pipeline.views.show import show_run

    doc = run.show()
    assert doc.model_dump(mode="json", exclude_unset=True) == json.loads(json.dumps(show_run(RUN)))


def test_an_unknown_run_is_one_line_naming_it(tmp_path):
    with pytest.raises(BatchmarkError, match="unknown run") as err:
        load_run(tmp_path / "nope")
    assert "\n" not in str(err.value)
