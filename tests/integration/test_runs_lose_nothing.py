"""Runs that lose nothing: a tuning sweep killed, stopped by its disk, or losing a variant's server, then resumed.

- ``kill -9`` of a variants × shapes sweep, and of an adaptive sweep walking the frontier, then ``sweep --resume``:
  exactly an uninterrupted run's points and figures (``show --json`` points and models, equal field for field);
- a full or read-only run store while a point is written: the sweep stops with one line naming the point file,
  and ``--resume`` gives the uninterrupted run whole;
- a variant's server killed mid-point: that point is stored failed with the server's crash, the variant's later
  points are not run, the next variant is measured whole.

The two kinds of sweep run on the simulated server (virtual time, each point seeded by its key: an uninterrupted
run is the reference, reproducible point for point); the server crash on ``fake_vllm_server.py``, a stand-in
executable started as the ``vllm`` backend starts vLLM.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import cli
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # whole sweeps, each twice (~10-60 s a test on two shared cores)

SPACE = """name: sim-space
hardware: dgx-spark
backend: simulated
workloads:
  - {{input_len: 128, output_len: 16}}
  - {{input_len: 1024, output_len: 16}}
concurrency: [1, 2, 4, 8, 16, 32, 64]
repeats: 2
{adaptive}simulated:
  step_time_cv: 0.02
variants:
  - name: variant-a
  - name: variant-b
    kv_cache_dtype: fp8
models:
  - name: llama-3.1-8b-instruct
    card: Llama-3.1-8B
"""
GRID = SPACE.format(adaptive="")
ADAPTIVE = SPACE.format(adaptive="adaptive:\n  tolerance: 0.10\n")


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def figures(run_id: str) -> dict:
    """A run's points and models as ``show --json`` gives them (the run id left out: the runs differ by it)."""
    rc, out, err = run_cli("show", run_id, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    return {"points": doc["points"], "models": doc["models"]}


def stored(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in (run / "points").rglob("*") if p.is_file())


def uninterrupted(root: Path, config: Path, run_id: str) -> dict:
    rc, _, err = run_cli("sweep", "--config", str(config), "--run-id", run_id, "--no-progress")
    assert rc == 0, err
    return figures(run_id)


def killed_after(root: Path, config: Path, run_id: str, points: int) -> Path:
    """A real ``batchmark sweep`` process, SIGKILLed once ``points`` point files are stored; its run folder."""
    run = root / "data" / "runs" / run_id
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "sweep", "--config", str(config), "--run-id", run_id,
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO), "BATCHMARK_ROOT": str(root)})
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if (run / "points").is_dir() and len(list((run / "points").rglob("*.json"))) >= points:
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"the sweep ended before it was killed: {proc.stderr.read().decode()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert json.loads((run / "run.json").read_text()).get("status") != "complete"
    return run


@pytest.mark.parametrize("config", [GRID, ADAPTIVE], ids=["variants x shapes", "adaptive frontier"])
def test_a_killed_tuning_sweep_resumes_to_the_uninterrupted_run(scratch_root, config):
    """Fault kind: points lost or measured twice by ``kill -9`` of a sweep over variants and shapes (the grid, and
    the adaptive walk whose frontier points depend on what was measured before the kill).  The resume must measure
    the missing points only, keep every stored file as it was, and end with the uninterrupted run's figures."""
    path = scratch_root / "config" / "space.yaml"
    path.write_text(config)
    whole = uninterrupted(scratch_root, path, "20261203T000000Z-whole")
    run = killed_after(scratch_root, path, "20261203T000000Z-kill", points=4)
    before = {f: (run / f).read_bytes() for f in stored(run)}
    assert before
    rc, _, err = run_cli("sweep", "--config", str(path), "--resume", run.name, "--no-progress")
    assert rc == 0, err
    assert {f: (run / f).read_bytes() for f in before} == before  # nothing stored was rewritten
    assert stored(run) == stored(scratch_root / "data" / "runs" / "20261203T000000Z-whole")
    assert figures(run.name) == whole
    points = [f for f in stored(run) if f.endswith(".json")]
    assert len(whole["points"]) == len(points) > 4  # every stored point shown, some measured after the kill
    assert {p.get("variant") for p in whole["points"]} == {"variant-a", "variant-b"}
    assert {(p["input_len"], p["output_len"]) for p in whole["points"]} == {(128, 16), (1024, 16)}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS], ids=["full", "read-only"])
