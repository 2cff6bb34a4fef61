"""The sweep walks rates: ``open_loop: {rates: auto}`` after the concurrency grid, with an SLO and bisection.

Against a real server process (``fake_stream_server.py --max-running 2``: two slots of 10 ms
prefill + 4 × 10 ms tokens, so at most ~40 requests/s).  The hardware probe is replaced by the
named stand-in of ``test_sweep.py`` (this test is about the sweep).  Timing on a shared machine
decides which rates meet the SLO, so the expectations are derived from what the run stored, by
the documented rules: the auto rates from the stored closed-loop curve (``ratewalk.open_rates``), the
bisected rate from the stored verdicts (``ratewalk.bisect_rate``).
"""

from __future__ import annotations

import json

import pytest
import yaml

from pipeline import cli
from pipeline.sweep import gridwalk as sweep
from pipeline.views.show import show_run
from pipeline.sweep.ratewalk import bisect_rate, open_rates
from tests.integration.served_helpers import build_tokenizer
from tests.integration.test_open_loop import start_two_slot_server
from tests.integration.test_sweep import PROBE_STAND_IN

pytestmark = pytest.mark.slow


def test_sweep_walks_auto_rates_with_slo_and_bisection(scratch_root, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: PROBE_STAND_IN)
    build_tokenizer(tmp_path / "tok")
    proc, url = start_two_slot_server(tmp_path)
    try:
        cfg = {"name": "open", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 4,
               "concurrency": [1, 2, 4], "repeats": 1, "warmup": False, "stop_after_weak_doublings": 0,
               "openai": {"base_url": url, "requests_per_point": 24,
                          "tokenizer": str(tmp_path / "tok"), "timeout_s": 30},
               "open_loop": {"load": "constant", "rates": "auto", "auto_rates": 3, "bisect_steps": 1},
               "slo": {"goodput_ttft_ms": 60, "ttft_p99_max_ms": 60},
               "models": [{"name": "m", "served_name": "m"}]}
        path = tmp_path / "open.yaml"
        path.write_text(yaml.safe_dump(cfg))
        assert cli.main(["sweep", "--config", str(path), "--run-id", "O1", "--no-progress"]) == 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    doc = show_run("O1")
    closed = [p for p in doc["points"] if p["load"] == "closed"]
    opened = [p for p in doc["points"] if p["load"] != "closed"]
    assert [p["concurrency"] for p in closed] == [1, 2, 4]
    auto = open_rates([(p["concurrency"], p["output_throughput_tok_s"]) for p in closed], 4, 3)
    verdicts = {p["rate_rps"]: p["slo"]["met"] for p in opened if p["rate_rps"] in auto}
    assert sorted(verdicts) == auto  # every auto rate measured, as constant-rate points without a cap
    assert all(p["load"] == "constant" and p["concurrency"] is None for p in opened)
    extra = sorted({p["rate_rps"] for p in opened} - set(auto))
    expected = bisect_rate(verdicts)
    assert extra == ([expected] if expected is not None else [])  # one bisection step where a bracket exists
    for p in opened + closed:  # every point carries the SLO check: limits as configured, good ≤ measured
        assert p["slo"]["goodput_ttft_ms"] == p["slo"]["ttft_p99_max_ms"] == 60 and 0 <= p["slo"]["good"] <= p["slo"]["measured"] == 24
    (model,) = doc["models"]
    (rs,) = model["rate_sweeps"]
    assert [r["rate_rps"] for r in rs["points"]] == sorted(auto + extra)
    assert set(model["slo_concurrency"]) == {"max_ok", "first_failing"}
    # the achieved rate never exceeds what the server's two slots can complete (40/s, +10 % timer slack)
    assert all(r["achieved_rate_rps"] < 44 for r in rs["points"])
    # the outside load while each rate point ran is kept beside the grid's, in its record file
    files = sorted((scratch_root / "data" / "runs" / "O1" / "points" / "m").glob("*-constant-r*.json"))
    assert len(files) == len(opened) and all("interference" in json.loads(f.read_text())["meta"] for f in files)
    run = json.loads((scratch_root / "data" / "runs" / "O1" / "run.json").read_text())
    assert run["config"]["open_loop"]["rates"] == "auto" and run["status"] == "complete"


def test_auto_rates_of_a_model_that_measured_nothing_stop_that_model_only(scratch_root, tmp_path, monkeypatch):
    """``open_loop.rates: auto`` where the first model's grid measured nothing stopped the run with
    "auto needs a closed-loop throughput"; the next model was never measured and every ``--resume`` failed the same.
    Against a real server process whose model ``dead`` answers 503 to every request after the feature probe."""
    import subprocess
    import sys

    from tests.integration.served_helpers import free_port, wait_healthy
    from tests.integration.test_served_token_truth import HERE

    monkeypatch.setattr(sweep, "probe", lambda *a, **k: PROBE_STAND_IN)
    build_tokenizer(tmp_path / "tok")
    port = free_port()
    with open(tmp_path / "server.log", "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "fake_stream_server.py"), "--port", str(port),
                                 "--prefill-ms", "10", "--token-ms", "5", "--fail-model", "dead"],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, 30, tmp_path / "server.log")
        cfg = {"name": "twomodels", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 4,
               "concurrency": [1, 2], "repeats": 1, "warmup": False, "stop_after_weak_doublings": 0,
               "openai": {"base_url": f"http://127.0.0.1:{port}/v1", "requests_per_point": 4,
                          "tokenizer": str(tmp_path / "tok"), "timeout_s": 30, "max_consecutive_failures": 0},
               "open_loop": {"load": "constant", "rates": "auto", "auto_rates": 2},
               "models": [{"name": "dead", "served_name": "dead"}, {"name": "live", "served_name": "live"}]}
        path = tmp_path / "two.yaml"
        path.write_text(yaml.safe_dump(cfg))
        rc = cli.main(["sweep", "--config", str(path), "--run-id", "T1", "--no-progress"])
        assert rc == 0  # something was measured (the live model), so the sweep succeeds
        assert cli.main(["sweep", "--config", str(path), "--resume", "T1", "--no-progress"]) == 0  # nothing to redo
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    meta = json.loads((scratch_root / "data" / "runs" / "T1" / "run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["stopped"]["dead"].startswith("open loop not run: open_loop.rates: auto needs a closed-loop throughput")
    assert "live" not in meta["stopped"]
    doc = show_run("T1")
    live_open = [p for p in doc["points"] if p["model"] == "live" and p["load"] == "constant"]
    assert len(live_open) == 2 and not [p for p in doc["points"] if p["model"] == "dead" and p["load"] != "closed"]
    assert all(p["completed"] == 0 for p in doc["points"] if p["model"] == "dead")
