"""How well the calibrated per-step model predicts a curve from three of its points.

For every committed run under ``data/runs/`` (git-tracked only, never a user's own runs) and for
the published llama.cpp DGX Spark measurement (``../shared/reference/``, imported into a
temporary folder; skipped with a note where absent; ``BATCHMARK_SHARED`` overrides the folder), ``batchmark
predict``'s default calibration (the smallest, the next and the largest concurrency) is fitted and the output
throughput of every other measured point is predicted.  Prints per run and per workload the median and worst absolute
error (output throughput; for served runs TPOT p50 and TTFT p50 too), and the fitted terms in words.  Goal: median <= 10 %, worst <= 20 %, on each.

Then every published DGX Spark curve over concurrency (benchmarks/sparkdata.py: data/published/ and the shared
reference; four points or more, each with a decode figure) through the same code (:func:`pipeline.views.predict.
predict_workload`), its points as its tool's importer stores them (decode phase; the served card of the source's
stated format), twice: calibrated by default, and on three points below the top (the first, the second and the one
before the last) with the top predicted; each with the experts' routing as the source's tool decodes (after:
llama-benchy's distinct prompts) and as every decode-phase curve was fitted before (identical prompts, k/E).

    BATCHMARK_SHARED=../shared python benchmarks/prediction_accuracy.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.views.predict import predict_run, predict_workload  # noqa: E402
from pipeline.importers.reference import import_reference  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
REFERENCE = Path(os.environ.get("BATCHMARK_SHARED", ROOT / ".." / "shared")) / "reference" / "llamacpp-dgx-spark-batched-bench.md"


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


def spark_curve_errors(c, calibrate_on, distinct: bool) -> dict[int, float]:
    """Relative output-throughput error by concurrency of one published Spark curve's uncalibrated points, predicted by
    :func:`pipeline.views.predict.predict_workload` (``calibrate_on`` None: the default; ``distinct``: its sequences
    decode distinct prompts)."""
    from spark_truth import BW, HW, card_after, measured
    from pipeline.importers.base import summary

    rows = [summary(c.model, c.engine, c.input_len, c.output_len, p.concurrency, output_throughput_tok_s=p.decode_tok_s,
                    step_time_s=p.concurrency / p.decode_tok_s, output_throughput_window="decode_phase",
                    ttft_s={"p50": measured(c, p)["ttft_s"]} if measured(c, p)["ttft_s"] else None)
            for p in c.points]
    hw = {"bandwidth_gb_s": BW, "peak_tflops": HW.compute_peak_tflops(), "name": HW.name}
    entry = predict_workload(rows, {}, card_after(c), hw, calibrate_on, distinct_prompts=distinct)
    if entry["error"]:
        raise RuntimeError(f"{c.source}: {entry['error']}")
    return {p["concurrency"]: p["error"]["output_throughput_tok_s"] for p in entry["points"]
            if p["measured"] and not p["calibration"]}


def spark_report() -> None:
    """Print, per published Spark curve over concurrency, the median / worst output-throughput error of ``predict``
    calibrated by default and on three points below its top (module docstring), before and after; then over all."""
    from sparkdata import load_curves

    curves, note = load_curves()
    if note:
        print(f"\n{note}")
    mine = [c for c in curves if not c.by_depth and c.harness in ("static", "wave") and len(c.points) >= 4
            and all(p.decode_tok_s for p in c.points)]
    print("\npublished DGX Spark curves through batchmark predict (output throughput, median / worst; "
          "before = identical prompts, after = as the tool decodes)")
    print(f"  {'curve':46} {'default before':>16} {'default after':>16} {'top before':>16} {'top after':>16}")
    total: dict[tuple[str, bool], list[float]] = {}
    for c in mine:
        cs = sorted(p.concurrency for p in c.points)
        cells = []
        for mode, cal in (("default", None), ("top", [cs[0], cs[1], cs[-2]])):
            for after in (False, True):
                e = [abs(v) for v in spark_curve_errors(c, cal, after and c.harness == "wave").values()]
                total.setdefault((mode, after), []).extend(e)
                cells.append(f"{statistics.median(e):6.1%} / {max(e):6.1%}")
        print(f"  {c.source[:46]:46} " + " ".join(f"{x:>16}" for x in cells))
    for (mode, after), e in sorted(total.items()):
        print(f"  ALL {mode:8} {'after' if after else 'before':6}: median {statistics.median(e):.1%}, worst {max(e):.1%} "
              f"over {len(e)} points")


def main() -> int:
    """Report every committed run and the shared reference (when present); always exit 0 (figures, not assertions)."""
    for run in committed_runs():
        report(f"run {run.name}", run)
    if REFERENCE.is_file():
        with tempfile.TemporaryDirectory() as tmp:
            report("llama.cpp DGX Spark reference", import_reference(REFERENCE, Path(tmp) / "reference-dgx-spark"))
    else:
        print(f"\nreference absent: {REFERENCE} (it lives beside the repository)")
    spark_report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
