"""Killing one model's measuring job mid-sweep, then running the workflow again, measures only what was missing.

A real ``snakemake --cores 2`` on tiny models (the in-process engine); the kill is a real SIGKILL of
the part's ``batchmark sweep --model`` process once it has stored some points and not all.  With
``cluster.retries: 0`` the workflow stops with that part failed and the second ``snakemake``
resumes it; with ``retries: 1`` Snakemake's retry resumes it in the same workflow.  Either way
every point file stored before the kill is left byte for byte (and keeps its inode: never
rewritten), the missing points are measured, the other model's part, complete before or
measured now, is not measured twice, and the run is merged whole.
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
backend: transformers
input_len: 8
output_len: 24
concurrency: [1, 2, 4, 8, 16, 32]
repeats: 2
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
        # the Snakefile passes the model as one argument, --model=NAME (quoted: names never split)
        named = f"--model={model}" in cmd or ("--model" in cmd and cmd[cmd.index("--model") + 1:][:1] == [model])
        if "sweep" in cmd and named and "pipeline" in cmd:
            return child
    return None


def _start_and_kill(tmp_path: Path, retries: int) -> tuple[Path, subprocess.Popen, dict, str]:
    """Start the workflow, SIGKILL tiny-llama's measuring job once it stored 2 to 5 of its 6 points, wait for the end.

    Returns the root, the finished Snakemake process, the point files stored at the kill and the log.
    """
    root = make_scratch_root(tmp_path)
    (root / "config" / "resume.yaml").write_text(CONFIG.replace("retries: 0", f"retries: {retries}"))
    part = root / "data" / "runs" / ".parts" / "resume" / KILLED
    first_log = tmp_path / "first.log"
    stored_at_kill: dict | None = None
    with first_log.open("w") as fh:  # a file, not a pipe: nobody reads while the workflow runs
        first = subprocess.Popen(_cmd(root), cwd=root, env=_env(root), stdout=fh, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and first.poll() is None:
            stored = list((part / "points").glob("*/*.json")) if part.is_dir() else []
            sweep = _sweep_of(psutil.Process(first.pid), KILLED)
            if sweep is not None and 2 <= len(stored) < 6:
                sweep.send_signal(signal.SIGKILL)  # the measuring job dies mid-sweep (a lost node, an OOM kill)
                sweep.wait(timeout=60)
                stored_at_kill = _points(part)
                break
            time.sleep(0.05)
        first.wait(timeout=600)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    out = first_log.read_text()
    assert stored_at_kill is not None, f"the sweep of tiny-llama was not seen mid-sweep: {out[-2000:]}"
    assert 2 <= len(stored_at_kill) < 6
    return root, first, stored_at_kill, out


def _check_resumed(root: Path, stored_at_kill: dict, log: str) -> None:
    part = root / "data" / "runs" / ".parts" / "resume" / KILLED
    assert f"resuming part {KILLED} of run resume" in log  # the part's sweep said so (pipeline.sweep.gridwalk)
    after = _points(part)
    assert len(after) == 6
    for name, (inode, data) in stored_at_kill.items():
        assert after[name] == (inode, data), f"{name} was measured again"
    run = root / "data" / "runs" / "resume"
    assert len(list((run / "points").glob("*/*.json"))) == 12
    for name, (_inode, data) in stored_at_kill.items():
        assert (run / "points" / KILLED / name).read_bytes() == data


def test_killed_part_resumes_and_measures_only_what_was_missing(tmp_path):
    root, first, stored_at_kill, out = _start_and_kill(tmp_path, retries=0)
    assert first.returncode != 0, out[-2000:]  # no retries: the workflow reports the failed part
    part = root / "data" / "runs" / ".parts" / "resume" / KILLED
    assert not (part / "points.json").exists() and _points(part) == stored_at_kill  # incomplete, nothing lost
    other = root / "data" / "runs" / ".parts" / "resume" / "tiny-moe"
    other_before = _points(other) if (other / "points.json").exists() else None

    second = subprocess.run(_cmd(root), cwd=root, env=_env(root), capture_output=True, text=True, timeout=900)
    log = second.stdout + second.stderr
    assert second.returncode == 0, log[-3000:]
    _check_resumed(root, stored_at_kill, log)
    if other_before is not None:  # complete before: not a job of the second workflow, not a byte changed
        assert "part=tiny-moe" not in log
        assert _points(other) == other_before


def test_killed_part_is_retried_and_resumes_in_the_same_workflow(tmp_path):
    root, first, stored_at_kill, out = _start_and_kill(tmp_path, retries=1)
    assert first.returncode == 0, out[-3000:]  # Snakemake's retry finished the part
    _check_resumed(root, stored_at_kill, out)
