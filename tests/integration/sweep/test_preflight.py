"""``batchmark sweep`` as a user runs it (a process) against an endpoint where nothing answers.

The in-process preflight checks are tests/unit/sweep/test_preflight.py.
"""

from __future__ import annotations

import subprocess
import sys

from tests.unit.sweep.test_preflight import closed_port


def test_failed_sweep_leaves_no_run_folder(scratch_root, monkeypatch):
    """The CLI, as a user runs it: no server at the endpoint → exit 2, one line, and data/runs/ holds nothing."""
    cfg = scratch_root / "config" / "ep.yaml"
    cfg.write_text(f"""name: ep
hardware: cpu
backend: openai
input_len: 8
output_len: 8
concurrency: [1]
openai: {{base_url: "http://127.0.0.1:{closed_port()}/v1", api_key_env: BM_UNSET_KEY}}
models: [{{name: a, served_name: m, path: {scratch_root}}}]
""")
    monkeypatch.delenv("BM_UNSET_KEY", raising=False)
    proc = subprocess.run([sys.executable, "-m", "pipeline", "sweep", "--config", str(cfg)], capture_output=True,
                          text=True, timeout=120, cwd=scratch_root)
    assert proc.returncode == 2, proc.stderr
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert err[-1].startswith("batchmark: error: openai.base_url: nothing answers at"), err
    runs_dir = scratch_root / "data" / "runs"
    assert not runs_dir.exists() or not [p for p in runs_dir.iterdir() if not p.name.startswith(".")]

