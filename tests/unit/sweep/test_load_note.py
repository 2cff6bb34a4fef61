"""Before measuring, a load average above the core count is said in one line (fault kind: a sweep that starts on a
busy machine in silence, and whose verdict later says "flagged" with nothing said when it could still be stopped)."""

from __future__ import annotations

from pipeline.config.sweepconfig import parse_config
from pipeline.sweep import preflight as pf


def test_a_load_above_the_cores_is_one_line_and_at_or_below_none():
    """5.5 on 2 cores: more runnable work than CPUs, said; 2.0 on 2 (fully used, nothing waiting): nothing."""
    said = pf.load_note(5.5, 2)
    assert said is not None and "\n" not in said and said.startswith("note: the load average is 5.50 on 2 core(s)")
    assert pf.load_note(2.0, 2) is None and pf.load_note(0.3, 16) is None


def test_it_is_said_for_a_measured_backend_and_never_for_a_simulated_one(monkeypatch):
    """A sweep that measures in real time says it when measuring starts (after every check passed, so a refused
    sweep says only its error); a simulated run's time is virtual: nothing."""
    monkeypatch.setattr(pf.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    monkeypatch.setattr(pf.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "transformers", "concurrency": [1],
                        "input_len": 8, "output_len": 4,
                        "models": [{"name": "m", "architecture": {"model_type": "llama"}}]}, "c.yaml")
    assert (pf.load_note_now(cfg) or "").startswith("note: the load average is 9.00 on 2 core(s)")
    sim = parse_config({"name": "t", "hardware": "dgx-spark", "backend": "simulated", "concurrency": [1],
                        "input_len": 8, "output_len": 4, "models": [{"name": "m", "card": "llama-3.1-8b"}]}, "c.yaml")
    assert pf.load_note_now(sim) is None
