"""The Spark engine terms' leave-one-source-out fit (benchmarks/sparkfit.py ``fit_terms``, benchmarks/spark_truth.py).

The fit over every published vLLM Spark curve (data/published/dgx-spark.yaml: kubis.ai's gpt-oss-120b c = 1–32 and
conselara.dev's single stream; both in the repository) gives the terms data/hardware/dgx-spark.yaml states
(4.01 ms, 0.818 of 273 GB/s, 0.132 of 92.3 TFLOP/s, routing_scale 8.0, within 1 % of the fit); leaving a publication out fits the others
alone, so the error on it is out of sample; leaving out an engine's only publication leaves no terms.
"""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.fixture(scope="module")
def curves():
    from sparkdata import load_curves

    return [c for c in load_curves()[0] if c.engine == "vllm"]


def test_the_fit_over_every_source_is_the_profiles(curves):
    from sparkfit import fit_terms
    from pipeline.machine.hardware import load_profile

    got, stated = fit_terms(curves, "vllm"), load_profile("dgx-spark").engine_terms("vllm")
    for name in ("step_overhead_s", "bandwidth_fraction", "compute_fraction", "routing_scale"):
        assert getattr(got, name) == pytest.approx(getattr(stated, name), rel=0.01), name


def test_leaving_a_source_out_fits_the_others_alone(curves):
    from sparkfit import fit_terms

    kubis = next(c.url for c in curves if c.source == "kubis-vllm-gpt-oss-120b")
    without = fit_terms(curves, "vllm", leave_out=kubis)
    # one single stream left (conselara.dev): it cannot see the batch terms, held at the fit's start (sparkfit.X0:
    # routing_scale 30, compute_fraction 0.2), not fitted to a share a single stream cannot tell apart
    assert without is not None and without.routing_scale == 30.0 and without.compute_fraction == 0.2
    assert without.source == f"fitted without {kubis}"
    assert fit_terms([c for c in curves if c.url == kubis], "vllm", leave_out=kubis) is None


def test_a_static_batch_slower_than_a_larger_one_is_set_aside():
    """ggml-org/llama.cpp benches/dgx-spark.md, gpt-oss-20b pp512: B = 1 took 0.390 s, B = 2 (twice the tokens)
    0.273 s — the run's first timed row after a 16-token warm-up; it is set aside with why, the rest kept."""
    from sparkdata import Curve, Point, set_aside_one_offs

    c = Curve("bb", "u", "llama.cpp", "static", "gpt-oss-20b", None, None, 512, 32,
              [Point(1, ttft_s=0.390), Point(2, ttft_s=0.273), Point(4, ttft_s=0.517)])
    set_aside_one_offs(c)
    assert [p.concurrency for p in c.points] == [2, 4]
    assert len(c.set_aside) == 1 and "0.273 s of B = 2" in c.set_aside[0][1]


def test_a_source_that_ran_another_ubatch_is_costed_with_its_own_passes():
    """DandinPower/llama.cpp_bench ran llama-bench's pp16384 at -ub 16384 (dgx_spark/prefilling.log: n_ubatch 16384):
    its Qwen3-30B-A3B prompt reads its experts once, not in the 16384 / 2048 = 8 passes of llama.cpp's n_ubatch 2048
    that the profile's terms state for the other sources."""
    import spark_truth
    from sparkdata import load_curves
    from pipeline.cards.stepcost import prefill_expert_read_s

    c = next(c for c in load_curves()[0] if c.source == "dandinpower-llamacpp-qwen3-30b-a3b-q4km-pp16384")
    assert c.ubatch == 16384 and c.holdout
    card, own = spark_truth.card_after(c), spark_truth.curve_terms(c)
    profile = spark_truth.HW.engine_terms("llama.cpp")
    assert own.prefill_chunk_tokens == 16384 and profile.prefill_chunk_tokens == 2048
    one = prefill_expert_read_s(card, 16384, own, 273.0)
    assert prefill_expert_read_s(card, 16384, profile, 273.0) == pytest.approx(8 * one)
