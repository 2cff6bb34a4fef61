"""The ``vllm`` engine's server life cycle, without a GPU, against a stand-in executable.

``fake_vllm_server.py`` (a test double, not vLLM) imitates a healthy start, a server that
never becomes healthy, one that exits before it is healthy, and a crash in the middle of a
point.  Expected behaviour comes from the module docstring of
``pipeline/backends/vllm.py``: a clear one-line error carrying the log tail, a crashed point
stored as failed, the sweep moving on to the next model, nothing measured before lost.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from tests.integration.served_helpers import FAKE_SERVER, build_tokenizer

from pipeline.store import pointfiles, runs
from pipeline.sweep import gridwalk as sweep
from pipeline.config.sweepconfig import parse_config
from pipeline.backends import get_backend
from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import ProbeResult
from pipeline.metrics.summarize import summarize_point

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    build_tokenizer(d)
    return d


@pytest.fixture(autouse=True)
def no_probe(monkeypatch):
    # the hardware probe is not under test here; it costs seconds on a CPU
    fake = ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1)
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: fake)


def _cfg(tok_dir, tmp_path, mode_args: str, models: list[str], **vllm):
    cmd = (f"{sys.executable} {FAKE_SERVER} --host {{host}} --port {{port}} --served-model-name {{served_name}} "
           f"--seed {{seed}} --max-num-seqs {{max_num_seqs}} --pid-file {tmp_path}/{{served_name}}.pid {mode_args}")
    return parse_config({
        "name": "fake", "hardware": "dgx-spark", "backend": "vllm", "input_len": 16, "output_len": 8,
        "concurrency": [1, 2, 4], "repeats": 1, "stop_after_weak_doublings": 0,
        "vllm": {"command": cmd, "tokenizer": str(tok_dir), "requests_per_point": 4, "stop_grace_s": 5, **vllm},
        "models": [{"name": m, "path": f"/models/{m}", "served_name": m} for m in models]})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_healthy_start_measure_and_clean_stop(tok_dir, tmp_path):
    cfg = _cfg(tok_dir, tmp_path, "--mode healthy", ["m1"])
    run_dir = sweep.run_sweep(cfg, tmp_path / "run", progress=False, log=lambda m: None)
    assert runs.is_complete(run_dir)
    meta = runs.read_run_json(run_dir)
    server = meta["server"]["servers"]["m1"]
    assert server["server_version"] == "0.0.0-fake"  # from the double's /version
    assert f"--port {server['port']}" in server["command"] and "--max-num-seqs 4" in server["command"]
    assert meta["server"]["gpu_memory_utilization"] == 0.85  # from data/hardware/dgx-spark.yaml
    log = (run_dir / server["log"]).read_text()
    assert "fake-vllm: starting" in log
    assert "fake-vllm: stopped" in log  # SIGINT → the double's graceful exit, no SIGKILL needed
    pid = int((tmp_path / "m1.pid").read_text())
    assert not _alive(pid)
    points = pointfiles.load_points(run_dir)
    assert [p.point.concurrency for p in points] == [1, 2, 4]
    for p in points:
        s = summarize_point(p)
        assert s.failed == 0 and s.completed == 4  # requests_per_point
        sm = p.repeats[0].server_metrics
        assert sm["before"]["vllm:num_requests_running"] == 0
        assert sm["after"]["vllm:request_success_total"] > sm["before"]["vllm:request_success_total"]


def test_never_healthy_times_out_with_log_tail(tok_dir, tmp_path):
    cfg = _cfg(tok_dir, tmp_path, "--mode never", ["m1"], health_timeout_s=2)
    engine = get_backend(cfg)
    with pytest.raises(BatchmarkError) as err:
        engine.load(cfg.models[0])
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("vllm.health_timeout_s: server for m1 not healthy after 2 s")
    assert "fake-vllm: loading weights (never finishes)" in msg  # the tail of the server log
    assert not _alive(int((tmp_path / "m1.pid").read_text()))


def test_exit_before_healthy_names_the_code(tok_dir, tmp_path):
    cfg = _cfg(tok_dir, tmp_path, "", ["m1"])
    cfg = cfg.model_copy(update={"vllm": cfg.vllm.model_copy(update={
        "command": f"{sys.executable} -c \"print('no GPU found'); raise SystemExit(2)\""})})
    with pytest.raises(BatchmarkError, match=r"models.m1: server exited with code 2 before it was healthy.*no GPU found"):
        get_backend(cfg).load(cfg.models[0])


def test_crash_mid_point_is_stored_failed_and_the_sweep_moves_on(tok_dir, tmp_path):
    # requests to the crashing server: 1 feature probe, c=1: 1 warm-up + 4 measured (2..6),
    # c=2: 2 warm-up + 4 measured + cool-down (7..) → request 9 dies mid-stream, inside c=2.
    cfg = _cfg(tok_dir, tmp_path, "--mode crash --crash-at 9 --crash-model crashy", ["crashy", "m2"])
    run_dir = sweep.run_sweep(cfg, tmp_path / "run", progress=False, log=lambda m: None)
    assert runs.is_complete(run_dir)
    by = {(p.point.model, p.point.concurrency): p for p in pointfiles.load_points(run_dir)}
    assert set(by) == {("crashy", 1), ("crashy", 2), ("m2", 1), ("m2", 2), ("m2", 4)}
    before = summarize_point(by[("crashy", 1)])
    assert before.failed == 0 and before.completed == 4  # measured before the crash: kept
    crashed = by[("crashy", 2)]
    s = summarize_point(crashed)
    assert s.failed > 0 and s.completed + s.failed == 4
    assert crashed.meta["server_crashed"] == "server exited with code 3"
    assert "CUDA error: an illegal memory access" in crashed.meta["server_log_tail"]
    meta = json.loads((run_dir / "run.json").read_text())
    assert "server exited with code 3" in meta["stopped"]["crashy"]
    for c in (1, 2, 4):
        assert summarize_point(by[("m2", c)]).failed == 0
