"""`plan` (and `plan --harness closed`) prices the stated engine with its own terms, names a stand-in and the priors,
and refuses an explicit harness where the profile has no terms for the engine.

Fault kind: one engine's terms silently pricing another (the closed loop's simulated server took vLLM's terms for
every engine: ``_plan_cell`` → ``server_for``, default ``vllm``).  Hand value: Llama-3.1-8B in bf16 on a DGX Spark at
c = 1, 1,024 + 64 tokens, one decode step at the mean context 1,056 under the profile's llama.cpp terms
(:func:`pipeline.cards.stepcost.engine_step_s`, the formula in its docstring) is the plan's TPOT.
"""

from __future__ import annotations

import pytest

from pipeline.cards.registry import load_card
from pipeline.cards.stepcost import engine_step_s
from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError
from pipeline.machine.engineterms import EngineTerms
from pipeline.machine.hardware import load_profile
from pipeline.plan.estimate import make_plan
from pipeline.plan.harnessplan import with_harness
from pipeline.plan.plantext import plan_text


def _cfg(engine: str, hardware: str = "dgx-spark"):
    return parse_config({"name": "h", "hardware": hardware, "backend": "openai", "concurrency": [1, 8],
                         "input_len": 1024, "output_len": 64, "repeats": 1,
                         "openai": {"base_url": "http://127.0.0.1:1", "engine": engine},
                         "models": [{"name": "m", "card": "Llama-3.1-8B", "served_name": "m"}]}, "h.yaml")


def test_the_closed_loop_is_priced_by_the_stated_engines_terms():
    hw = load_profile("dgx-spark")
    card = load_card("llama-3.1-8b")
    got = {}
    for engine in ("llama.cpp", "vllm"):
        plan = with_harness(make_plan(_cfg(engine), open_loop=False), _cfg(engine), "closed")
        want = engine_step_s(card, 1, 1024 + 32, hw.bandwidth_gb_s_spec, hw.compute_peak_tflops(),
                             hw.engine_terms(engine))
        got[engine] = plan.models[0].points[0].tpot_s
        assert got[engine] == pytest.approx(want, rel=1e-6)
        assert plan.step_terms == engine
    assert got["llama.cpp"] < got["vllm"] * 0.97  # the two engines' terms differ: a silent swap would show


def test_a_stand_in_and_the_priors_are_said():
    plan = make_plan(_cfg("sglang"), open_loop=False)
    assert plan.step_terms == "vllm"
    text = plan_text(plan)
    assert "costed by vllm's engine terms" in text and "standing in for sglang, which has no terms of its own" in text
    assert "priors, not fitted: attention_factor)" in text  # vLLM's dense terms fitted (Granite-4.1-8B): no prior
    own = plan_text(make_plan(_cfg("llama.cpp"), open_loop=False))
    assert "standing in" not in own and "priors, not fitted: routing_scale, request_latency_s" in own


@pytest.mark.parametrize("harness", ["closed", "wave", "static"])
def test_a_harness_without_the_engines_terms_is_refused_naming_them(harness):
    cfg = _cfg("vllm", hardware="h100-sxm")
    plan = make_plan(cfg, open_loop=False)  # no harness stated: the roofline and step overhead, said in the text
    assert plan.step_terms is None
    with pytest.raises(BatchmarkError, match=rf"--harness {harness}: hardware profile 'h100-sxm' states no engine "
                                             r"terms for vllm \(engines: none"):
        with_harness(plan, cfg, harness)


def test_priors_must_name_terms():
    base = dict(step_overhead_s=0.004, bandwidth_fraction=0.8, compute_fraction=0.2, source="test")
    assert EngineTerms(**base, priors=("routing_scale",)).priors == ("routing_scale",)
    with pytest.raises(ValueError, match="'bandwith' not a term"):
        EngineTerms(**base, priors=("bandwith",))
