"""Killing one model's measuring job mid-sweep, then running the workflow again, measures only what was missing.

A real ``snakemake --cores 2`` on tiny models (the in-process engine); the kill is a real SIGKILL of
the part's ``batchmark sweep --model`` process once it has stored some points and not all; the
workflow (retries 0 here, so the failure stays) stops with that part failed.  The second
``snakemake`` resumes the part: every point file stored before the kill is left byte for byte
(and keeps its inode: never rewritten), the missing points are measured, the other model's
part, complete before or measured now, is not measured twice, and the run is merged whole.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import make_scratch_root

pytestmark = pytest.mark.slow

CONFIG = """name: resume-test
hardware: cpu
engine: transformers
input_len: 8
output_len: 24
concurrency: [1, 2, 4, 8, 16, 32]
repeats: 3
stop_after_weak_doublings: 0
cluster: {retries: 0}
models:
  - name: tiny-llama
    architecture: {model_type: llama, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,
                   num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256, tie_word_embeddings: false}
  - name: tiny-moe
    architecture: {model_type: qwen3_moe, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
                   num_key_value_heads: 2, head_dim: 16, vocab_size: 256, num_experts: 8, num_experts_per_tok: 2,
                   moe_intermediate_size: 32, intermediate_size: 128, tie_word_embeddings: false}
"""
KILLED = "tiny-llama"


def _cmd(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "data/runs/resume/analysis.json", "--cores", "2",
            "--configfile", "config/resume.yaml", "--config", "run_id=resume", *args]


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "BATCHMARK_RUN_ID"}
    return {**env, "BATCHMARK_ROOT": str(root), "NO_MKDOCS_2_WARNING": "1"}


def _points(part: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_ino, p.read_bytes()) for p in sorted((part / "points").glob("*/*.json"))}


def _sweep_of(proc: psutil.Process, model: str) -> psutil.Process | None:
    for child in proc.children(recursive=True):
        try:
            cmd = child.cmdline()
        except psutil.Error:
            continue
        if "sweep" in cmd and "--model" in cmd and cmd[cmd.index("--model") + 1] == model and "pipeline" in cmd:
            return child
    return None


def test_killed_part_resumes_and_measures_only_what_was_missing(tmp_path):
    root = make_scratch_root(tmp_path)
    (root / "config" / "resume.yaml").write_text(CONFIG)
    part = root / "data" / "runs" / ".parts" / "resume" / KILLED
    first_log = tmp_path / "first.log"
    with first_log.open("w") as fh:  # a file, not a pipe: nobody reads while the workflow runs
        first = subprocess.Popen(_cmd(root), cwd=root, env=_env(root), stdout=fh, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    killed_at = None
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and first.poll() is None:
            stored = list((part / "points").glob("*/*.json")) if part.is_dir() else []
            sweep = _sweep_of(psutil.Process(first.pid), KILLED)
            if sweep is not None and 2 <= len(stored) < 6:
                sweep.send_signal(signal.SIGKILL)  # the measuring job dies mid-sweep (a lost node, an OOM kill)
                killed_at = len(stored)
                break
            time.sleep(0.05)
        first.wait(timeout=600)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    out = first_log.read_text()
    assert killed_at is not None, f"the sweep of tiny-llama was not seen mid-sweep: {out[-2000:]}"
    assert first.returncode != 0, out[-2000:]
    assert not (part / "points.json").exists()  # the part is incomplete
    stored_before = _points(part)
    assert killed_at <= len(stored_before) < 6  # a point being written at the kill may have landed
    other = root / "data" / "runs" / ".parts" / "resume" / "tiny-moe"
    other_before = _points(other) if (other / "points.json").exists() else None

    second = subprocess.run(_cmd(root), cwd=root, env=_env(root), capture_output=True, text=True, timeout=900)
    log = second.stdout + second.stderr
    assert second.returncode == 0, log[-3000:]
    assert f"resuming part {KILLED} of run resume" in log  # the part's sweep said so (pipeline.sweep)
    after = _points(part)
    assert len(after) == 6
    for name, (inode, data) in stored_before.items():
        assert after[name] == (inode, data), f"{name} was measured again"
    if other_before is not None:  # complete before: not a job of the second workflow, not a byte changed
        assert "part=tiny-moe" not in log
        assert _points(other) == other_before
    run = root / "data" / "runs" / "resume"
    assert len(list((run / "points").glob("*/*.json"))) == 12
    for name, (_inode, data) in stored_before.items():
        assert (run / "points" / KILLED / name).read_bytes() == data
