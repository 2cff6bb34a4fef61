"""The published JSON contracts (pipeline.core.contracts and the four models): a document that breaks one is refused,
naming the field, and one that keeps it passes.  The fault kinds these pin: a key added to or renamed in ``show --json``
without its contract (a reader's parser breaks silently), a figure written as a string, a figure a source cannot
supply written as anything but null."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from pipeline.core import contracts
from pipeline.views.showcontract import ShowDocument

REPO = __import__("pathlib").Path(__file__).resolve().parents[3]
RUN = REPO / "data" / "runs" / "20261129T161329Z-vm"  # a committed transformers run: 14 points, one model


@pytest.fixture(scope="module")
def show_doc():
    from pipeline.views.show import show_run

    if not RUN.is_dir():
        pytest.skip(f"{RUN} is not in this checkout")
    return show_run(RUN)


def test_a_committed_runs_show_document_keeps_its_contract(show_doc):
    doc = contracts.validate(ShowDocument, show_doc)
    assert len(doc.points) == 14 and doc.points[0].concurrency == 1  # the run's grid, read from its points.json
    assert doc.points[0].ttft_s is not None and doc.points[0].ttft_s.p50 == show_doc["points"][0]["ttft_s"]["p50"]


def test_a_key_the_contract_does_not_name_is_refused(show_doc):
    bad = copy.deepcopy(show_doc)
    bad["points"][0]["ttft_p50_ms"] = 114.8
    with pytest.raises(ValidationError, match=r"points\.0\.ttft_p50_ms"):
        contracts.validate(ShowDocument, bad)


def test_a_figure_written_as_a_string_is_refused(show_doc):
    bad = copy.deepcopy(show_doc)
    bad["points"][0]["ttft_s"]["p50"] = "0.1148"
    with pytest.raises(ValidationError, match=r"points\.0\.ttft_s\.p50"):
        contracts.validate(ShowDocument, bad)


def test_a_missing_key_is_refused_and_null_is_a_figure_not_supplied(show_doc):
    bad = copy.deepcopy(show_doc)
    del bad["models"][0]["knee_concurrency"]
    with pytest.raises(ValidationError, match=r"models\.0\.knee_concurrency"):
        contracts.validate(ShowDocument, bad)
    ok = copy.deepcopy(show_doc)
    ok["points"][0]["mbu"] = None  # an import that states no bandwidth: MBU unknown, never invented
    ok["hardware"]["bandwidth_gb_s_measured"] = None
    assert contracts.validate(ShowDocument, ok).points[0].mbu is None


def test_the_check_runs_only_where_it_is_asked_for(show_doc, monkeypatch):
    bad = {**show_doc, "surprise": 1}
    monkeypatch.delenv(contracts.CHECK_ENV, raising=False)
    assert contracts.checked(ShowDocument, bad) is bad  # a user's command never fails on its own output
    monkeypatch.setenv(contracts.CHECK_ENV, "1")
    with pytest.raises(ValidationError, match="surprise"):
        contracts.checked(ShowDocument, bad)


@pytest.mark.parametrize("name", ["show", "diff", "plan", "predict"])
def test_every_schema_has_its_id_version_and_described_closed_fields(name):
    from pipeline.pages.reference import contract_schema

    schema = contract_schema(name)
    assert schema["$id"] == f"docs/reference/{name}.schema.json" and schema["version"] >= 1
    assert schema["additionalProperties"] is False
    for key, prop in schema["properties"].items():
        assert prop.get("description"), f"{name}: {key} has no description"
