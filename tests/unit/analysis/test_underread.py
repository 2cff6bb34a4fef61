"""A measured point above a compute roof is a probe fault: the roof is marked under-read, never drawn or divided by.

Regression (fault kind: a roof read under a load taken for the machine's, every point then drawn against it): a
fresh clone's run on a 2-core CPU served bfloat16 while its probe read a bfloat16 roof of 0.0336 TFLOP/s (one
0.3 ms product per repeat, another process on a core); the run called every point compute-bound, c = 1 included,
drew the roofline 4.3× below the measured throughput and reported MFU 1.4–8.7 as results.

The same run hand-made (tests/runbuilder.py): a dense card of 270 M non-embedding parameters and 1.08 GB of dense
weights, so a token is 2 × 270e6 + attention over its 72 tokens of context = 542.4 MFLOP (stepcost), bandwidth
200 GB/s, decode step 0.010 × (1 + B / 8) s: B / step = 88.9 tok/s at c = 1 and 533.3 at c = 16.  Against
0.0336 TFLOP/s the c = 1 roofline is compute-bound at 0.0336e12 / 542.4e6 = 62.0 tok/s, below the measured 88.9,
and MFU is 542.4e6 / 0.01125 / 0.0336e12 = 1.43 at c = 1, 16 × 542.4e6 / 0.03 / 0.0336e12 = 8.61 at c = 16 (the
fresh clone's 1.4–8.7).  Re-analysed, the roofline is the bandwidth's alone (c = 1: 200e9 / 1.081e9 = 185.0 tok/s),
MFU is withheld, and no decode is called compute-bound.
"""

from __future__ import annotations

import pytest

from pipeline.analysis.underread import point_beats_roof, under_read_roofs
from tests.runbuilder import make_run

UNDER_READ_PROBE = {"dtype": "float32", "peak_tflops": 0.0975,
                    "peak_tflops_by_dtype": {"float32": 0.0975, "bfloat16": 0.0336}}


@pytest.fixture
def under_read_run(tmp_path):
    from pipeline.analysis.stages import load_run

    run = make_run(tmp_path / "runs", "20261203T100000Z-fresh", models=("dense-a",), quantization="bfloat16",
                   probe_extra=UNDER_READ_PROBE)
    return load_run(run)


def test_old_reading_worked_by_hand():
    """The old analysis' figures, the row a point gives against the under-read roof: each says the roof is wrong."""
    c1 = {"concurrency": 1, "batch": 1, "mfu": 542.4e6 / 0.01125 / 0.0336e12, "roofline_tok_s": 62.0,
          "roofline_bound": "compute"}
    assert c1["mfu"] == pytest.approx(1.435, abs=1e-3)
    assert point_beats_roof(c1, 88.9).startswith("the roofline binds on compute at c = 1")
    c16 = {"concurrency": 16, "batch": 16, "mfu": 8.61, "roofline_tok_s": 900.0, "roofline_bound": "compute"}
    assert point_beats_roof(c16, 533.3) == "MFU 8.61 at c = 16: the point ran 8.6× the FLOP/s the roof allows"
    below = {"concurrency": 16, "batch": 16, "mfu": 0.9, "roofline_tok_s": 500.0, "roofline_bound": "compute"}
    assert point_beats_roof(below, 533.3) == "measured 533.3 tok/s at c = 16, above its compute-bound roofline 500.0"
    assert point_beats_roof({**below, "roofline_tok_s": 600.0}, 533.3) is None  # a roof not beaten stands
    assert under_read_roofs([(c16, 533.3, None)]) == {}  # a spec sheet's roof: no probe to call under-read


def test_no_roofline_below_a_measured_point(under_read_run):
    res = under_read_run
    measured = {s.concurrency: s.output_throughput_tok_s for s in res.summaries}
    assert measured[1] == pytest.approx(1 / 0.01125, rel=1e-3) and measured[16] == pytest.approx(533.3, rel=1e-3)
    rows = {p["concurrency"]: p for p in res.analysis["points"]}
    for c, thr in measured.items():
        assert rows[c]["roofline_tok_s"] >= thr, c
        assert rows[c]["roofline_bound"] == "memory", c  # c = 1 above all: never compute-bound
    assert rows[1]["roofline_tok_s"] == pytest.approx(185.0, rel=1e-3)


