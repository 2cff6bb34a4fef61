"""A measured run names no folder of the machine that measured it (fault kind: the measuring machine's paths in a published run).

Regression (fault kind: machine paths in published runs): every point's metadata recorded the tokenizer as an
absolute path (a user's home or temporary folder), the stored server logs carried the server environment's and
the model folders' absolute paths, and the run's command named the config by its absolute path.  Runs are
committed and published.  Here a real sweep (the ``vllm`` engine starting ``fake_vllm_server.py``, a test double
of ``vllm serve`` that prints its home cache, temporary folder and environment paths to its log, as vLLM does)
is measured into a scratch project, with the config given by absolute path and tokenizers inside and outside
the project; no file of the run (``run.json`` outside the config as the user wrote it, points, server logs)
holds the project's, the temporary folder's, the home folder's or the environment's absolute path.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import pytest
from tests.integration.served_helpers import FAKE_SERVER, build_tokenizer

from pipeline.store import pointfiles, runs
from pipeline.sweep import gridwalk as sweep
from pipeline.config.sweepconfig import parse_config
from pipeline.machine.hardware import ProbeResult

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def no_probe(monkeypatch):
    # the hardware probe is not under test here; it costs seconds on a CPU
    fake = ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1)
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: fake)


@pytest.mark.parametrize("inside", [True, False], ids=["tokenizer-in-project", "tokenizer-in-temp"])
def test_a_measured_run_holds_no_machine_path(scratch_root, tmp_path, monkeypatch, inside):
    tok = (scratch_root / "data" / "tok") if inside else (tmp_path / "tok")
    build_tokenizer(tok)
    cfg_dict = {
        "name": "paths", "hardware": "dgx-spark", "backend": "vllm", "input_len": 16, "output_len": 8,
        "concurrency": [1, 2], "repeats": 1, "stop_after_weak_doublings": 0,
        "vllm": {"command": f"{sys.executable} {FAKE_SERVER} --host {{host}} --port {{port}} "
                            "--served-model-name {served_name} --mode healthy",
                 "tokenizer": str(tok), "requests_per_point": 4, "stop_grace_s": 5},
        "models": [{"name": "m1", "served_name": "m1"}]}
    cfg_path = scratch_root / "config" / "paths.yaml"
    cfg_path.write_text(json.dumps(cfg_dict))
    monkeypatch.setattr(sys, "argv", ["batchmark", "sweep", "--config", str(cfg_path)])  # the command recorded
    run_dir = sweep.run_sweep(parse_config(cfg_dict), scratch_root / "data" / "runs" / "20260101T000000Z-p",
                              config_path=str(cfg_path), progress=False, log=lambda m: None)
    assert runs.is_complete(run_dir)

    meta = runs.read_run_json(run_dir)
    assert meta["config_path"] == "config/paths.yaml" and meta["command"].endswith("--config config/paths.yaml")
    (point,) = pointfiles.load_points(run_dir)[:1]
    assert point.meta["tokenizer"] == ("data/tok" if inside else f"<tmp>/{tok.relative_to(tempfile.gettempdir())}")
    log = (run_dir / meta["server"]["servers"]["m1"]["log"]).read_text()
    assert "fake-vllm: cache ~/.cache/vllm" in log and "<tmp>/vllm_dist_0123abcd" in log and "<venv>/lib/x.py" in log

    machine = {"project": str(scratch_root), "temp": tempfile.gettempdir() + "/", "home": os.path.expanduser("~") + "/",
               "environment": sys.prefix, "checkout": str(FAKE_SERVER.parents[2]) + "/"}
    texts = {str(p.relative_to(run_dir)): p.read_text(errors="replace") for p in run_dir.rglob("*") if p.is_file()}
    texts["run.json"] = json.dumps({k: v for k, v in meta.items() if k != "config"})  # the config: as the user wrote it
    found = [(name, what) for name, text in texts.items() for what, path in machine.items() if path in text]
    assert found == []
