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


def test_a_drift_as_large_as_the_change_withholds_it():
    """The probe after the sweep read 40 GB/s where the one before read 50: −20 %, beyond the 10 % drift limit, and
    a throughput change of −20 % is no larger: the drift could have made it, so it gives no verdict."""
    from pipeline.analysis.quality import run_quality
    from pipeline.diff.metrics import MetricChange
    from pipeline.diff.withhold import withhold_flagged

    moved = run_quality({"probe": {"bandwidth_gb_s": 50.0}, "probe_after": {"bandwidth_gb_s": 40.0}}, [])
    assert moved["withholds"] == "roofline" and moved["probe_drift"] == pytest.approx(-0.2)
    c = MetricChange("m", "vllm", 64, 32, 4, "output_throughput_tok_s", "output throughput", "tok/s", True, 10.0, 8.0,
                     -0.2, 0.001, 5, 5, 0.004, "repeat", True, "worse", None)
    withhold_flagged([c], {"verdict": "clean"}, moved)
    assert c.verdict == "~" and c.note == ("no verdict: run B's bandwidth probe moved −20% while it was measured, "
                                           "as much as this change").replace("−", "-")


# The diff of three sweeps of one server on a quiet machine: A, its twin A2 and B with tokens 30 % slower, five
# repeats a side that agree; each run's probe after its sweep read 12 % above the one before it (200 → 224 GB/s)
# while each probe's own seven repeats spread 1 % (198–200 GB/s): a drift beyond its noise (max(10 %, 1 %)).
STEADY_REPEATS = {"bandwidth_repeats_gb_s": [198.0, 199.0, 200.0, 200.0, 199.5, 198.5, 200.0]}
DRIFTED_AFTER = {"bandwidth_gb_s": 224.0, "bandwidth_repeats_gb_s": [222.0, 223.0, 224.0, 224.0, 223.5, 222.5, 224.0]}


def _drifted_diff(root, b_slow):
    from pipeline.analysis.stages import load_run
    from pipeline.diff.rundiff import diff_runs

    runs_dir = root / "data" / "runs"
    a = make_run(runs_dir, "20261201T100000Z-a", noise=NOISE_A, probe_extra=STEADY_REPEATS, probe_after=DRIFTED_AFTER)
    b = make_run(runs_dir, "20261201T110000Z-b", noise=NOISE_B, slow=b_slow, probe_extra=STEADY_REPEATS,
                 probe_after=DRIFTED_AFTER)
    return diff_runs(load_run(a), load_run(b))


def test_a_drift_smaller_than_the_change_calls_it(scratch_root):
    """Regression (fault kind: a flag that silences a real finding): "a probe that moved withholds everything" gave
    A vs B no verdict at p = 2e-8.  A 12 % drift cannot make a −23.1 % throughput (1 / 1.3 − 1) or a +30 % TPOT:
    both are called worse; MBU, which rests on the bandwidth, is withheld."""
    d = _drifted_diff(scratch_root, SLOWER)
    assert d.quality_a["probe_drift"] == pytest.approx(0.12) and d.quality_b["withholds"] == "roofline"
    at = {c.metric: c for c in d.changes if c.model == "dense-a" and c.concurrency == 4}
    assert at["output_throughput_tok_s"].change == pytest.approx(1 / 1.3 - 1, abs=0.01)
    assert at["tpot_p50_s"].change == pytest.approx(0.3, abs=0.01)
    for metric in ("output_throughput_tok_s", "tpot_p50_s"):
        assert at[metric].verdict == "worse" and at[metric].significant, metric
    assert at["mbu"].verdict == "~" and "bandwidth probe moved while it was measured (MBU rests on it)" in at["mbu"].note


def test_a_drift_with_its_twin_calls_nothing(scratch_root):
    d = _drifted_diff(scratch_root, None)
    assert d.n_called == 0 and not any(c.verdict in ("better", "worse") for c in d.changes)


def test_a_drift_within_the_probes_noise_has_not_moved():
    """Probes 12 % apart whose own repeats spread 190–230 GB/s (230 / 190 − 1 = 21 %): the drift is the probe's
    noise, so nothing is flagged for it (the 10 % limit alone flagged it)."""
    from pipeline.analysis.probedrift import drift_limit, probe_moved

    noisy = {"bandwidth_repeats_gb_s": [190.0, 200.0, 230.0, 210.0, 205.0]}
    meta = {"probe": {"bandwidth_gb_s": 200.0, **noisy}, "probe_after": {"bandwidth_gb_s": 224.0, **noisy}}
    assert drift_limit(meta) == pytest.approx(230 / 190 - 1)
    assert probe_moved(meta) is None
    assert probe_moved({**meta, "probe": {"bandwidth_gb_s": 200.0}, "probe_after": {"bandwidth_gb_s": 224.0}}) \
        == pytest.approx(0.12)