def test_a_full_or_read_only_store_stops_in_one_line_and_resumes_whole(scratch_root, monkeypatch, code):
    """Fault kind: a traceback, or a partial point, when the run store refuses a write mid-sweep.  The 6th point's
    records hit a full (ENOSPC) or read-only (EROFS) file system: the sweep ends with one line naming that point's
    file (exit 2); the store freed, ``--resume`` measures the rest, and the run is the uninterrupted one."""
    from pipeline.store import runs

    path = scratch_root / "config" / "space.yaml"
    path.write_text(GRID)
    whole = uninterrupted(scratch_root, path, "20261203T000000Z-whole")
    real, calls = runs.write_requests, []

    def refusing(point_file, arrays):
        calls.append(point_file)
        if len(calls) == 6:
            raise OSError(code, os.strerror(code))
        return real(point_file, arrays)

    monkeypatch.setattr(runs, "write_requests", refusing)
    rc, _, err = run_cli("sweep", "--config", str(path), "--run-id", "20261203T000000Z-disk", "--no-progress")
    assert rc == 2
    last = err.strip().splitlines()[-1]
    assert last == f"batchmark: error: {calls[5]}: {os.strerror(code)} (nothing partial was written)", err[-2000:]
    run = scratch_root / "data" / "runs" / "20261203T000000Z-disk"
    assert len(list((run / "points").rglob("*.json"))) == 5 and not any(run.rglob("*.tmp"))
    monkeypatch.setattr(runs, "write_requests", real)
    rc, _, err = run_cli("sweep", "--config", str(path), "--resume", run.name, "--no-progress")
    assert rc == 0, err
    assert figures(run.name) == whole


def test_a_variants_server_killed_mid_point_fails_that_point_and_the_next_variant_is_whole(tmp_path, monkeypatch):
    """Fault kind: a lost point or a lost variant when a variant's server dies.  Variant ``crashy``'s server exits
    (code 3, as a CUDA error ends vLLM) at its 9th request: 1 feature probe, c = 1's 1 warm-up + 4 measured
    (requests 2–6), c = 2's 2 warm-up + 4 measured from request 7, so inside c = 2.  Its c = 1 is kept whole, its
    c = 2 stored failed with the crash, its c = 4 not run (the reason in ``run.json``); variant ``steady``'s
    server is started anew and all three of its points are measured whole."""
    from pipeline.config.sweepconfig import parse_config
    from pipeline.machine.hardware import ProbeResult
    from pipeline.metrics.summarize import summarize_point
    from pipeline.store import pointfiles, runs
    from pipeline.sweep import gridwalk
    from tests.integration.served_helpers import FAKE_SERVER, build_tokenizer

    fake = ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1)
    monkeypatch.setattr(gridwalk, "probe", lambda *a, **k: fake)  # the probe is not under test
    build_tokenizer(tmp_path / "tok")
    cmd = (f"{sys.executable} {FAKE_SERVER} --host {{host}} --port {{port}} --served-model-name {{served_name}} "
           f"--seed {{seed}} --max-num-seqs {{max_num_seqs}} --pid-file {tmp_path}/{{served_name}}.pid")
    cfg = parse_config({
        "name": "fake", "hardware": "dgx-spark", "backend": "vllm", "input_len": 16, "output_len": 8,
        "concurrency": [1, 2, 4], "repeats": 1, "stop_after_weak_doublings": 0,
        "vllm": {"command": cmd, "tokenizer": str(tmp_path / "tok"), "requests_per_point": 4, "stop_grace_s": 5},
        "variants": [{"name": "crashy", "args": ["--mode", "crash", "--crash-at", "9"]}, {"name": "steady"}],
        "models": [{"name": "m1", "path": "/models/m1", "served_name": "m1"}]})
    run_dir = gridwalk.run_sweep(cfg, tmp_path / "run", progress=False, log=lambda m: None)
    assert runs.is_complete(run_dir)
    by = {(p.point.variant, p.point.concurrency): p for p in pointfiles.load_points(run_dir)}
    assert set(by) == {("crashy", 1), ("crashy", 2), ("steady", 1), ("steady", 2), ("steady", 4)}
    first = summarize_point(by[("crashy", 1)])
    assert first.failed == 0 and first.completed == 4  # measured before the crash: kept
    crashed = summarize_point(by[("crashy", 2)])
    assert crashed.failed > 0 and crashed.completed + crashed.failed == 4
    assert by[("crashy", 2)].meta["server_crashed"] == "server exited with code 3"
    stopped = json.loads((run_dir / "run.json").read_text())["stopped"]
    assert any("crashy" in name and "server exited with code 3" in why for name, why in stopped.items()), stopped
    for c in (1, 2, 4):
        s = summarize_point(by[("steady", c)])
        assert s.failed == 0 and s.completed == 4, (c, s.failed)
