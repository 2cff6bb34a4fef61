"""Every stored file of a run is typed and versioned.

Files without ``schema_version`` (the model cards of the earliest runs) are version 1 and
load unchanged; a newer version is refused in one line naming the file; older versions are
brought forward by the model's ``updates`` (asv's ``update_to_N``).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pipeline.store import derivedfiles, pointfiles, runs, schemas
from pipeline.core.errors import BatchmarkError
from pipeline.cards.modelcards import ModelCard
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey, PointRecords

# a run as written before schema version 3 (the committed run of that id before `batchmark upgrade`)
COMMITTED = Path(__file__).resolve().parents[3] / "tests" / "data" / "runs-v1" / "20261129T161329Z-vm"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    dst = tmp_path / COMMITTED.name
    shutil.copytree(COMMITTED, dst)
    return dst


def _files(run_dir: Path) -> dict[str, Path]:
    return {"run.json": run_dir / "run.json", "summaries.json": run_dir / "summaries.json",
            "analysis.json": run_dir / "analysis.json",
            "point": sorted((run_dir / "points").glob("*/*.json"))[0],
            "card": sorted((run_dir / "models").glob("*.json"))[0]}


def test_a_committed_run_loads_its_unversioned_cards_as_version_1(run: Path):
    card_file = _files(run)["card"]
    stored = json.loads(card_file.read_text())
    assert "schema_version" not in stored  # cards written before they were versioned carry none
    cards = runs.load_model_cards(run)
    # version 1 -> 2: the weights' label, stored twice ("dtype" and "quantization"), reads once
    assert stored["dtype"] == stored["quantization"] == "float32"
    assert cards[stored["name"]] == {k: v for k, v in stored.items() if k != "dtype"}
    assert schemas.version_of(card_file, stored) == 1
    stored_analysis = json.loads((run / "analysis.json").read_text())
    assert schemas.version_of("analysis.json", stored_analysis) == 1
    # version 1 -> 2: the hardware block's *_measured (the probe's figures) read as *_probed
    renamed_hw = {k.replace("_measured", "_probed"): v for k, v in stored_analysis["hardware"].items()}
    assert renamed_hw["bandwidth_gb_s_probed"] == stored_analysis["hardware"]["bandwidth_gb_s_measured"] is not None
    # version 3 -> 4: every point and model says its variant, default (written before variants)
    assert derivedfiles.read_analysis(run) == {**stored_analysis, "schema_version": schemas.AnalysisFile.current, "hardware": renamed_hw,
                                       "points": [schemas.with_variant(p) for p in stored_analysis["points"]],
                                       "models": [schemas.with_variant(m) for m in stored_analysis["models"]]}
    stored_points = json.loads((run / "summaries.json").read_text())["points"]
    assert [{k: s.as_dict()[k] for k in d} for s, d in zip(derivedfiles.read_summaries(run), stored_points)] == stored_points
    point = _files(run)["point"]
    stored = json.loads(point.read_text())
    assert schemas.version_of(point, stored) == 1 and all("kind" in r for r in stored["repeats"])
    # version 1 -> 2: each repeat's "kind" is read as "batching", every other field as stored
    renamed = {**stored, "repeats": [{("batching" if k == "kind" else k): v for k, v in r.items()}
                                     for r in stored["repeats"]]}
    loaded = pointfiles.load_point(point)
    assert loaded == PointRecords.from_dict(renamed)
    assert [r.batching for r in loaded.repeats] == [r["kind"] for r in stored["repeats"]] != []


def test_analysis_update_to_2_renames_the_probed_figures_only():
    old = {"schema_version": 1, "hardware": {"name": "cpu", "bandwidth_gb_s_measured": 12.5, "peak_tflops_measured": None,
                                             "bandwidth_gb_s_spec": None}, "models": [], "points": [{"mbu_probed": 0.4}]}
    new = schemas.migrate(schemas.AnalysisFile, "analysis.json", old)
    assert new == {"schema_version": schemas.AnalysisFile.current, "hardware": {"name": "cpu", "bandwidth_gb_s_probed": 12.5, "peak_tflops_probed": None,
                                                     "bandwidth_gb_s_spec": None}, "models": [],
                   "points": [{"mbu_probed": 0.4, "variant": "default"}]}


def test_point_records_update_to_2_renames_kind_only():
    old = {"schema_version": 1, "point": {"model": "m", "engine": "vllm", "input_len": 1, "output_len": 2,
                                          "concurrency": 1},
           "repeats": [{"repeat": 0, "kind": "served", "window_start_s": 0.0}], "meta": {"kind": "kept"}}
    new = schemas.migrate(schemas.PointRecordsFile, "p.json", old)
    # 2 -> 3 moves the requests to a Parquet file, which only `upgrade` writes: in memory the mapping is kept
    assert new == {"schema_version": schemas.PointRecordsFile.current, "point": schemas.with_variant(old["point"]), "meta": {"kind": "kept"},
                   "repeats": [{"repeat": 0, "batching": "served", "window_start_s": 0.0}]}
    assert schemas.migrate(schemas.PointRecordsFile, "p.json", new) == new  # current: unchanged


@pytest.mark.parametrize("kind", ["run.json", "summaries.json", "analysis.json", "point", "card"])
def test_a_newer_schema_version_is_refused_in_one_line_naming_the_file(run: Path, kind: str):
    path = _files(run)[kind]
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    readers = {"run.json": lambda: runs.read_run_json(run), "summaries.json": lambda: derivedfiles.read_summaries(run),
               "analysis.json": lambda: derivedfiles.read_analysis(run), "point": lambda: pointfiles.load_point(path),
               "card": lambda: runs.load_model_cards(run)}
    with pytest.raises(BatchmarkError) as exc:
        readers[kind]()
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg and "schema_version 99 is newer" in msg


def test_a_malformed_field_is_named(run: Path):
    path = _files(run)["point"]
    data = json.loads(path.read_text())
    data["point"]["concurrency"] = "many"
    path.write_text(json.dumps(data))
    with pytest.raises(BatchmarkError, match=r"point\.concurrency"):
        pointfiles.load_point(path)
    (run / "summaries.json").write_text('{"schema_version": 1, "points": {}}')
    with pytest.raises(BatchmarkError, match=r"summaries\.json: points"):
        derivedfiles.read_summaries(run)
    (run / "analysis.json").write_text('{"schema_version": "2"}')
    with pytest.raises(BatchmarkError, match="not a version number"):
        derivedfiles.read_analysis(run)


class _CardV3(schemas.ModelCardFile):
    """A card format two versions on: v2 renamed ``layers`` to ``num_layers``, v3 nested ``extra``."""

    current: ClassVar[int] = 3

    @staticmethod
    def _to_2(d: dict[str, Any]) -> dict[str, Any]:
        d["num_layers"] = d.pop("layers")
        return d

    @staticmethod
    def _to_3(d: dict[str, Any]) -> dict[str, Any]:
        d.setdefault("extra", {})
        return d

    updates: ClassVar[dict] = {2: _to_2, 3: _to_3}


def test_older_versions_are_migrated_step_by_step():
    old = {"name": "m", "layers": 4}
    assert schemas.migrate(_CardV3, "models/m.json", old) == {"schema_version": 3, "name": "m", "num_layers": 4,
                                                                "extra": {}}
    assert old == {"name": "m", "layers": 4}  # the caller's mapping is left alone
    two = {"schema_version": 2, "name": "m", "num_layers": 4}
    assert schemas.migrate(_CardV3, "x", two)["schema_version"] == 3
    assert schemas.migrate(_CardV3, "x", {"schema_version": 3, "name": "m"}) == {"schema_version": 3, "name": "m"}


def test_card_label_stored_twice_in_version_1_is_read_once():
    """version 1 cards carried one label twice (``dtype`` and ``quantization``, equal in every committed run:
    20261130T010035Z-vm's cards hold ``bfloat16`` in both); version 2 keeps ``quantization`` alone, and a card whose
    ``quantization`` is missing or null reads ``dtype``'s value as it."""
    both = {"name": "m", "dtype": "bfloat16", "quantization": "bfloat16", "num_layers": 8}
    assert schemas.migrate(schemas.ModelCardFile, "models/m.json", both) == {
        "schema_version": 2, "name": "m", "quantization": "bfloat16", "num_layers": 8}
    assert schemas.migrate(schemas.ModelCardFile, "m", {"name": "m", "dtype": "float32", "quantization": None}) == {
        "schema_version": 2, "name": "m", "quantization": "float32"}
    assert schemas.migrate(schemas.ModelCardFile, "m", {"name": "m"}) == {"schema_version": 2, "name": "m"}
    assert "dtype" not in ModelCard.__dataclass_fields__


def test_point_summary_from_dict_tolerates_an_added_field(run: Path):
    d = json.loads((run / "summaries.json").read_text())["points"][0]
    assert PointSummary.from_dict({**d, "goodput_tok_s": 12.5}) == PointSummary.from_dict(d)


def test_model_card_from_dict_warns_of_an_unknown_key_and_names_the_file(run: Path):
    d = next(iter(runs.load_model_cards(run).values()))
    with pytest.warns(UserWarning, match=r"models/x\.json: unknown model card key\(s\) left out: num_kv_head"):
        card = ModelCard.from_dict({**d, "num_kv_head": 2}, source="models/x.json")
    assert card == ModelCard.from_dict(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ModelCard.from_dict(d)  # a known card: no warning


def test_new_files_are_written_with_their_schema_version(tmp_path: Path):
    runs.create_run(tmp_path / "r", {"source": "measured"})
    runs.write_model_card(tmp_path / "r", {"name": "m", "kind": "dense"})
    assert json.loads(runs.model_card_path(tmp_path / "r", "m").read_text())["schema_version"] == 2
    assert runs.load_model_cards(tmp_path / "r") == {"m": {"name": "m", "kind": "dense"}}


def test_machine_paths_are_made_relative_to_the_repository():
    """committed runs carry no machine path; runs written before record them, and their upgrade drops the
    machine's part of every path into the repository (the run of 20261130 recorded /tmp/fresh-main/… paths)."""
    r = schemas.repo_relative_text
    assert r("/work/main/pipeline/__main__.py sweep --config config/default.yaml") == \
        "pipeline/__main__.py sweep --config config/default.yaml"
    assert r("/tmp/fresh-main/data/model-folders/m-4e82") == "data/model-folders/m-4e82"
    assert r("/usr/bin/python3 /home/u/proj/pipeline/__main__.py --config /home/u/proj/config/x.yaml") == \
        "/usr/bin/python3 pipeline/__main__.py --config config/x.yaml"  # a path outside any repository folder stays
    assert r("openai/gpt-oss-20b") == "openai/gpt-oss-20b" and r(None) is None
    old = {"schema_version": 1, "command": "/tmp/x/pipeline/__main__.py sweep", "config_path": "/tmp/x/config/a.yaml",
           "engine": {"server_env": {"python": "/tmp/x/.venv-vllm/bin/python", "version": "0.32.0"},
                      "servers": {"m": {"command": "/tmp/x/.venv-vllm/bin/python -m vllm", "port": 1}}}}
    assert schemas.migrate(schemas.RunFile, "run.json", old) == {
        "schema_version": schemas.RunFile.current, "command": "pipeline/__main__.py sweep", "config_path": "config/a.yaml",
        "server": {"server_env": {"python": ".venv-vllm/bin/python", "version": "0.32.0"},
                   "servers": {"m": {"command": ".venv-vllm/bin/python -m vllm", "port": 1}}},
        "variants": [{"name": "default", "baseline": True, "settings": {}}]}
    point = {"schema_version": 2, "point": {"model": "m", "engine": "vllm", "input_len": 1, "output_len": 2, "concurrency": 1},
             "repeats": [], "meta": {"tokenizer": "/tmp/fresh-main/data/model-folders/m-4e82", "seed": 3}}
    assert schemas.migrate(schemas.PointRecordsFile, "p.json", point)["meta"] == \
        {"tokenizer": "data/model-folders/m-4e82", "seed": 3}


def test_names_with_one_meaning_each_issue_25():
    """the stored files of a run written before say (1) an open-loop point's cap as ``concurrency``,
    (2) a point's caveats as ``flags`` / ``flagged_concurrency`` ("flagged" is the quality verdict), (3) the SLO's
    per-request goodput limit and its p99 bound as one key ``ttft_p99_ms``; each is read under its own name, every
    value as stored (the values here are those of run 20261202T030252Z-vm: an SLO of 2000 ms TTFT and 100 ms TPOT)."""
    open_key = {"model": "m", "engine": "vllm", "input_len": 64, "output_len": 32, "concurrency": 16, "load": "poisson",
                "rate_rps": 2.5}
    closed_key = {"model": "m", "engine": "vllm", "input_len": 64, "output_len": 32, "concurrency": 8}
    # point files, version 3 -> 4: the cap moves; a closed point's key is unchanged
    for key, want in ((open_key, {**open_key, "concurrency": None, "max_concurrency": 16}), (closed_key, closed_key)):
        pt = schemas.migrate(schemas.PointRecordsFile, "p.json", {"schema_version": 3, "point": key, "repeats": []})
        assert pt["point"] == schemas.with_variant(want) and PointKey(**pt["point"]).slug().endswith(("poisson-r2.5-c16", "-c8"))
    # summaries, version 1 -> 2
    slo = {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 100.0, "e2el_p99_ms": None, "good": 3, "met": True}
    old = {"schema_version": 1, "points": [{**open_key, "flags": {"usage_missing": 2}, "slo": slo},
                                           {**closed_key, "flags": {}, "slo": None}]}
    new = schemas.migrate(schemas.SummariesFile, "summaries.json", old)["points"]
    assert new[0] == {**schemas.with_variant(open_key), "concurrency": None, "caveats": {"usage_missing": 2},
                      "slo": {"goodput_ttft_ms": 2000.0, "ttft_p99_max_ms": 2000.0, "goodput_tpot_ms": 100.0,
                              "tpot_p99_max_ms": 100.0, "goodput_e2el_ms": None, "e2el_p99_max_ms": None,
                              "good": 3, "met": True}, "max_concurrency": 16}
    assert new[1] == {**schemas.with_variant(closed_key), "caveats": {}, "slo": None, "max_concurrency": None}
    assert PointSummary.from_dict({**new[0], "repeats": 1, "completed": 3, "failed": 0, "output_throughput_tok_s": None,
                                   "per_user_tok_s": None, "ttft_s": None, "ttft_with_queue_s": None, "tpot_s": None,
                                   "itl_s": None, "e2el_s": None, "prefill_throughput_tok_s": None,
                                   "step_time_s": None}).key == PointKey(**{**open_key, "concurrency": None}, max_concurrency=16)
    # analysis, version 2 -> 3
    old = {"schema_version": 2, "points": [{**open_key, "flags": ["usage_missing"], "mbu": None}],
           "models": [{"model": "m", "flagged_concurrency": [4], "excluded_concurrency": []}]}
    new = schemas.migrate(schemas.AnalysisFile, "analysis.json", old)
    assert new["points"] == [{**schemas.with_variant(open_key), "concurrency": None, "caveats": ["usage_missing"], "mbu": None,
                              "max_concurrency": 16}]
    assert new["models"] == [{"model": "m", "caveat_concurrency": [4], "excluded_concurrency": [], "variant": "default"}]
    # run.json, version 2 -> 3: the config's SLO
    run = schemas.migrate(schemas.RunFile, "run.json", {"schema_version": 2, "config": {"slo": {
        "ttft_p99_ms": 2000.0, "tpot_p99_ms": 100.0, "e2el_p99_ms": None}, "repeats": 5}})
    assert run["config"] == {"slo": {"goodput_ttft_ms": 2000.0, "ttft_p99_max_ms": 2000.0, "goodput_tpot_ms": 100.0,
                                     "tpot_p99_max_ms": 100.0, "goodput_e2el_ms": None, "e2el_p99_max_ms": None},
                             "repeats": 5}
