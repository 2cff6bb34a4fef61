"""Benchmark: the probe's figures and the sweep's wall time per model.

    python benchmarks/sweep_timing.py [--config config/transformers-cpu.yaml] [--repeats-probe 7]

Runs the probe, then sweeps each model of the config alone into a scratch run folder (nothing
is written under data/runs/) and prints the wall time per model and the points it measured.
Figures, not assertions: the machine is shared and noisy, so compare ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    """Print probe figures and per-model sweep wall times."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/transformers-cpu.yaml")
    ap.add_argument("--repeats-probe", type=int, default=7)
    args = ap.parse_args()

    from pipeline.config.sweepconfig import load_config
    from pipeline.machine.hardware import probe

    cfg = load_config(args.config)
    res = probe(repeats=args.repeats_probe)
    bw = res.bandwidth_repeats_gb_s
    tf = res.tflops_repeats
    print(f"probe  device {res.device}, {res.threads} threads")
    print(f"probe  bandwidth {res.bandwidth_gb_s:.1f} GB/s median (min {min(bw):.1f}, max {max(bw):.1f}, "
          f"stdev {statistics.pstdev(bw):.1f}; {len(bw)} repeats, {res.buffer_bytes / 2**30:.0f} GiB buffer)")
    print(f"probe  matmul {res.peak_tflops:.3f} TFLOP/s median (min {min(tf):.3f}, max {max(tf):.3f}; n={res.matmul_n}, {res.dtype})")

    import shutil

    from pipeline.core import paths
    from pipeline.sweep.gridwalk import run_sweep

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(paths.hardware_dir(), root / "data" / "hardware")
        os.environ["BATCHMARK_ROOT"] = str(root)
        for spec in cfg.models:
            one = cfg.model_copy(update={"models": [spec]})
            rd = root / "data" / "runs" / f"bench-{spec.name}"
            t0 = time.perf_counter()
            run_sweep(one, rd, progress=False, log=lambda msg: None)
            wall = time.perf_counter() - t0
            n = len(list((rd / "points").rglob("*.json")))
            print(f"sweep  {spec.name}: {wall:.1f} s wall for {n} points ({wall / max(n, 1):.1f} s/point, probe included)")


if __name__ == "__main__":
    main()
