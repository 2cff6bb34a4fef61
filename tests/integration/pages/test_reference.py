"""The committed runs' JSON against the committed schemas (``docs/reference/*.schema.json``, read as a reader reads
them, with ``jsonschema``): every committed run's ``show --json``, a diff of two of them and their ``predict --json``.
The committed runs are found by ``git ls-files`` (a process, so not a unit test).

The fault kind: a schema that no longer describes what the commands print (the schema is generated from the models,
and every test's documents are checked against the models: this checks the committed files themselves).  The other
reference pages are checked in tests/unit/pages/test_reference.py (regenerate all with
``python -m tests.unit.pages.test_reference``).
"""

from __future__ import annotations

import json

import pytest

from tests.unit.pages.test_reference import REFERENCE, committed_run_dirs

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (pip install -e '.[test]')")


def _validator(name: str):
    schema = json.loads((REFERENCE / f"{name}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _errors(name: str, doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:300] for e in _validator(name).iter_errors(doc)]


def test_every_committed_runs_show_json_keeps_the_committed_schema():
    from pipeline.views.show import show_run

    runs = committed_run_dirs()
    assert len(runs) >= 5  # the repository's committed runs (measured, simulated, vLLM)
    for rd in runs:
        doc = json.loads(json.dumps(show_run(rd)))
        assert _errors("show", doc) == [], rd.name
    broken = json.loads(json.dumps(show_run(runs[0])))
    broken["points"][0]["output_throughput_tok_s"] = "fast"
    assert any("output_throughput_tok_s" in e for e in _errors("show", broken))  # the check can fail


def test_a_diff_and_predict_of_committed_runs_keep_their_schemas():
    from pipeline.analysis.stages import load_run
    from pipeline.diff.rundiff import diff_runs
    from pipeline.views.predict import predict_run

    a, b = committed_run_dirs()[:2]
    diff = json.loads(json.dumps(diff_runs(load_run(a), load_run(b)).as_dict()))
    assert diff["changes"] and _errors("diff", diff) == []
    pred = json.loads(json.dumps(predict_run(a)))
    assert pred["models"] and _errors("predict", pred) == []
