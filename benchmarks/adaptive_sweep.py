"""Benchmark: does an adaptive sweep find the full grid's knee, and at what share of its hardware time?

    python benchmarks/adaptive_sweep.py [--config config/spark-simulated-adaptive.yaml]
                                        [--full data/runs/20261202T030252Z-vm] [--tolerance 0.10]

Runs the adaptive config (``adaptive:``; its open loop left out: the same in both sweeps, and no part of the knee)
on the simulated server in a temporary project (virtual time: about a minute), and compares each model with the
full-grid run ``--full`` (default: the committed full-size simulated Spark run, config/spark-simulated.yaml: the
same models, grid, lengths, repeats, seed and noise, so a point measured by both is the same simulation):

- the knee: the adaptive sweep's (``find_knee`` of its measured + predicted curve, run.json ``adaptive``) against
  the full grid's (its analysis, measured points only);
- hardware time, by the plan's estimate of each point on a real DGX Spark (``pipeline.plan.estimate``: repeats × the
  simulated time of a repeat + overheads): the full grid's server start + every grid point, against the adaptive
  sweep's server start + the points it measured (the two probes, the same in both, left out).

Must hold: the same knee for every model, with at most half of the full grid's hardware time.
Figures, printed; the script exits 1 when either does not hold.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    """Run the adaptive and full-grid simulated Spark sweeps, print knees and hardware time; exit 1 if a goal fails."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "spark-simulated-adaptive.yaml"))
    ap.add_argument("--full", default=str(ROOT / "data" / "runs" / "20261202T030252Z-vm"),
                    help="the full-grid run to compare with (a path)")
    ap.add_argument("--tolerance", type=float, default=None, help="override the config's adaptive.tolerance")
    args = ap.parse_args(argv)

    from pipeline.analysis import stages
    from pipeline.config.sweepconfig import load_config
    from pipeline.plan.estimate import format_duration, make_plan

    cfg = load_config(args.config)
    upd = {"open_loop": None, "slo": None}
    if args.tolerance is not None:
        upd["adaptive"] = cfg.adaptive.model_copy(update={"tolerance": args.tolerance})
    cfg = cfg.model_copy(update=upd)
    full = stages.load_run(Path(args.full))
    full_knees = {m["model"]: m.get("knee_concurrency") for m in full.analysis.get("models", [])}
    full_tok = {(s.model, s.concurrency): s.output_throughput_tok_s for s in full.summaries if s.load == "closed"}
    full_grid = sorted({c for (_, c) in full_tok})
    if full_grid != sorted(cfg.concurrency):
        print(f"note: the full run's grid {full_grid} is not the adaptive config's {list(cfg.concurrency)}")

    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("models", "hardware"):
            shutil.copytree(ROOT / "data" / sub, Path(tmp) / "data" / sub)
        (Path(tmp) / "data" / "runs").mkdir()
        os.environ["BATCHMARK_ROOT"] = tmp
        from pipeline.store import runs
        from pipeline.sweep.gridwalk import run_sweep
        from pipeline.sweep.point import Planned

        plan = make_plan(cfg)
        run_dir = runs.claim_run_dir(Path(tmp) / "data" / "runs")
        with contextlib.redirect_stderr(io.StringIO()):  # the sweep's phase lines: only the comparison is printed
            run_sweep(cfg, run_dir, planned=Planned(plan), progress=False, log=lambda msg: None)
        block = runs.read_run_json(run_dir)["adaptive"]

    ok = True
    tot_full = tot_adapt = 0.0
    print(f"adaptive sweep ({args.config}, tolerance {block['tolerance']:.0%}) vs the full grid ({Path(args.full).name})")
    print(f"{'model':24s} {'full knee':>9s} {'adaptive knee':>13s}  {'measured c':28s} {'full grid':>10s} "
          f"{'adaptive':>10s} {'share':>6s}  stopped")
    for pm in plan.models:
        m = block["models"][pm.model]
        measured = [p["concurrency"] for p in m["points"] if p["measured"]]
        wall = {p.concurrency: p.wall_s for p in pm.points if p.load == "closed"}
        t_full = pm.server_start_s + sum(wall.get(c, 0.0) for c in full_grid)
        t_adapt = pm.server_start_s + sum(wall[c] for c in measured)
        tot_full += t_full
        tot_adapt += t_adapt
        same = m["knee_concurrency"] == full_knees.get(pm.model)
        ok &= same
        for p in m["points"]:  # the same simulation: a point both measured agrees exactly
            ref = full_tok.get((pm.model, p["concurrency"]))
            if p["measured"] and ref and abs(p["output_throughput_tok_s"] - ref) > 1e-6 * ref:
                print(f"  note: {pm.model} c = {p['concurrency']} differs from the full run "
                      f"({p['output_throughput_tok_s']:.1f} vs {ref:.1f} tok/s)")
        def kt(k):
            return str(k) if k is not None else "not reached"
        print(f"{pm.model:24s} {kt(full_knees.get(pm.model)):>9s} {kt(m['knee_concurrency']):>13s}"
              f"{'' if same else ' DIFFERS'}  {', '.join(map(str, measured)):28s} {format_duration(t_full):>10s} "
              f"{format_duration(t_adapt):>10s} {t_adapt / t_full:6.0%}  {m['stopped']}")
    share = tot_adapt / tot_full
    print(f"{'all models':24s} {'':9s} {'':13s}  {'':28s} {format_duration(tot_full):>10s} "
          f"{format_duration(tot_adapt):>10s} {share:6.0%}")
    print(f"same knee for every model: {'yes' if ok else 'NO'}; hardware time {share:.0%} of the full grid's "
          f"(goal: at most 50 %)")
    return 0 if ok and share <= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
