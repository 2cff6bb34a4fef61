"""``show`` of a run with more than one variant: the frontier and what each setting bought, in text and --json."""

from __future__ import annotations

from pipeline.views.show import format_table, show_run
from tests.runbuilder import make_run, make_variant_run


def test_show_carries_tuning_only_for_a_run_of_several_variants(tmp_path):
    # fp8-kv's every time at c = 4 is × 0.7 (tests/runbuilder.VARIANT_FACTORS): throughput 1 / 0.7 = 1.43×, +43 %
    run = make_variant_run(tmp_path / "runs", "20261129T000000Z-testhost", concurrency=(1, 4))
    doc = show_run(run)
    assert doc["tuning"]["variants"] == ["default", "fp8-kv"]
    assert {p["variant"] for p in doc["points"]} == {"default", "fp8-kv"}
    text = format_table(doc)
    assert "what each setting bought (against default" in text
    assert "fp8-kv: +43 % peak output throughput at c = 4 (64/16)" in text
    assert "best under the SLO: fp8-kv at c = 4" in text
    plain = make_run(tmp_path / "runs", "20261129T000001Z-testhost", models=("dense-a",), concurrency=(1, 2))
    assert "tuning" not in show_run(plain)
