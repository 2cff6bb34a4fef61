"""How well the calibrated per-step model predicts a curve from three of its points.

For every committed run under ``data/runs/`` (git-tracked only, never a user's own runs) and for
the published llama.cpp DGX Spark measurement (``../shared/reference/``, imported into a
temporary folder; skipped with a note where absent), ``batchmark predict``'s default calibration
(the smallest, the next and the largest concurrency) is fitted and the output throughput of every
other measured point is predicted.  Prints per run and per workload the median and worst absolute
error (output throughput; for served runs TPOT p50 and TTFT p50 too), and the fitted terms in words.  Goal: median <= 10 %, worst <= 20 %, on each.

    python benchmarks/prediction_accuracy.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.views.predict import predict_run  # noqa: E402
from pipeline.importers.reference import import_reference  # noqa: E402

REFERENCE = ROOT / ".." / "shared" / "reference" / "llamacpp-dgx-spark-batched-bench.md"


def committed_runs() -> list[Path]:
    """Run folders under data/runs/ that git tracks (a ``run.json`` committed)."""
    out = subprocess.run(["git", "ls-files", "data/runs/*/run.json"], cwd=ROOT, capture_output=True, text=True)
    return sorted({ROOT / Path(line).parent for line in out.stdout.split()})


def report(label: str, run: Path) -> list[float]:
    """Print one run's calibrated-prediction errors per workload; return the absolute output-throughput errors (fractions)."""
    doc = predict_run(run)
    print(f"\n{label} ({doc['source']})")
    every: list[float] = []
    for m in doc["models"]:
        name = f"  {m['model']} [{m['engine']}, in {m['input_len']} / out {m['output_len']}]"
        if m["error"]:
            print(f"{name}: no fit: {m['error']}")
            continue
        errs = [abs(p["error"]["output_throughput_tok_s"]) for p in m["points"]
                if p["measured"] and not p["calibration"] and p["error"]["output_throughput_tok_s"] is not None]
        every += errs
        print(f"{name}: calibrated on {m['calibrated_on']}: median {statistics.median(errs):.1%}, "
              f"worst {max(errs):.1%} over {len(errs)} points")
        lat = []
        for metric in ("tpot_s", "ttft_s"):  # served runs' latencies (a static batch's TTFT is not predicted)
            e = [abs(p["error"][metric]) for p in m["points"] if p["measured"] and not p["calibration"]
                 and p["error"].get(metric) is not None]
            if e:
                lat.append(f"{metric[:-2].upper()} p50 median {statistics.median(e):.1%}, worst {max(e):.1%}")
        if lat:
            print(f"      {'; '.join(lat)}")
        print(f"      {m['fit']['words']}")
    if every:
        ok = statistics.median(every) <= 0.10 and max(every) <= 0.20
        print(f"  ALL: median {statistics.median(every):.1%}, worst {max(every):.1%} over {len(every)} points "
              f"({'meets' if ok else 'misses'} the goal: median <= 10 %, worst <= 20 %)")
    return every


def main() -> int:
    """Report every committed run and the shared reference (when present); always exit 0 (figures, not assertions)."""
    for run in committed_runs():
        report(f"run {run.name}", run)
    if REFERENCE.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            report("llama.cpp DGX Spark reference", import_reference(REFERENCE, Path(tmp) / "reference-dgx-spark"))
    else:
        print(f"\nreference absent: {REFERENCE} (it lives beside the repository)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
