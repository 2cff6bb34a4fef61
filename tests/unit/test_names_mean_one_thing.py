"""Names that mean one thing, end to end over summaries, analysis and ``show``: an open-loop point's cap is
``max_concurrency`` (``concurrency`` is only ever the N in flight of a closed loop), a point's *caveats* (failed
requests, token-count flags) are not the quality verdict *flagged*, and how batchmark gets the tokens is the
*backend* (docs/definitions.md), never ``engine`` (the serving engine).  Every figure is worked by hand in its comment.
"""

from __future__ import annotations

from pipeline.analysis.analyze import analyze
from pipeline.config.options import VLLMOptions
from pipeline.importers.base import summary
from pipeline.plan.estimate import Plan
from pipeline.plan.plantext import plan_text
from pipeline.views.show import build_show
from pipeline.views.showtable import point_note

HW = {"name": "cpu", "bandwidth_gb_s_spec": 100.0, "peak_tflops_spec": None, "memory_gb": 16}


def _points():
    # c = 1 clean; c = 2 with 1 of 8 requests failed (12.5 %, above the default 5 %: excluded) and 3 usage_missing;
    # c = 4 with 2 requests whose count took the usage_missing flag, nothing failed (a caveat, not excluded);
    # a Poisson point at 2 req/s capped at 16 in flight
    return [summary("m", "vllm", 8, 4, 1, completed=8, failed=0, output_throughput_tok_s=10.0),
            summary("m", "vllm", 8, 4, 2, completed=7, failed=1, output_throughput_tok_s=19.0,
                    caveats={"failed_requests": 1, "usage_missing": 3}),
            summary("m", "vllm", 8, 4, 4, completed=8, failed=0, output_throughput_tok_s=30.0,
                    caveats={"usage_missing": 2}),
            summary("m", "vllm", 8, 4, None, completed=20, failed=0, output_throughput_tok_s=8.0, load="poisson",
                    rate_rps=2.0, max_concurrency=16)]


def test_caveats_and_the_cap_through_analysis_and_show():
    pts = _points()
    res = analyze(pts, {}, HW)
    rows = {(r["concurrency"], r.get("max_concurrency")): r for r in res["points"]}
    assert rows[(2, None)]["caveats"] == ["failed_requests", "usage_missing"] and rows[(2, None)]["excluded"] is True
    assert rows[(4, None)]["caveats"] == ["usage_missing"] and rows[(4, None)]["excluded"] is False
    assert rows[(None, 16)]["load"] == "poisson"  # the open point: no concurrency, its cap apart
    model = res["models"][0]
    assert model["caveat_concurrency"] == [2, 4] and model["excluded_concurrency"] == [2]
    assert "flagged_concurrency" not in model
    assert model["rate_sweeps"][0]["max_concurrency"] == 16
    doc = build_show({"run_id": "r"}, [p.as_dict() for p in pts], res)
    by_c = {(p["concurrency"], p["max_concurrency"]): p for p in doc["points"]}
    assert set(by_c) == {(1, None), (2, None), (4, None), (None, 16)}
    assert by_c[(4, None)]["caveats"] == ["usage_missing"] and by_c[(4, None)]["caveat_counts"] == {"usage_missing": 2}
    assert doc["models"][0]["caveat_concurrency"] == [2, 4]


def test_a_points_note_says_caveats_and_keeps_flagged_for_the_verdict():
    p = {"completed": 6, "failed": 2, "caveats": ["failed_requests", "usage_missing"],
         "caveat_counts": {"failed_requests": 2, "usage_missing": 3}}
    assert point_note(p) == "caveats: 2 of 8 failed (25%); usage_missing ×3"  # 2 / (6 + 2) = 25 %
    assert point_note({**p, "excluded": True}) == "EXCLUDED: 2 of 8 failed (25%); usage_missing ×3"
    verdict = {"verdict": "flagged", "reasons": ["repeats disagree (1.80× between slowest and fastest)"]}
    assert point_note({**p, "quality": verdict}) == ("FLAGGED: repeats disagree (1.80× between slowest and fastest); "
                                                     "caveats: 2 of 8 failed (25%); usage_missing ×3")
    assert point_note({"completed": 8, "failed": 0, "caveats": []}) == ""


def test_the_backend_is_called_backend_in_the_plan_and_the_vllm_fallback():
    """``plan --json``'s ``backend`` and ``vllm.fallback_backend`` once were ``engine`` and ``fallback_engine``."""
    plan = Plan("c", "cpu", "simulated", 0.0, [], 1, 4, 32)
    doc = plan.as_dict()
    assert doc["backend"] == "simulated" and "engine" not in doc
    assert plan_text(plan).startswith("plan of c (backend simulated) on cpu:")
    assert "simulated here in virtual time" in plan.total_line()  # read from the backend
    assert "fallback_backend" in VLLMOptions.model_fields and "fallback_engine" not in VLLMOptions.model_fields
