"""`batchmark plan` and the budget: predictions of config/spark.yaml, wall-time arithmetic, budget choices."""

from __future__ import annotations

import json

import pytest

from pipeline import cli
from pipeline.config.sweepconfig import load_config, parse_config, parse_duration
from pipeline.core.errors import BatchmarkError
from pipeline.plan.estimate import PROBE_S, REPEAT_OVERHEAD_S, make_plan
from pipeline.plan.budget import fit_budget
from tests.conftest import REPO

SPARK = REPO / "config" / "spark.yaml"


@pytest.fixture(scope="module")
def spark_plan() -> dict:
    """``batchmark plan config/spark.yaml --json`` (its budget applied), parsed."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", str(SPARK), "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def spark_full_plan():
    """``make_plan(config/spark.yaml)``: every point planned, no budget applied (computed once for the module)."""
    return make_plan(load_config(SPARK))


def test_qwen3_32b_single_stream_tpot_is_the_bandwidth_arithmetic(spark_plan):
    # the profile's vLLM terms (data/hardware/dgx-spark.yaml): 4.04 ms + (65.5 GB of weights + 0.3 GB of KV at 1,152
    # tokens) / (0.818 × 273 GB/s) + 2 × 32.8e9 FLOPs / (0.5 × 92.3 TFLOP/s) = 0.004 + 0.295 + 0.0014 = 0.300 s a step
    qwen = next(m for m in spark_plan["models"] if m["model"] == "qwen3-32b")
    c1 = next(p for p in qwen["points"] if p["concurrency"] == 1 and p["load"] == "closed")
    assert c1["tpot_s"] == pytest.approx(0.300, rel=0.05)
    assert c1["fits"] is True


def test_every_grid_point_of_every_model(spark_plan):
    cfg = load_config(SPARK)
    assert [m["model"] for m in spark_plan["models"]] == [m.name for m in cfg.models]
    for m in spark_plan["models"]:
        closed = [p["concurrency"] for p in m["points"] if p["load"] == "closed"]
        # the budget may drop the grid's top for every model (its open-loop rates last five E2ELs each, minutes):
        # the plan says so in "dropped", and keeps every point below
        gone = [d for d in spark_plan["dropped"] if d.startswith("concurrency ")]
        kept = [c for c in cfg.concurrency if not gone or f" {c}," not in gone[0].replace(" (", ",")]
        assert closed == kept and len(kept) >= 7, (m["model"], spark_plan["dropped"])
        for p in m["points"]:
            assert set(p) >= {"concurrency", "wall_s", "fits", "tpot_s", "ttft_s", "output_throughput_tok_s"}


def test_total_is_the_docstring_arithmetic(spark_plan):
    # total = 2 probes + Σ models (server start + Σ points); a model's wall_s is its start + its points
    models = spark_plan["models"]
    for m in models:
        assert m["wall_s"] == pytest.approx(m["server_start_s"] + sum(p["wall_s"] for p in m["points"]))
    assert spark_plan["wall_s"] == pytest.approx(2 * PROBE_S + sum(m["wall_s"] for m in models))


def test_point_wall_is_repeats_times_one_simulated_repeat(spark_full_plan):
    # a point = repeats x (one repeat: warm-up, measured and cool-down requests in virtual time + 1 s)
    from pipeline.config.arrivals import Load
    from pipeline.simulation.simloop import SimPlan, simulate_repeat
    from pipeline.backends.simulated import resolve_card, server_for
    from pipeline.machine.hardware import load_profile
    from pipeline.plan.estimate import server_options

    cfg = load_config(SPARK)
    plan = spark_full_plan
    spec = next(m for m in cfg.models if m.name == "llama-3.1-8b-instruct")
    server = server_for(resolve_card(spec), load_profile("dgx-spark"), server_options(cfg), 1024, 256, 256, "vllm")
    res = simulate_repeat(server, SimPlan(1024, 256, 8, 32, Load(concurrency=8)))  # c = 8: 8 warm-up + max(4·8, 32) measured
    pt = next(p for m in plan.models if m.model == spec.name for p in m.points if p.concurrency == 8 and p.load == "closed")
    assert pt.wall_s == pytest.approx(cfg.repeats * (res.end_s + REPEAT_OVERHEAD_S))


def test_a_point_that_cannot_fit_is_named_with_its_reason(spark_full_plan):
    # Qwen3-32B at c = 256: 65.5 GB of weights + 256 x 1,280 tokens x 262,144 B of KV = 85.9 GB > 128 x 0.85
    lines = spark_full_plan.not_fitting()
    assert any(line.startswith("qwen3-32b c = 256: weights 65.5 GB + KV of 256 sequences of 1280 tokens 85.9 GB")
               for line in lines), lines


@pytest.mark.slow  # plans the whole Spark config once per rung of the ladder
def test_budget_steps_down_and_says_what_it_dropped(spark_full_plan):
    cfg = load_config(SPARK)
    full = spark_full_plan
    plan, measured = fit_budget(cfg, 10 * 3600)
    assert full.wall_s > 10 * 3600 >= plan.wall_s and plan.fits_budget
    assert measured.repeats == plan.repeats < cfg.repeats
    assert any(d.startswith("repeats 5 -> ") for d in plan.dropped)
    assert plan.certainty  # every step taken says what it costs
    # re-planning the measured config gives the budgeted plan's total
    assert make_plan(measured).wall_s == pytest.approx(plan.wall_s)


@pytest.mark.parametrize("text,seconds", [("8h", 28800), ("90m", 5400), ("1h30m", 5400), ("2d", 172800), ("45s", 45)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["8 hours", "", "0h", "-1h", "h"])
def test_bad_budget_is_refused_naming_the_field(bad):
    with pytest.raises(BatchmarkError, match="budget"):
        parse_config({"name": "x", "hardware": "dgx-spark", "backend": "simulated", "budget": bad,
                      "models": [{"name": "m", "card": "Llama-3.1-8B"}]}, "cfg.yaml")


def test_plan_of_a_profile_without_figures_is_a_one_line_error(tmp_path, scratch_root):
    """Without a stored probe of this machine (a scratch root has no run) and none run now, the plan says how to get one
    (`batchmark plan` probes; tests/unit/plan/test_probed.py plans with a probe)."""
    path = tmp_path / "cpu.yaml"
    path.write_text("name: c\nhardware: cpu\nbackend: vllm\nmodels: [{name: m, served_name: m}]\n")
    with pytest.raises(BatchmarkError, match="no bandwidth_gb_s_spec .*`batchmark plan CONFIG` probes it"):
        make_plan(load_config(path))


def test_a_static_batch_config_is_not_planned():
    with pytest.raises(BatchmarkError, match="static batches"):
        make_plan(load_config(REPO / "config" / "gpu-transformers.yaml"))


def test_progress_eta_counts_down_the_plan(spark_plan):
    # the display's estimate: before any point, every model's start, points and rates (the total less the two
    # probes); after every grid point, nothing; after the first model's grid, the other models' seconds
    from pipeline.plan.estimate import Plan, PlanModel, PlanPoint

    models = [PlanModel(m["model"], m["wall_s"], m["server_start_s"], [PlanPoint(**p) for p in m["points"]])
              for m in spark_plan["models"]]
    plan = Plan("spark", "dgx-spark", "vllm", spark_plan["wall_s"], models, 5, 4, 32)
    grid = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    left = plan.estimate_after([m.model for m in models], grid)
    assert left(0) == pytest.approx(spark_plan["wall_s"] - 2 * PROBE_S)
    assert left(len(grid)) == pytest.approx(sum(m.wall_s for m in models[1:]))
    assert left(len(grid) * len(models)) == 0


def test_a_spark_plan_says_its_steps_are_the_engine_terms():
    """config/spark-first.yaml (vllm on dgx-spark): the profile states vLLM's terms (data/hardware/dgx-spark.yaml
    engines.vllm), which the simulated server costs each step with; the plan's last line says so, which of them are
    priors, and that each model is in its served format."""
    from pipeline.config.sweepconfig import load_config
    from pipeline.plan.estimate import make_plan
    from pipeline.plan.plantext import plan_text

    text = plan_text(make_plan(load_config(REPO / "config" / "spark-first.yaml")))
    assert text.splitlines()[-1] == ("predicted by the simulated server (the model cards in their served formats, "
                                     "pipeline/cards/servedformat.py; each step costed by vllm's engine terms, "
                                     "data/hardware/dgx-spark.yaml engines:, each with its source; priors, not "
                                     "fitted: attention_factor): a prediction, not a measurement")


def test_a_simulated_config_with_its_own_overhead_says_roofline(tmp_path):
    """A simulated config that sets ``simulated.step_overhead_s`` is costed by the roofline + that overhead, not by the
    profile's engine terms (pipeline/backends/simulated.py server_for): the plan says which."""
    from pipeline.plan.plantext import plan_text

    cfg = load_config(REPO / "config" / "spark-first.yaml").model_dump(mode="json")
    cfg.update(backend="simulated", simulated={"step_overhead_s": 0.004}, concurrency=[1, 2])
    cfg.pop("vllm", None)
    plan = make_plan(parse_config(cfg, "sim.yaml"))
    assert plan.step_terms is None and "the roofline of the hardware profile plus its step_overhead_s" in plan_text(plan)
