"""Benchmark: importing a sweep folder of many sub-runs stays linear in their number.

    python benchmarks/sweep_import_scale.py [--sizes 1000 2000 5000 10000] [--format vllm-bench|aiperf] [--parse-only]

Generates, per size N, a folder of N sub-runs in the tool's own layout and imports it into a scratch project root
(``BATCHMARK_ROOT``, as ``tests/conftest.py``'s ``make_scratch_root`` builds it; nothing is written under data/):

- ``vllm-bench``: a ``vllm bench sweep serve`` experiment folder (``vllm/benchmarks/sweep/serve.py``): N / 2
  combination folders ``BENCH--max_concurrency=C-random_input_len=L/`` with ``run=0.json`` and ``run=1.json`` each
  (the two repeats of one point) and ``summary.json`` beside them;
- ``aiperf``: an AIPerf multi-run tree (``docs/tutorials/multi-run-confidence.md``): N / 2 artifact folders with
  ``profile_runs/run_0001/`` and ``run_0002/``.

Prints, per size, the wall time of parsing (``pipeline.importers.parse``) and of the whole import (parse + cards +
``summaries.json`` + ``analysis.json``), and each time divided by N (µs per sub-run: flat when linear, growing with N
when quadratic).  Figures, not assertions: the machine is shared.  Goal: 10,000 sub-runs import with the time per
sub-run within 2× of 1,000's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LENGTHS = [64 * (i + 1) for i in range(50)]  # random_input_len values: 50 shapes


def _vllm_run(c: int, isl: int, run: int) -> dict:
    """One ``run=N.json`` (a ``vllm bench serve --save-result`` result with the sweep's keys), its figures
    consistent: max(8, c) requests × 32 output tokens in (tokens / throughput) seconds."""
    n = max(8, c)
    tput = 20.0 * c ** 0.7 + run
    tpot_ms = 1000.0 * c / tput
    return {"date": f"20261203-{run:06d}", "backend": "vllm", "model_id": "m", "num_prompts": n, "request_rate": "inf",
            "burstiness": 1.0, "max_concurrency": c, "duration": 32 * n / tput, "completed": n, "failed": 0,
            "total_input_tokens": n * isl, "total_output_tokens": 32 * n, "output_throughput": tput,
            "median_ttft_ms": 100.0, "mean_ttft_ms": 100.0, "median_tpot_ms": tpot_ms, "mean_tpot_ms": tpot_ms,
            "median_e2el_ms": 100.0 + 31 * tpot_ms, "mean_e2el_ms": 100.0 + 31 * tpot_ms, "run_number": run,
            "random_input_len": isl}


def vllm_folder(root: Path, n: int) -> Path:
    """A ``vllm bench sweep serve`` experiment folder of ``n`` run files (``n`` / 2 combinations × 2 runs)."""
    exp = root / f"vllm-{n}"
    for i in range(n // 2):
        c, isl = 1 + i // len(LENGTHS), LENGTHS[i % len(LENGTHS)]
        folder = exp / f"BENCH--max_concurrency={c}-random_input_len={isl}"
        folder.mkdir(parents=True)
        runs = [_vllm_run(c, isl, r) for r in (0, 1)]
        for r, d in enumerate(runs):
            (folder / f"run={r}.json").write_text(json.dumps(d))
        (folder / "summary.json").write_text(json.dumps(runs))
    return exp


def aiperf_folder(root: Path, n: int) -> Path:
    """An AIPerf tree of ``n`` profile exports (``n`` / 2 artifacts × ``profile_runs/run_000{1,2}``)."""
    template = json.loads((REPO / "tests" / "data" / "aiperf-sweep" / "concurrency-sweep" / "artifacts" /
                           "llama-3-8b-openai-chat-concurrency_sweep" / "profile_runs" / "trial_0001" /
                           "concurrency_10" / "profile_export_aiperf.json").read_text())
    top = root / f"aiperf-{n}"
    for i in range(n // 2):
        c = 1 + i
        for r in (1, 2):
            d = json.loads(json.dumps(template))
            d["input_config"]["loadgen"]["concurrency"] = c
            d["input_config"]["output"] = {"artifact_directory": f"art-{i}"}
            d["request_count"]["avg"] = max(200, c)
            dest = top / f"art-{i}" / "profile_runs" / f"run_000{r}" / "profile_export_aiperf.json"
            dest.parent.mkdir(parents=True)
            dest.write_text(json.dumps(d))
    return top


def main() -> None:
    """Print parse and import wall times per number of sub-runs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000])
    ap.add_argument("--format", choices=["vllm-bench", "aiperf"], default="vllm-bench")
    ap.add_argument("--parse-only", action="store_true", help="time the parse alone (no run written)")
    args = ap.parse_args()

    from tests.conftest import make_scratch_root

    with tempfile.TemporaryDirectory() as tmp:
        root = make_scratch_root(Path(tmp))
        os.environ["BATCHMARK_ROOT"] = str(root)
        from pipeline.importers import ImportOptions, import_run, parse

        print(f"{'sub-runs':>8} {'points':>7} {'parse s':>8} {'µs/run':>7} {'import s':>9} {'µs/run':>7}")
        for size in args.sizes:
            src = (vllm_folder if args.format == "vllm-bench" else aiperf_folder)(Path(tmp) / "src", size)
            t0 = time.perf_counter()
            res = parse(args.format, [src], model="m")
            t_parse = time.perf_counter() - t0
            t_import = float("nan")
            if not args.parse_only:
                t0 = time.perf_counter()
                import_run(args.format, [src], "h200", run_id=f"scale-{args.format}-{size}", options=ImportOptions(model="m"))
                t_import = time.perf_counter() - t0
            print(f"{size:8d} {len(res.summaries):7d} {t_parse:8.2f} {t_parse / size * 1e6:7.0f} "
                  f"{t_import:9.2f} {t_import / size * 1e6:7.0f}", flush=True)


if __name__ == "__main__":
    main()
