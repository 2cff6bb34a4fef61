"""``batchmark plan config/vllm-cpu.yaml`` plans the default sweep on a profile that states no spec.

Regression (fault kind: the only sweep a user without a GPU can run cannot be planned): the plan refused with
"profile 'cpu' states no bandwidth".  Where a profile states no spec the plan takes this machine's probe, the one
stored with its newest run on this host or one run now, and says which (the wall-time check against a real sweep
is benchmarks/plan_cpu_walltime.py, not a timed test).
"""

from __future__ import annotations

import pytest

from pipeline.core.errors import BatchmarkError
from tests.runbuilder import NOISE_A, make_run


@pytest.fixture
def cfg():
    from pipeline.config.sweepconfig import load_config
    from tests.conftest import REPO

    return load_config(REPO / "config" / "vllm-cpu.yaml")


def test_the_plan_uses_the_probe_stored_with_this_hosts_newest_run(scratch_root, cfg, monkeypatch):
    from pipeline.plan.estimate import make_plan
    from pipeline.plan.plantext import plan_text

    monkeypatch.setattr("pipeline.plan.probed.this_host", lambda: "testhost")  # tests/runbuilder.py's run.json host
    make_run(scratch_root / "data" / "runs", "20261201T100000Z-a", noise=NOISE_A, models=("dense-a",), bandwidth_gb_s=40.0)
    make_run(scratch_root / "data" / "runs", "20261201T110000Z-b", noise=NOISE_A, models=("dense-a",), bandwidth_gb_s=50.0)
    plan = make_plan(cfg)
    assert plan.hardware == "cpu" and plan.wall_s > 0 and [m.model for m in plan.models] == [m.name for m in cfg.models]
    # the newer run's probe: 50 GB/s, 0.5 TFLOP/s (runbuilder's float32 matmul; no bfloat16 rate in that probe)
    assert plan.hardware_note.startswith("profile 'cpu' states no spec: the probe stored with run 20261201T110000Z-b, "
                                         "50.0 GB/s read, 0.5 TFLOP/s (float32), memory ")
    assert plan.hardware_note in plan_text(plan)
    # the cpu profile states no engine terms: the steps are the roofline's (pipeline/backends/simulated.py server_for)
    assert "the roofline of the hardware profile plus its step_overhead_s): a prediction" in plan_text(plan)
    assert all(p.output_throughput_tok_s for m in plan.models for p in m.points if p.runs)


def test_a_run_of_another_host_is_not_this_machine(scratch_root, cfg, monkeypatch):
    from pipeline.plan.estimate import make_plan

    monkeypatch.setattr("pipeline.plan.probed.this_host", lambda: "elsewhere")
    make_run(scratch_root / "data" / "runs", "20261201T100000Z-a", noise=NOISE_A, models=("dense-a",))
    with pytest.raises(BatchmarkError, match="no run of this machine stores a probe"):
        make_plan(cfg)  # a sweep's plan: none, and the sweep measures without one (it never probes twice)


def test_a_probe_run_now_is_said_to_be(scratch_root, cfg, monkeypatch):
    from pipeline.plan import probed
    from pipeline.plan.estimate import make_plan

    monkeypatch.setattr(probed, "_PROBED", {})
    fake = {"device": "cpu", "dtype": "float32", "bandwidth_gb_s": 20.0, "peak_tflops": 0.06,
            "peak_tflops_by_dtype": {"float32": 0.06, "bfloat16": 0.3}, "warning": None}
    probed.probe_now("cpu", run_probe=lambda: fake)
    plan = make_plan(cfg)
    served = cfg.vllm.dtype  # native: this CPU's; the roof is the probe's rate in it
    from pipeline.backends.vllm import served_dtype

    dtype = served_dtype(served)[0]
    rate = {"float32": "0.06", "bfloat16": "0.3"}[dtype]
    assert plan.hardware_note.startswith(f"profile 'cpu' states no spec: this machine probed now (no stored run of it), "
                                         f"20.0 GB/s read, {rate} TFLOP/s ({dtype})")
