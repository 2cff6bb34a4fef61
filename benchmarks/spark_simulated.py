"""The whole workflow at Spark scale on the simulated server: its wall time and peak memory.

    python benchmarks/spark_simulated.py [--config config/spark-simulated.yaml] [--workdir /tmp/batchmark-spark-sim]
                                         [--runs 2] [--keep]

Copies the committed tree (``git ls-files``) into ``--workdir`` (emptied first; the virtual environment
linked, not copied), then runs ``snakemake --cores all --configfile CONFIG --config fresh=1`` ``--runs`` times
(each a new run: parts, merge, summaries, analysis, pages, site) and ``batchmark diff`` of the last two.
For each it prints the wall time, the peak resident memory of the largest process (GNU ``/usr/bin/time``'s
maximum RSS of the command and its descendants) and, for the workflow, the size of the run folder and the
largest page of the site.  The full config is config/spark.yaml's grid on the simulated server:
5 models, concurrency 1 … 256, 5 repeats, 256 output tokens, the open loop — about 13,000 closed-loop
requests a model.  Run it on a quiet machine and read the load average it prints beside the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB of the largest process among the command and its descendants, output) of ``cmd``.

    The peak is GNU time's maximum resident set size (``/usr/bin/time -f %M``: Linux's ``wait4`` counts the
    largest of a process and the descendants it waited for); exits on failure.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        t0 = time.monotonic()
        res = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], cwd=cwd, env=env,
                             capture_output=True, text=True)
        wall = time.monotonic() - t0
        peak_kb = float((rss.read().strip().splitlines() or ["0"])[-1])
    if res.returncode != 0:
        sys.exit(f"spark_simulated: `{' '.join(cmd)}` failed with exit code {res.returncode}:\n"
                 + (res.stdout + res.stderr)[-3000:])
    return wall, peak_kb / 1024, res.stdout + res.stderr


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main() -> int:
    """Copy the tree, run the workflow ``--runs`` times and the diff, print time and memory of each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/spark-simulated.yaml", help="simulated sweep config (default: full Spark size)")
    ap.add_argument("--workdir", default="/tmp/batchmark-spark-sim", help="scratch copy of the tree (emptied first)")
    ap.add_argument("--runs", type=int, default=2, help="fresh runs of the workflow (default: 2, then a diff of the two)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy afterwards")
    args = ap.parse_args()
    work = Path(args.workdir)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, files):
        src, dst = REPO / f.decode(), work / f.decode()
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    shutil.copy2(REPO / args.config, work / args.config)  # the config as it is here, committed or not
    env = {**os.environ, "PYTHONPATH": str(work), "BATCHMARK_ROOT": str(work)}
    py = sys.executable
    load_before = os.getloadavg()[0]
    print(f"{args.config}: {os.cpu_count()} cores, load average {load_before:.2f} before")
    before = {p.name for p in (work / "data" / "runs").iterdir()} if (work / "data" / "runs").is_dir() else set()
    runs: list[str] = []
    for i in range(args.runs):
        wall, peak, _ = _timed([py, "-m", "snakemake", "--cores", "all", "--configfile", args.config,
                                "--config", "fresh=1", "--quiet"], work, env)
        new = sorted({p.name for p in (work / "data" / "runs").iterdir() if not p.name.startswith(".")} - before - set(runs))
        runs += new
        pages = sorted((p.stat().st_size, p) for p in (work / "site").rglob("*.html"))
        print(f"workflow {i + 1}: {wall:7.1f} s, peak memory {peak:7.0f} MB; run {new[-1] if new else '?'} "
              f"{_size_mb(work / 'data' / 'runs' / new[-1]) if new else 0:.0f} MB; largest page "
              f"{pages[-1][0] / 1e6:.2f} MB ({pages[-1][1].relative_to(work)})" if pages else "")
    if len(runs) >= 2:
        wall, peak, out = _timed([py, "-m", "pipeline", "diff", runs[-2], runs[-1]], work, env)
        first = out.splitlines()[0] if out else ""
        print(f"diff of the two: {wall:7.1f} s, peak memory {peak:7.0f} MB; {first[:160]}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
