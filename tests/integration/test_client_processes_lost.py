"""``client_processes`` when a process dies: real client processes against a real streaming server.

- a client process killed mid-point (``kill -9``): the point fails by the process's name, every measured request
  failed with the reason (never half the point's requests stored as a whole point), the repeat aborted;
- the sweep's own process killed mid-point: its client processes die with it, none left streaming at the server;
- the point's meta states the processes that ran: two at c = 2 with ``client_processes: 8``.

The server is ``fake_stream_server.py`` (20 ms prefill, a token per 10 ms); the tokenizer the word-level one of
``served_helpers.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.core.records import PointKey
from pipeline.backends import get_backend
from pipeline.metrics.summarize import summarize_point
from tests.conftest import REPO
from tests.integration.served_helpers import build_tokenizer, free_port, wait_healthy

pytestmark = pytest.mark.slow  # a real server and spawned client processes: seconds each

HERE = Path(__file__).resolve().parent

#: Run as the "sweep" whose process the test kills: one long point over two client processes.
SWEEP = """
import sys
from pipeline.config.sweepconfig import parse_config
from pipeline.core.records import PointKey
from pipeline.backends import get_backend
cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 64,
                    "concurrency": [4], "repeats": 1,
                    "openai": {"base_url": sys.argv[1], "requests_per_point": 400, "tokenizer": sys.argv[2],
                               "timeout_s": 60, "client_processes": 2},
                    "models": [{"name": "m", "served_name": "m"}]})
engine = get_backend(cfg)
engine.load(cfg.models[0])
print("measuring", flush=True)
engine.measure(PointKey("m", "openai", 8, 64, 4), 1, True, 0)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A fake streaming server and the word-level tokenizer: (base URL, tokenizer folder)."""
    tmp = tmp_path_factory.mktemp("clientprocs")
    build_tokenizer(tmp / "tok")
    port = free_port()
    log = tmp / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "fake_stream_server.py"), "--port", str(port)],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, 30, log)
        yield f"http://127.0.0.1:{port}/v1", tmp / "tok"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _engine(server, processes: int, requests: int, output_len: int, concurrency: int):
    url, tok = server
    cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8,
                        "output_len": output_len, "concurrency": [concurrency], "repeats": 1,
                        "openai": {"base_url": url, "requests_per_point": requests, "tokenizer": str(tok),
                                   "timeout_s": 60, "client_processes": processes},
                        "models": [{"name": "m", "served_name": "m"}]})
    engine = get_backend(cfg)
    engine.load(cfg.models[0])
    return engine


def _clients(pid: int) -> list[psutil.Process]:
    """The spawned client processes of process ``pid`` (not its resource tracker, not the server)."""
    try:
        kids = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    out = []
    for k in kids:
        try:
            if "spawn_main" in " ".join(k.cmdline()):
                out.append(k)
        except psutil.Error:
            pass
    return out


def _wait_for_clients(pid: int, n: int, timeout_s: float = 60) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kids = _clients(pid)
        if len(kids) >= n:
            return kids
        time.sleep(0.05)
    pytest.fail(f"{n} client processes of {pid} never appeared")


def test_the_meta_states_the_processes_that_ran(server):
    """Regression (fault kind: a configured value stated as measured): ``client_processes: 8`` at c = 2 spreads the
    loop over min(8, 2) = 2 processes (a slot each), and the meta said 8."""
    rec = _engine(server, 8, 4, 8, 2).measure(PointKey("m", "openai", 8, 8, 2), 1, True, 0)
    assert rec.meta["client_processes"] == 2
    assert summarize_point(rec).completed == 4


def test_a_killed_client_process_fails_its_point_by_name(server):
    """Regression (fault kind: a lost process raised out of the sweep, or half a point kept as whole).  c = 4 over two
    client processes, 40 measured requests of 64 tokens (≈ 0.66 s each: ≈ 7 s of point); one process gets SIGKILL
    1.5 s after both started.  Before: ``RuntimeError: client process 1 ended without its records`` out of
    ``measure`` (a traceback ending the sweep).  Now the point is stored failed: all 40 measured requests failed,
    each error naming the process and the signal, the repeat aborted with the same reason."""
    engine = _engine(server, 2, 40, 64, 4)
    killed: list[int] = []

    def kill_one() -> None:
        kids = _wait_for_clients(os.getpid(), 2)
        time.sleep(1.5)
        victim = sorted(kids, key=lambda p: p.pid)[-1]
        killed.append(victim.pid)
        victim.send_signal(signal.SIGKILL)

    t = threading.Thread(target=kill_one)
    t.start()
    rec = engine.measure(PointKey("m", "openai", 8, 64, 4), 1, True, 0)
    t.join()
    assert killed
    summ = summarize_point(rec)
    assert summ.completed == 0 and summ.failed == 40
    reason = rec.meta["aborted"]
    assert reason.startswith("client process batchmark-client-") and reason.endswith(
        "ended without its records (killed by signal SIGKILL)"), reason
    errors = [r.error for r in rec.repeats[0].requests if not r.warmup]
    assert len(errors) == 40 and all(e and reason in e for e in errors)
    assert engine.fits(PointKey("m", "openai", 8, 64, 8)) == (False, f"an earlier point was aborted: {reason}")
    assert not _clients(os.getpid())  # none left behind


def test_a_killed_sweep_leaves_no_client_process_streaming(server, tmp_path):
    """Regression (fault kind: orphaned load).  The sweep's process is killed (SIGKILL) while its two client processes
    stream a 400-request point (≈ 70 s of load).  Before, they went on streaming at the server to the end of their
    requests and then cooled down for ever, waiting for a parent that was gone.  Now they die with it: both are gone
    within 10 s of the kill (on Linux the kernel kills them at once: ``PR_SET_PDEATHSIG``)."""
    url, tok = server
    sweep = subprocess.Popen([sys.executable, "-c", SWEEP, url, str(tok)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    kids: list[psutil.Process] = []
    try:
        assert sweep.stdout.readline().strip() == "measuring"
        kids = _wait_for_clients(sweep.pid, 2)
        time.sleep(1.0)  # both streaming
        assert all(k.is_running() for k in kids)
        sweep.send_signal(signal.SIGKILL)
        sweep.wait(timeout=10)
        _, alive = psutil.wait_procs(kids, timeout=10)
        assert not alive, [k.pid for k in alive]
    finally:
        if sweep.poll() is None:
            sweep.kill()
        for k in kids:  # left behind on a failure: never outlive the test
            try:
                k.kill()
            except psutil.Error:
                pass
