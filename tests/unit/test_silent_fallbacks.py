"""Silent fallbacks made visible.

- A served model whose card cannot be counted from its config: the reason is recorded (it becomes
  ``models_without_card`` in the engine's provenance, ``run.json``), not swallowed.
- The provenance says how the load generator sent: "closed loop", and the open loop where the
  config has one (it said "closed loop" for open-loop runs).
- The vLLM engine has no ``__del__``: the sweep stops its server explicitly.
- A run whose ``run.json`` cannot be read is named (``is_complete`` raises, ``list_runs`` says why it
  left it out), and a config pointer that cannot be read is an error, never a fresh run.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pipeline.config.sweepconfig import load_config
from pipeline.backends import served, vllm

REPO = Path(__file__).resolve().parents[2]


def test_a_card_that_cannot_be_counted_says_why():
    reasons: dict[str, str] = {}
    from pipeline.core import paths

    missing = paths.root() / "data" / "no-such-model-folder"  # inside the project: recorded relative to it
    missing.mkdir(exist_ok=True)  # a local folder without a config.json: transformers raises (ValueError today)
    try:
        assert served.card_from_config(str(missing), "m", reasons) is None
    finally:
        missing.rmdir()
    assert set(reasons) == {"m"}
    assert reasons["m"].startswith("no card file, and counting one from data/no-such-model-folder's config failed (")
    assert "Error: " in reasons["m"] and "MBU" in reasons["m"] and str(paths.root()) not in reasons["m"]
    assert "\n" not in reasons["m"]


def test_the_provenance_names_the_open_loop():
    spark = load_config(REPO / "config" / "spark.yaml")  # a concurrency grid, then Poisson rates without a cap
    assert spark.open_loop is not None
    text = served.ServedBackend.client_description(SimpleNamespace(cfg=spark))
    assert text == "batchmark loadgen (its own HTTP/1.1 reader, orjson), closed loop, then open loop (poisson arrivals, no cap)"
    closed = load_config(REPO / "config" / "vllm-cpu.yaml")
    assert closed.open_loop is None
    assert served.ServedBackend.client_description(SimpleNamespace(cfg=closed)) == \
        "batchmark loadgen (its own HTTP/1.1 reader, orjson), closed loop"


def test_the_vllm_server_is_not_left_to_garbage_collection():
    assert "__del__" not in vars(vllm.VLLMBackend)
    src = (REPO / "pipeline" / "sweep" / "gridwalk.py").read_text(encoding="utf-8")
    finally_block = src[src.rindex("    finally:\n        display.close()"):]
    # every variant's engine (one server each) is unloaded there, through the sweep's Cells
    assert "cells.unload()" in finally_block.split("\n    log(")[0]
    cells_unload = src[src.index("    def unload(self) -> None:"):].split("\n\n")[0]
    assert "for eng in self.engines.values():" in cells_unload and "eng.unload()" in cells_unload


def _run(runs_dir: Path, run_id: str, status: str = "complete") -> Path:
    from pipeline.store import runs

    rd = runs_dir / run_id
    rd.mkdir(parents=True)
    runs.atomic_write_json(rd / "run.json", runs.run_json(run_id, status, {"config_digest": "d1"}))
    return rd


def test_an_unreadable_run_is_named_not_silently_incomplete(tmp_path: Path, capsys):
    import json

    import pytest

    from pipeline.store import runs
    from pipeline.core.errors import BatchmarkError

    good = _run(tmp_path, "r1")
    newer = _run(tmp_path, "r2")
    newer.joinpath("run.json").write_text(json.dumps({"schema_version": 99, "status": "complete"}))
    corrupt = _run(tmp_path, "r3")
    corrupt.joinpath("run.json").write_text("{not json")
    with pytest.raises(BatchmarkError, match=r"r2/run\.json: schema_version 99 is newer"):
        runs.is_complete(newer)  # was: False, so the run vanished from every list
    assert runs.list_runs(tmp_path) == [good]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("batchmark: warning: run r2 left out: ") and "r3" in err[1]
    unreadable: list = []
    assert runs.list_runs(tmp_path, unreadable=unreadable) == [good]
    assert [p.name for p, _ in unreadable] == ["r2", "r3"] and "corrupt JSON" in unreadable[1][1]
    assert capsys.readouterr().err == ""


def test_a_bad_config_pointer_is_an_error_not_a_fresh_run(tmp_path: Path):
    import pytest

    from pipeline.sweep import parts
    from pipeline.core.errors import BatchmarkError

    _run(tmp_path, "20261129T000000Z-a", status="incomplete")
    parts.write_pointer("cfg", "20261129T000000Z-a", runs_dir=tmp_path)
    assert parts.run_id_for_config("cfg", "d1", runs_dir=tmp_path) == "20261129T000000Z-a"  # resumed
    assert parts.run_id_for_config("cfg", "d2", runs_dir=tmp_path) != "20261129T000000Z-a"  # another config: new run
    ptr = parts.pointer_path("cfg", tmp_path)
    for bad, why in (("{oops", "corrupt JSON"), ('{"run_id": "../x"}', "not a valid run id"), ("[]", "no run_id")):
        ptr.write_text(bad)
        with pytest.raises(BatchmarkError) as exc:
            parts.run_id_for_config("cfg", "d1", runs_dir=tmp_path)
        assert str(ptr) in str(exc.value) and why in str(exc.value) and "--fresh" in str(exc.value)
        assert parts.run_id_for_config("cfg", "d1", runs_dir=tmp_path, fresh=True)  # the remedy works
    parts.write_pointer("cfg", "20261129T000000Z-a", runs_dir=tmp_path)
    (tmp_path / "20261129T000000Z-a" / "run.json").write_text("{oops")
    with pytest.raises(BatchmarkError, match=r"corrupt JSON .*the run .* points to.*--fresh"):
        parts.run_id_for_config("cfg", "d1", runs_dir=tmp_path)
