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


def test_preflight_says_it_before_measuring(monkeypatch):
    """preflight (before any run folder exists) logs it for a measured backend; a simulated run (virtual time) not."""
    monkeypatch.setattr(pf.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    monkeypatch.setattr(pf.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "transformers", "concurrency": [1],
                        "input_len": 8, "output_len": 4,
                        "models": [{"name": "m", "architecture": {"model_type": "llama"}}]}, "c.yaml")
    monkeypatch.setattr(pf, "tokenizer_sources", lambda cfg, models: [])
    lines: list[str] = []
    pf.preflight(cfg, log=lines.append)
    assert [x for x in lines if x.startswith("note: the load average is 9.00 on 2 core(s)")] != []
    sim = parse_config({"name": "t", "hardware": "dgx-spark", "backend": "simulated", "concurrency": [1],
                        "input_len": 8, "output_len": 4, "models": [{"name": "m", "card": "llama-3.1-8b"}]}, "c.yaml")
    lines.clear()
    pf.preflight(sim, log=lines.append)
    assert not any("load average" in x for x in lines)
