"""A flag withholds only what it touches: a noisy probe makes MBU uncertain, not a throughput with agreeing repeats.

Regression (fault kind: a flag that silences a real finding): two real sweeps of one server, the second with
tokens 30 % slower, five repeats a side that agreed (max / min 1.11×), gave output throughput −16.6 % at
p = 0.0005 and per-user −21.8 % at p = 0.000004, and the diff said "no verdict: run A and B flagged" because both
probes called themselves noisy.  The same case, hand-made (tests/runbuilder.py: a static batch's output throughput
is B / step_s and per-user throughput 1 / step_s, so B's times × 1.3 make both 1 / 1.3 − 1 = −23.1 %): both
throughputs are called worse, MBU's change is withheld, and the A/A twin (noise only) calls nothing.
"""

from __future__ import annotations

import pytest

from tests.runbuilder import NOISE_A, NOISE_B, MODELS, CONCURRENCY, make_run

NOISY = ("noisy probe (matmul repeats' median absolute deviation 22% of their median; no other load seen while "
         "probing): ceilings, roofline, MBU and MFU of this run are less certain")
SLOWER = {(m, c): 1.3 for m in MODELS for c in CONCURRENCY}


def _diff(root, b_slow):
    from pipeline.analysis.stages import load_run
    from pipeline.diff.rundiff import diff_runs

    runs_dir = root / "data" / "runs"
    a = make_run(runs_dir, "20261201T100000Z-a", noise=NOISE_A, probe_warning=NOISY)
    b = make_run(runs_dir, "20261201T110000Z-b", noise=NOISE_B, slow=b_slow, probe_warning=NOISY)
    return diff_runs(load_run(a), load_run(b))


def test_ab_calls_both_throughputs_worse_and_withholds_mbu(scratch_root):
    d = _diff(scratch_root, SLOWER)
    assert d.quality_a["verdict"] == d.quality_b["verdict"] == "flagged"
    assert d.quality_b["withholds"] == "roofline"
    at = {c.metric: c for c in d.changes if c.model == "dense-a" and c.concurrency == 4}
    for metric in ("output_throughput_tok_s", "per_user_tok_s"):
        assert at[metric].change == pytest.approx(1 / 1.3 - 1, abs=0.01), metric
        assert at[metric].verdict == "worse" and at[metric].significant, metric
    assert at["mbu"].verdict == "~" and "no verdict: run A and B flagged (its probe or card makes MBU uncertain)" in at["mbu"].note


def test_aa_twin_calls_nothing(scratch_root):
    d = _diff(scratch_root, None)
    assert d.n_called == 0 and not any(c.verdict in ("better", "worse") for c in d.changes)


def test_a_probe_that_moved_withholds_everything():
    """The probe after the sweep read 40 GB/s where the one before read 50: −20 %, beyond the 10 % drift limit."""
    from pipeline.analysis.quality import run_quality
    from pipeline.diff.metrics import MetricChange
    from pipeline.diff.withhold import withhold_flagged

    moved = run_quality({"probe": {"bandwidth_gb_s": 50.0}, "probe_after": {"bandwidth_gb_s": 40.0}}, [])
    assert moved["withholds"] == "all"
    c = MetricChange("m", "vllm", 64, 32, 4, "output_throughput_tok_s", "output throughput", "tok/s", True, 10.0, 8.0,
                     -0.2, 0.001, 5, 5, 0.004, "repeat", True, "worse", None)
    withhold_flagged([c], {"verdict": "clean"}, moved)
    assert c.verdict == "~" and c.note == "no verdict: run B flagged (its probe moved while it was measured)"
