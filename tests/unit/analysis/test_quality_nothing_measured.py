"""A run that measured nothing is never clean (fault kind: a benchmark called clean with zero measured requests).

The simulated server refuses every request longer than its ``max_model_len`` (vLLM's own rule: a prompt plus
output over the model length is rejected, https://docs.vllm.ai/en/latest/configuration/engine_args.html
``--max-model-len``): 128 + 16 tokens at ``max_model_len: 64`` leave every point not run.  The right value: the
run's verdict is flagged, its reason says nothing was measured, and the sweep exits 1.
"""

from __future__ import annotations

import contextlib
import io

from pipeline import cli
from pipeline.analysis.quality import run_quality
from pipeline.store import derivedfiles, runs
from tests.runbuilder import SMALL_SIMULATED_CONFIG

TOO_LONG = SMALL_SIMULATED_CONFIG.replace("simulated:\n", "simulated:\n  max_model_len: 64\n")


def test_a_simulated_run_of_requests_longer_than_the_model_is_not_clean(scratch_root):
    assert "max_model_len: 64" in TOO_LONG
    cfg = scratch_root / "config" / "too-long.yaml"
    cfg.write_text(TOO_LONG)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["sweep", "--config", str(cfg), "--run-id", "20261201T000000Z-long", "--no-progress"])
    assert rc == 1, err.getvalue()
    assert "nothing was measured" in err.getvalue()
    run_dir = scratch_root / "data" / "runs" / "20261201T000000Z-long"
    if runs.is_complete(run_dir):  # published: its verdict is judged from what it stored
        q = run_quality(runs.read_run_json(run_dir), [p.as_dict() for p in derivedfiles.read_summaries(run_dir)])
        assert q["verdict"] == "flagged" and any("nothing was measured" in r for r in q["reasons"])


def test_run_quality_of_no_points_is_flagged():
    q = run_quality({"stopped": {"m": "c=1 not run: every request is longer than max_model_len"}}, [])
    assert q["verdict"] == "flagged"
    assert q["reasons"] == ["nothing was measured: no point has a completed request "
                            "(m: c=1 not run: every request is longer than max_model_len)"]
    one = {"model": "m", "concurrency": 1, "completed": 4, "failed": 0}
    assert run_quality({}, [one])["verdict"] == "clean"
