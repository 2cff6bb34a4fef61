"""A run that measured nothing is never clean (fault kind: a benchmark called clean with zero measured requests).

The simulated server refuses every request longer than its ``max_model_len`` (vLLM's own rule: a prompt plus
output over the model length is rejected, https://docs.vllm.ai/en/latest/configuration/engine_args.html
``--max-model-len``): 128 + 16 tokens at ``max_model_len: 64`` would leave every point not run.  The config says so
before anything runs: the sweep refuses it in one line naming ``simulated.max_model_len`` and the token counts, exits
2 and makes no run folder.  A run whose points all went unrun anyway (a stored run, a server's own refusals) is
judged by :func:`pipeline.analysis.quality.run_quality`: flagged, its reason saying nothing was measured.
"""

from __future__ import annotations

import contextlib
import io

from pipeline import cli
from pipeline.analysis.quality import run_quality
from tests.runbuilder import SMALL_SIMULATED_CONFIG

TOO_LONG = SMALL_SIMULATED_CONFIG.replace("simulated:\n", "simulated:\n  max_model_len: 64\n")


def test_a_simulated_run_of_requests_longer_than_the_model_is_refused_before_it_runs(scratch_root):
    assert "max_model_len: 64" in TOO_LONG
    cfg = scratch_root / "config" / "too-long.yaml"
    cfg.write_text(TOO_LONG)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["sweep", "--config", str(cfg), "--run-id", "20261201T000000Z-long", "--no-progress"])
    assert rc == 2, err.getvalue()
    line = err.getvalue().strip()
    assert len(line.splitlines()) == 1 and "simulated.max_model_len = 64" in line and "144 tokens" in line  # 128 + 16
    assert not (scratch_root / "data" / "runs" / "20261201T000000Z-long").exists()


def test_run_quality_of_no_points_is_flagged():
    q = run_quality({"stopped": {"m": "c=1 not run: every request is longer than max_model_len"}}, [])
    assert q["verdict"] == "flagged"
    assert q["reasons"] == ["nothing was measured: no point has a completed request "
                            "(m: c=1 not run: every request is longer than max_model_len)"]
    one = {"model": "m", "concurrency": 1, "completed": 4, "failed": 0}
    assert run_quality({}, [one])["verdict"] == "clean"
