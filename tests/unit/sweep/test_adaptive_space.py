"""An adaptive sweep over a tuning space: two variants × two shapes on the simulated server (virtual time).

What it must do (pipeline/sweep/frontierwalk.py, docs/plan-predict.md): per curve (model × variant × shape) measure
the points that decide its knee, then across each shape's variants the points that could be on the Pareto frontier
of output against per-user throughput; predict the rest and say so.  The checks are worked from the run's own files:
the knee's deciding points (the knee and its grid neighbours, or the last two where it is not reached: the
definition of docs/definitions.md) against the record files, and the frontier recomputed by Pareto dominance over
the measured figures (``show --json``) and the predicted ones (``run.json`` ``adaptive``).  The sweep is interrupted
after 20 measurements and resumed (``--resume``): the resume must measure only the points not stored.

This is the test of the tuning-space adaptive sweep; it runs two curves' worth of calibrated fits per round and takes
~20-40 s on a loaded 2-core machine.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.analysis.frontier import non_dominated
from pipeline.predict.adaptive import decisive_points

GRID = [1, 2, 4, 8, 16, 32, 64]
SPACE = f"""name: sim-adaptive-space
hardware: dgx-spark
backend: simulated
workloads:
  - {{input_len: 128, output_len: 16}}
  - {{input_len: 4096, output_len: 16}}
concurrency: {GRID}
repeats: 2
adaptive:
  tolerance: 0.10
simulated:
  step_time_cv: 0.02
variants:
  - name: variant-a
  - name: variant-b
    kv_cache_dtype: fp8
models:
  - name: llama-3.1-8b-instruct
    card: Llama-3.1-8B
"""
RUN_ID = "20261202T000000Z-space"


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def stored(run: Path) -> dict[tuple[str, int, int, int], float]:
    """(variant, input_len, output_len, concurrency) of every record file, with its modification time."""
    out = {}
    for f in (run / "points").rglob("*.json"):
        p = json.loads(f.read_text())["point"]
        out[(p.get("variant") or "default", p["input_len"], p["output_len"], p["concurrency"])] = f.stat().st_mtime_ns
    return out


def interrupted_then_resumed(scratch_root: Path, monkeypatch: pytest.MonkeyPatch, after: int) -> tuple[Path, int]:
    """Sweep until ``after`` points are measured, interrupt (as Ctrl-C does), resume; returns the run and how many
    points the resume measured."""
    import pipeline.sweep.point as point

    real, calls, limit = point.measure_point, [], [after]

    def counting(cfg, engine, key):
        calls.append(key)
        if len(calls) > limit[0]:
            raise KeyboardInterrupt
        return real(cfg, engine, key)

    cfg = scratch_root / "config" / "space.yaml"
    cfg.write_text(SPACE)
    monkeypatch.setattr(point, "measure_point", counting)
    rc, _, err = run_cli("sweep", "--config", str(cfg), "--run-id", RUN_ID, "--no-progress")
    assert rc == 130, err  # interrupted (cli: finished points are kept)
    run = scratch_root / "data" / "runs" / RUN_ID
    before = stored(run)
    assert len(before) == after
    calls.clear()
    limit[0] = 10 ** 9  # the resume runs to the end
    rc, out, err = run_cli("sweep", "--config", str(cfg), "--resume", RUN_ID, "--no-progress")
    assert rc == 0, err
    after_files = stored(run)
    assert {k: after_files[k] for k in before} == before  # nothing stored was measured again (nor rewritten)
    assert sorted(map(_cell, calls)) == sorted(set(after_files) - set(before))
    return run, len(calls)


def _cell(key) -> tuple[str, int, int, int]:
    return (key.variant, key.input_len, key.output_len, key.concurrency)


@pytest.mark.slow  # ~20-40 s: a whole simulated sweep, interrupted and resumed
def test_an_adaptive_sweep_over_variants_and_shapes_settles_knees_and_frontier(scratch_root, monkeypatch):
    run, resumed = interrupted_then_resumed(scratch_root, monkeypatch, after=20)
    measured = set(stored(run))
    assert resumed == len(measured) - 20 > 0
    block = json.loads((run / "run.json").read_text())["adaptive"]
    assert len(block["models"]) == 4  # one curve per variant × shape
    # (a) each curve's knee rests on measurements: its deciding points (that fit) all have record files
    for m in block["models"].values():
        fits = {p["concurrency"] for p in m["points"] if not p["reason"].startswith("does not fit")}
        for c in decisive_points(GRID, m["knee_concurrency"]):
            assert c not in fits or (m["variant"], m["input_len"], m["output_len"], c) in measured, (m["curve"], c)
        assert {p["concurrency"] for p in m["points"] if p["measured"]} == {
            c for (v, i, o, c) in measured if (v, i, o) == (m["variant"], m["input_len"], m["output_len"])}
    # (b) the frontier over measured and predicted points, recomputed by Pareto dominance: every member measured
    rc, js, err = run_cli("show", RUN_ID, "--json")
    assert rc == 0, err
    doc = json.loads(js)
    for shape in ((128, 16), (4096, 16)):
        pts = [((p["variant"], p["concurrency"]), True, p["per_user_tok_s"], p["output_throughput_tok_s"])
               for p in doc["points"] if (p["input_len"], p["output_len"]) == shape]
        pts += [((m["variant"], p["concurrency"]), False, p["per_user_tok_s"], p["output_throughput_tok_s"])
                for m in block["models"].values() if (m["input_len"], m["output_len"]) == shape
                for p in m["points"] if not p["measured"]]
        front = [pts[i] for i in non_dominated([(pu, out) for _, _, pu, out in pts])]
        assert front and all(is_measured for _, is_measured, _, _ in front), front
        # and it is the frontier the measurements alone draw (the published one, pipeline.analysis.frontier)
        published = next(f for f in doc["tuning"]["frontiers"] if (f["input_len"], f["output_len"]) == shape)
        assert sorted(k for k, *_ in front) == sorted((p["variant"], p["concurrency"]) for p in published["frontier"])
    # (c) fewer points measured than the full grid, and the rest said to be predictions
    assert len(measured) < 2 * 2 * len(GRID)
    rc, text, err = run_cli("show", RUN_ID)
    assert text.count("PREDICTED") == 2 * 2 * len(GRID) - len(measured)
    assert "adaptive frontier" in text
