"""A real sweep's display and its last line: phases with elapsed time, one line per point, the summary.

The tiny transformers config (tests/data/tiny.yaml: two models, c = 1, 2, 4, two repeats) through the CLI, in
``lines`` mode as under Snakemake; the probe is the named stand-in of tests/integration/test_sweep.py.
"""

from __future__ import annotations

import re

from pipeline import cli
from pipeline.sweep import gridwalk as sweep
from tests.conftest import TINY_CONFIG
from tests.integration.test_sweep import PROBE_STAND_IN


def test_sweep_shows_phases_points_and_ends_with_a_summary(scratch_root, monkeypatch, capsys):
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: PROBE_STAND_IN)
    monkeypatch.setenv("BATCHMARK_PROGRESS", "lines")
    assert cli.main(["sweep", "--config", str(TINY_CONFIG), "--run-id", "20261201T000000Z-p"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "probing memory bandwidth and matmul rate …" in err
    for model in ("tiny-llama", "tiny-moe"):
        start = err.index(f"{model}: loading the model …")
        done = next(i for i, line in enumerate(err) if line.startswith(f"{model}: loading the model: done in "))
        first_point = next(i for i, line in enumerate(err) if line.startswith(f"{model} c=1: "))
        assert start < done < first_point  # loading is a phase of its own, ended before the first point starts
    points = [line for line in err if re.match(r"^tiny-(llama|moe) c=\d+: ", line)]
    assert len(points) == 6 and points[-1].startswith("tiny-moe c=4: ") and "(6/6 points; ETA 0.0 s)" in points[-1]
    # clean or flagged (tiny points on a shared 2-core machine often disagree): the verdict and its main reason
    assert re.fullmatch(r"run 20261201T000000Z-p: (clean|⚠ flagged: .{10,160}( \(\+\d+ more\))?) · see: batchmark show "
                        r"20261201T000000Z-p · site: not built with this run yet \(snakemake --cores 1 committed builds it\)",
                        err[-1]), err[-1]
