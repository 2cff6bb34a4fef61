"""The sweep stage with the real transformers engine on tiny models: resume, early stop, CLI errors, show --json.

The hardware probe is replaced by a named stand-in (``PROBE_STAND_IN``): it takes about twenty
seconds per sweep and these tests are about the sweep, not the probe (``tests/integration``'s
fallback and launcher tests do the same).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline import cli
from pipeline.store import pointfiles, runs
from pipeline.sweep import gridwalk as sweep
from pipeline.config.sweepconfig import load_config
from pipeline.machine.hardware import ProbeResult
from pipeline.backends.transformers import TransformersBackend
from pipeline.sweep.gridwalk import run_sweep, weak_doublings
from tests.conftest import TINY_CONFIG

PROBE_STAND_IN = ProbeResult(device="cpu", dtype="float32", bandwidth_gb_s=10.0, peak_tflops=0.1,
                             bandwidth_repeats_gb_s=[10.0], tflops_repeats=[0.1], buffer_bytes=1,
                             matmul_n=1, threads=1)


@pytest.fixture(autouse=True)
def no_probe(monkeypatch):
    """Every sweep here records ``PROBE_STAND_IN`` instead of probing the machine."""
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: PROBE_STAND_IN)


def test_killed_sweep_resumes_without_remeasuring(scratch_root, monkeypatch):
    """Fault kind: interrupted sweep (Ctrl-C after 2 points). Finished points must be kept and not re-measured."""
    cfg = load_config(TINY_CONFIG)
    rd = scratch_root / "data" / "runs" / "R1"
    calls: list[int] = []
    real = TransformersBackend.measure

    def interrupting(self, key, *a, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(key.concurrency)
        return real(self, key, *a, **kw)

    monkeypatch.setattr(TransformersBackend, "measure", interrupting)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg, rd, progress=False)
    assert not runs.is_complete(rd)
    stored = {p.name: p.read_bytes() for p in (rd / "points").rglob("*.json")}
    assert len(stored) == 2

    resumed: list[int] = []

    def counting(self, key, *a, **kw):
        resumed.append((key.model, key.concurrency))
        return real(self, key, *a, **kw)

    monkeypatch.setattr(TransformersBackend, "measure", counting)
    run_sweep(cfg, rd, progress=False)
    assert runs.is_complete(rd)
    # 2 models x 3 concurrencies = 6 points; 2 were done, so exactly 4 are measured on resume
    assert len(resumed) == 4
    for p in (rd / "points").rglob("*.json"):
        if p.name in stored and p.parent.name == "tiny-llama":
            assert p.read_bytes() == stored[p.name]
    # a complete run is left alone
    run_sweep(cfg, rd, progress=False)
    assert len(resumed) == 4


def test_weak_doublings_counts_trailing_weak_steps():
    # gains: 1->2 +100 %, 2->4 +10 %, 4->8 +5 %: two weak doublings at the end at threshold 15 %
    assert weak_doublings([(1, 10), (2, 20), (4, 22), (8, 23.1)], 0.15) == 2
    assert weak_doublings([(1, 10), (2, 11), (4, 30)], 0.15) == 0


def _cli(*args, root):
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True,
                          env={**__import__("os").environ, "BATCHMARK_ROOT": str(root)}, timeout=600)


def test_malformed_config_stops_with_one_line_and_touches_nothing(scratch_root):
    bad = scratch_root / "config" / "bad.yaml"
    bad.write_text(TINY_CONFIG.read_text().replace("concurrency: [1, 2, 4]", "concurrency: [1, -2, 4]"))
    before = sorted(p.name for p in (scratch_root / "data").rglob("*"))
    res = _cli("sweep", "--config", str(bad), root=scratch_root)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "concurrency" in lines[0] and "bad.yaml" in lines[0]
    assert sorted(p.name for p in (scratch_root / "data").rglob("*")) == before


def test_show_json_contract(scratch_root, capsys):
    # the sweep runs in-process (so the probe stand-in applies); show runs as the user runs it
    assert cli.main(["sweep", "--config", str(TINY_CONFIG), "--run-id", "S1", "--no-progress"]) == 0
    capsys.readouterr()
    doc = json.loads(_cli("show", "S1", "--json", root=scratch_root).stdout)
    assert set(doc) == {"run_id", "source", "hardware", "points", "models"}
    assert doc["source"] == "measured"
    assert set(doc["hardware"]) == {"name", "bandwidth_gb_s_spec", "bandwidth_gb_s_measured", "peak_tflops_spec", "memory_gb"}
    assert doc["hardware"]["bandwidth_gb_s_measured"] == PROBE_STAND_IN.bandwidth_gb_s
    assert doc["hardware"]["bandwidth_gb_s_spec"] is None
    assert len(doc["points"]) == 6
    p = doc["points"][0]
    assert {"mbu", "mfu", "ttft_s", "tpot_s", "itl_s", "e2el_s", "prefill_throughput_tok_s"} <= set(p)
    assert set(p["ttft_s"]) == {"p50", "p90", "p99", "mean"}
    kinds = {m["model"]: m["kind"] for m in doc["models"]}
    assert kinds == {"tiny-llama": "dense", "tiny-moe": "moe"}
    for m in doc["models"]:
        # the contract's fields and their domains; throughput on a shared CPU varies, so the values of the
        # knee, post-knee and scaling are worked by hand on a run of known timings instead
        # (test_show_json_knee_and_scaling_worked_by_hand)
        curve = sorted(q["concurrency"] for q in doc["points"] if q["model"] == m["model"] and q["output_throughput_tok_s"])
        assert curve == [1, 2, 4]
        assert m["knee_concurrency"] in {None, 1, 2}  # a knee needs a doubling measured after it
        assert m["post_knee"] in {"not_reached", "plateau", "decline"}
        assert (m["post_knee"] == "not_reached") == (m["knee_concurrency"] is None)
        assert set(m["scaling_efficiency"]) == {"1", "2", "4"}
    assert _cli("show", "nope", root=scratch_root).returncode == 2


def test_show_json_knee_and_scaling_worked_by_hand(scratch_root, capsys):
    """Knee, post-knee and scaling efficiency through summaries -> analysis -> ``show --json``, on a run of known timings.

    tests/runbuilder.py: a static batch of B decodes one token per step of 0.010 × (1 + B / 8) s, so
    T(B) = B / step = 88.89, 160, 266.67, 400, 533.33 tok/s at B = 1, 2, 4, 8, 16 (the median repeat's noise is 1.00).
    Slowing c = 8 by 1.5 and c = 16 by 3 gives T(8) = 400 / 1.5 = 266.67 and T(16) = 533.33 / 3 = 177.78.
    Gains per doubling: 1 → 2 +80 %, 2 → 4 +66.7 %, 4 → 8 0 %, 8 → 16 −33.3 %: every doubling from c = 4 gains
    less than 15 %, so the knee is c = 4; the last point, 177.78, is below 0.9 × the peak 266.67 = 240: "decline".
    Scaling efficiency T(c) / (c × T(1)): 160 / 177.78 = 0.9, 266.67 / 355.56 = 0.75, 266.67 / 711.11 = 0.375,
    177.78 / 1422.22 = 0.125.
    """
    from tests.runbuilder import NOISE_A, make_run

    make_run(scratch_root / "data" / "runs", "H1", noise=NOISE_A, models=("dense-a",), concurrency=(1, 2, 4, 8, 16),
             slow={("dense-a", 8): 1.5, ("dense-a", 16): 3.0})
    assert cli.main(["show", "H1", "--json"]) == 0
    (m,) = json.loads(capsys.readouterr().out)["models"]
    assert m["knee_concurrency"] == 4
    assert m["post_knee"] == "decline"
    assert m["peak_output_throughput_tok_s"] == pytest.approx(266.667, rel=1e-4)
    assert m["scaling_efficiency"] == pytest.approx({"1": 1.0, "2": 0.9, "4": 0.75, "8": 0.375, "16": 0.125})


def test_out_of_memory_stops_escalation_and_keeps_points(scratch_root, monkeypatch):
    """Fault kind: a point runs out of memory (simulated MemoryError at c=4, since no GPU here).

    The sweep keeps c=1 and c=2, records why it stopped, and completes the run."""
    cfg = load_config(TINY_CONFIG)
    real = TransformersBackend._one_batch

    def oom_at_4(self, key, seed):
        if key.concurrency == 4:
            raise MemoryError("simulated allocation failure")
        return real(self, key, seed)

    monkeypatch.setattr(TransformersBackend, "_one_batch", oom_at_4)
    rd = scratch_root / "data" / "runs" / "OOM"
    run_sweep(cfg, rd, progress=False)
    meta = runs.read_run_json(rd)
    assert meta["status"] == "complete"
    assert "out of memory at c=4" in meta["stopped"]["tiny-llama"]
    assert sorted(p.point.concurrency for p in pointfiles.load_points(rd) if p.point.model == "tiny-llama") == [1, 2]


def test_probe_warning_on_spread():
    from pipeline.sweep.provenance import probe_warning

    # median 25, deviations 5, 5, 0, 5, 5 -> MAD 5 = 20 % > 15 % -> warning; two repeats -> no judgement
    # (the rule, worked by hand: tests/unit/machine/test_hardware_probe_noise.py)
    assert "bandwidth repeats' median absolute deviation 20% of their median" in probe_warning(
        [20.0, 20.0, 25.0, 30.0, 30.0], [1.0] * 5)
    assert probe_warning([20.0, 30.0], [1.0, 1.1]) is None
