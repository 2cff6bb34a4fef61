"""``predict`` on a flagged run says so, and ``predict --help`` names the default calibration points it uses.

Regression (fault kind: a fit to interference shown as a model's miss): ``predict`` on a flagged run missed its own
calibration points by −53 % and −67 % without saying that the run was flagged; ``--help`` said "the smallest, the
next and the largest" while a dense model is calibrated on the middle in log2 c (predict/calibrate.py).
"""

from __future__ import annotations

from tests.runbuilder import CONCURRENCY, NOISE_A, make_run


def test_predict_on_a_flagged_run_says_so(scratch_root):
    from pipeline.views.predict import format_predict, predict_run

    busy = {("dense-a", c): 0.9 for c in CONCURRENCY}  # 90 % of 2 CPUs busy outside: more than the 25 % limit
    run = make_run(scratch_root / "data" / "runs", "20261201T100000Z-busy", noise=NOISE_A, models=("dense-a",), busy=busy)
    doc = predict_run(run)
    assert doc["flagged"] == ["machine busy during 5 point(s), up to 90% of its CPUs"]
    assert format_predict(doc).splitlines()[1].startswith("FLAGGED RUN: machine busy during 5 point(s)")
    clean = make_run(scratch_root / "data" / "runs", "20261201T110000Z-clean", noise=NOISE_A, models=("dense-a",))
    assert predict_run(clean)["flagged"] is None and "FLAGGED" not in format_predict(predict_run(clean))


def test_predict_help_names_the_default_calibration():
    import contextlib
    import io

    from pipeline import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main(["predict", "--help"])
        except SystemExit:
            pass
    text = " ".join(out.getvalue().split())
    assert "the middle in log2 c for a dense model" in text and "the next one for an MoE" in text
