"""``batchmark plan config/vllm-cpu.yaml`` against the wall time of a real sweep of that config on this machine.

    python benchmarks/plan_cpu_walltime.py [--config config/vllm-cpu.yaml] [--run RUN_ID]

The plan of the default config (its hardware profile ``cpu`` states no spec, so the plan takes this machine's probe:
the one stored with its newest run on this host, or one run now, and says which) is compared with the newest
complete run of that config measured on this host (``--run`` to choose one): its wall time is ``finished_at −
started_at`` of its ``run.json`` (the probes, every server's start and every point; not the install nor the pages).
Prints both, the error (plan / measured − 1) and whether it is within the 25 % target; exits 1 when it is not.
A real sweep measures it afresh: ``batchmark sweep config/vllm-cpu.yaml`` (about 7 minutes on 2 quiet cores), then
run this again.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measured_run(config_name: str, run_id: str | None) -> tuple[str, float]:
    """(run id, wall s) of the chosen or newest complete run of ``config_name`` on this host."""
    from pipeline.core import paths

    best = None
    for meta_path in sorted(paths.runs_dir().glob("*/run.json")):
        meta = json.loads(meta_path.read_text())
        rid = meta_path.parent.name
        if run_id and rid != run_id:
            continue
        if (meta.get("config_name") == config_name and meta.get("status") == "complete"
                and meta.get("host") == socket.gethostname() and meta.get("finished_at")):
            wall = (datetime.fromisoformat(meta["finished_at"]) - datetime.fromisoformat(meta["started_at"])).total_seconds()
            best = (rid, wall)
    if best is None:
        sys.exit(f"no complete run of {config_name!r} measured on {socket.gethostname()} "
                 "(batchmark sweep config/vllm-cpu.yaml makes one)")
    return best


def main() -> int:
    """Print the plan of the default CPU config beside the wall time of its committed real sweep, and their ratio; 0."""
    from pipeline.config.sweepconfig import load_config
    from pipeline.machine.hardware import load_profile
    from pipeline.plan.estimate import format_duration, make_plan
    from pipeline.plan.probed import probe_now

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "vllm-cpu.yaml"))
    ap.add_argument("--run", help="the run to compare with (default the newest of the config on this host)")
    args = ap.parse_args()
    cfg = load_config(args.config)
    hw = load_profile(cfg.hardware)
    if not hw.bandwidth_gb_s_spec or not hw.memory_gb:
        probe_now(hw.name)
    plan = make_plan(cfg)
    rid, wall = measured_run(cfg.name, args.run)
    err = plan.wall_s / wall - 1
    print(plan.hardware_note or f"profile {hw.name!r}: its spec figures")
    print(f"plan:     {format_duration(plan.wall_s)} ({plan.wall_s:.0f} s)")
    print(f"measured: {format_duration(wall)} ({wall:.0f} s), run {rid}")
    print(f"error:    {err:+.1%} ({'within' if abs(err) <= 0.25 else 'OUTSIDE'} the 25 % target)")
    return 0 if abs(err) <= 0.25 else 1


if __name__ == "__main__":
    raise SystemExit(main())
