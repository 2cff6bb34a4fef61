"""The sweep's one measuring step (pipeline/sweep/point.py ``measure_or_resume``) as the three walks use it.

A simulated DGX Spark (config/spark-simulated.yaml made small: one model, c = 1, 2, three fixed Poisson rates) in
virtual time, through :func:`pipeline.sweep.gridwalk.run_sweep`; the engine is the simulated one, wrapped where a
test needs a point that runs out of memory.
"""

from __future__ import annotations

import io
import re

import pytest
import yaml

from pipeline.core.progress import Display
from pipeline.backends import get_backend
from pipeline.backends.base import PointDoesNotFit
from pipeline.store import runs
from pipeline.sweep import gridwalk
from pipeline.config.sweepconfig import parse_config
from tests.conftest import REPO


def _cfg():
    cfg = yaml.safe_load((REPO / "config" / "spark-simulated.yaml").read_text())
    cfg.update(name="point-step", input_len=256, output_len=16, concurrency=[1, 2], repeats=1, models=cfg["models"][:1])
    cfg["open_loop"].update(rates=[1.0, 2.0, 4.0], bisect_steps=0)
    cfg["simulated"].update(requests_per_slot=1, min_requests=4)
    return parse_config(cfg)


class _OutOfMemoryAt:
    """The simulated engine, but the open-loop point at ``rate`` runs out of device memory (as the transformers engine
    raises it: pipeline/backends/transformers.py turns a CUDA out-of-memory error into PointDoesNotFit)."""

    def __init__(self, engine, rate: float):
        self._engine, self._rate, self.measured = engine, rate, []

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def measure(self, key, *args):
        if key.rate_rps == self._rate:
            raise PointDoesNotFit(f"out of memory at {key.label()}")
        self.measured.append(key)
        return self._engine.measure(key, *args)


def test_an_open_loop_rate_out_of_memory_stops_the_models_rates_not_the_run(scratch_root, monkeypatch):
    """Fault kind: an out-of-memory point of the open-loop rates escaped the sweep (the rate walk did not catch
    PointDoesNotFit, which the grid and the adaptive walk record as ``memory: …`` and stop the model on), so the run
    stayed incomplete and every resume hit it again.  Now the model's rates stop there, the reason is in run.json and
    the run completes; the rate after it (4 req/s) is never measured, the one before it (1 req/s) is stored."""
    cfg = _cfg()
    wrapped: list[_OutOfMemoryAt] = []
    monkeypatch.setattr(gridwalk, "get_backend", lambda c: wrapped.append(_OutOfMemoryAt(get_backend(c), 2.0))
                        or wrapped[0])
    run_dir = gridwalk.run_sweep(cfg, scratch_root / "data" / "runs" / "oom", progress=False, log=lambda m: None)
    meta = runs.read_run_json(run_dir)
    assert meta["status"] == "complete"
    assert meta["stopped"] == {"gpt-oss-20b": "memory: out of memory at poisson 2 req/s"}
    assert [(k.concurrency, k.rate_rps) for k in wrapped[0].measured] == [(1, None), (2, None), (None, 1.0)]
    assert meta["failures"]["points"] == 3  # c = 1, 2 and 1 req/s counted; the point that did not fit is none


class _CrashAt(_OutOfMemoryAt):
    """The simulated engine, but the open-loop point at ``rate`` crashes it (a server gone: no PointDoesNotFit)."""

    def measure(self, key, *args):
        if key.rate_rps == self._rate:
            raise RuntimeError("server gone")
        return super().measure(key, *args)


def _point_lines(out: io.StringIO) -> list[str]:
    return [line for line in out.getvalue().splitlines() if re.match(r"^gpt-oss-20b (c=|poisson)", line)]


def test_rate_points_are_shown_and_a_resume_measures_only_what_is_missing(scratch_root, monkeypatch):
    """The rate walk's points are shown as points (they were measured silently), counted into the display's total
    when the walk places them (after the grid: ``auto`` rates come from its curve), so the grid's 2 points read
    1/2, 2/2 and the three rates 3/5, 4/5, 5/5.  The first sweep's engine crashes at 4 req/s (everything measured is
    stored); the resume reads the four stored points back ('already measured') and measures only 4 req/s."""
    cfg = _cfg()
    run_dir = scratch_root / "data" / "runs" / "shown"
    monkeypatch.setenv("BATCHMARK_PROGRESS", "lines")
    out = io.StringIO()
    monkeypatch.setattr(gridwalk, "Display", lambda total, enabled=True: Display(total, enabled, stream=out))
    engines: list[_OutOfMemoryAt] = []
    monkeypatch.setattr(gridwalk, "get_backend", lambda c: engines.append(_CrashAt(get_backend(c), 4.0)) or engines[-1])
    with pytest.raises(RuntimeError, match="server gone"):
        gridwalk.run_sweep(cfg, run_dir, log=lambda m: None)
    lines = _point_lines(out)
    assert [line.split(":")[0] for line in lines] == ["gpt-oss-20b c=1", "gpt-oss-20b c=2", "gpt-oss-20b poisson 1 req/s",
                                                      "gpt-oss-20b poisson 2 req/s"]
    assert [re.search(r"\((\d+/\d+) points", line).group(1) for line in lines] == ["1/2", "2/2", "3/5", "4/5"]

    out.seek(0)
    out.truncate(0)
    monkeypatch.setattr(gridwalk, "get_backend", lambda c: engines.append(_CrashAt(get_backend(c), -1.0)) or engines[-1])
    gridwalk.run_sweep(cfg, run_dir, log=lambda m: None)
    assert [(k.concurrency, k.rate_rps) for k in engines[-1].measured] == [(None, 4.0)]
    again = _point_lines(out)
    assert len(again) == 5 and all("already measured" in line for line in again[:4])
    assert "already measured" not in again[4] and "(5/5 points" in again[4]
    assert runs.read_run_json(run_dir)["status"] == "complete"