def test_no_mfu_above_one_reported(under_read_run):
    rows = under_read_run.analysis["points"]
    assert all(p["mfu"] is None for p in rows)
    assert all(p["mfu_withheld"].startswith("the probe under-read the bfloat16 compute roof") for p in rows)
    m = under_read_run.analysis["models"][0]
    assert m["compute_roof_under_read"].startswith("the probe under-read the bfloat16 compute roof (33.6 GFLOP/s): "
                                                   "the roofline binds on compute at c = 1")
    assert m["post_knee_cause"] != "compute"


def test_the_run_is_flagged_for_its_roofline_only(under_read_run):
    """The under-read roof is named in the run's verdict and withholds what rests on the roofs (MBU, MFU), not the
    throughputs its five agreeing repeats measured."""
    from pipeline.analysis.quality import run_quality

    q = run_quality(under_read_run.meta, [s.as_dict() for s in under_read_run.summaries],
                    under_read_run.analysis["models"])
    from pipeline.analysis.quality import short_reasons

    assert q["withholds"] == "roofline"
    assert any("the probe under-read the bfloat16 compute roof" in r for r in q["reasons"])
    assert short_reasons(q) == ["compute roof under-read (dense-a): a point beat it"]


def test_a_roof_the_points_do_not_beat_stands(tmp_path):
    """The probe's float32 roof of 0.5 TFLOP/s (runbuilder's default) against float32 cards: c = 16 does
    16 × 542.4e6 / 0.03 = 0.289 TFLOP/s, MFU 0.579; nothing is withheld."""
    from pipeline.analysis.stages import load_run

    res = load_run(make_run(tmp_path / "runs", "20261203T110000Z-ok", models=("dense-a",)))
    rows = {p["concurrency"]: p for p in res.analysis["points"]}
    assert rows[16]["mfu"] == pytest.approx(16 * 542.36e6 / 0.03 / 0.5e12, rel=1e-4)
    assert "mfu_withheld" not in rows[16] and res.analysis["models"][0]["compute_roof_under_read"] is None


@pytest.mark.parametrize("native, under", [("bfloat16", True), ("float32", False)])
def test_a_single_stream_is_compute_bound_only_where_the_dtype_is_emulated(tmp_path, native, under):
    """c = 1 alone, bfloat16 served, a bfloat16 roof of 0.06 TFLOP/s: compute 542.4e6 / 0.06e12 = 9.04 ms against
    1.081 GB / 200 GB/s = 5.41 ms of memory, so the roofline binds on compute (110.6 tok/s, above the measured 88.9;
    MFU 542.4e6 / 0.01125 / 0.06e12 = 0.80).  On a CPU that runs bfloat16 natively no single stream is compute-bound
    (about 1 FLOP per byte): the roof is under-read.  On one that emulates it (AVX2: native float32) that roof can
    be the machine's, and nothing beat it: it stands."""
    from pipeline.analysis.stages import load_run

    probe = {"dtype": "float32", "peak_tflops": 0.5, "peak_tflops_by_dtype": {"float32": 0.5, "bfloat16": 0.06},
             "cpu": {"isa": [], "native_dtype": native, "why": "test"}}
    res = load_run(make_run(tmp_path / "runs", "20261203T120000Z-one", models=("dense-a",), concurrency=(1,),
                            quantization="bfloat16", probe_extra=probe))
    row = res.analysis["points"][0]
    assert (res.analysis["models"][0]["compute_roof_under_read"] is not None) is under
    if under:
        assert row["roofline_bound"] == "memory" and row["mfu"] is None
    else:
        assert row["roofline_bound"] == "compute" and row["roofline_tok_s"] == pytest.approx(110.6, rel=1e-3)
        assert row["mfu"] == pytest.approx(0.8035, rel=1e-3)


def test_a_roof_of_another_dtype_is_named(tmp_path):
    """An older probe measured float32 only (0.0975 TFLOP/s), the model served in bfloat16: the roof used is float32's
    and the points beat it (MFU at c = 16: 16 × 542.4e6 / 0.03 / 0.0975e12 = 2.97); the under-read roof says it is
    another dtype's."""
    from pipeline.analysis.stages import load_run

    res = load_run(make_run(tmp_path / "runs", "20261203T140000Z-old", models=("dense-a",), quantization="bfloat16",
                            probe_extra={"peak_tflops": 0.0975}))
    m = res.analysis["models"][0]
    assert m["compute_roof_under_read"].startswith("the probe under-read the float32 compute roof (97.5 GFLOP/s) "
                                                   "(a roof probed in float32 for a model served in bfloat16): ")
    assert all(p["mfu"] is None for p in res.analysis["points"])
