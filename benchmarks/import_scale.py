"""Benchmark: importing, analysing and viewing a large llama-batched-bench table.

    python benchmarks/import_scale.py [--sizes 1000 10000 100000] [--repeats 3] [--format md|jsonl]

Generates a llama-batched-bench Markdown table (or JSONL) of each size — several models (with
and without a model card), prompt lengths and generation lengths, B = 1, 2, 4 … 512 — imports it
into a scratch project root (``BATCHMARK_ROOT``, as ``tests/conftest.py``'s ``make_scratch_root``
builds it; nothing is written under data/) and prints, per size, the median wall time of:
parsing, the whole import (parse + cards + ``summaries.json`` + ``analysis.json``), the analysis
alone (``stages.analysis_of``, in memory) and the run view the pages read (``view_of(stages.load_run(...))``).
Sizes of 10,000 rows and more run once.  Figures, not assertions: the machine is shared.
Goal: 100,000 rows import in under 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (name as llama.cpp's heading gives it, description line, decode step at B = 1 (s), step growth per sequence (s)).
MODELS = [
    ("ggml-org/gpt-oss-20b-GGUF", "gpt-oss 20B MXFP4 MoE, 11.27 GiB, 20.91 B params, backend CUDA.", 0.0120, 0.00035),
    ("ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "qwen2 7B Q8_0 (dense), 7.54 GiB, 7.62 B params, backend CUDA.", 0.0190, 0.00020),
    ("ggml-org/gpt-oss-120b-GGUF", "gpt-oss 120B MXFP4 MoE, 59.02 GiB, 116.83 B params, backend CUDA.", 0.0280, 0.00060),
    ("acme/Foo-13B-Chat-Q8_0-GGUF", "foo 13B Q8_0 (dense), 13.10 GiB, 13.02 B params, backend CUDA.", 0.0330, 0.00030),
]
BATCHES = [2 ** i for i in range(10)]  # 1 … 512
HEADER = ("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
          "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|")


def grid(rows: int) -> tuple[list[int], list[int]]:
    """Prompt and generation lengths so that models × PP × TG × len(BATCHES) ≈ ``rows``."""
    workloads = max(1, rows // (len(MODELS) * len(BATCHES)))
    n_tg = max(1, int(workloads ** 0.5))
    n_pp = max(1, workloads // n_tg)
    return [128 * (i + 1) for i in range(n_pp)], [32 + 16 * j for j in range(n_tg)]


def row_figures(pp: int, tg: int, b: int, step1: float, grow: float) -> tuple:
    """(t_pp, s_pp, t_tg, s_tg, t, s) of one row, consistent as llama.cpp prints them (T_TG to 1 ms)."""
    t_pp = round(pp * b / 3500.0 + 0.01, 3)
    t_tg = round(tg * (step1 + grow * b + 1e-6 * pp), 3)
    s_pp = pp * b / t_pp
    s_tg = b * tg / t_tg
    return t_pp, s_pp, t_tg, s_tg, t_pp + t_tg, b * (pp + tg) / (t_pp + t_tg)


def markdown_table(rows: int) -> str:
    """A batched-bench Markdown output of about ``rows`` rows (one table per model)."""
    pps, tgs = grid(rows)
    out = ["# llama-batched-bench (generated)", "", "build: 6918 (2f68ce7cf)", ""]
    for name, desc, step1, grow in MODELS:
        out += [f"## {name}", "", desc, "",
                "main: n_kv_max = 1000000000, n_batch = 2048, n_ubatch = 2048, flash_attn = 1, is_pp_shared = 0, "
                "n_gpu_layers = -1, n_threads = 20, n_threads_batch = 20", "", HEADER]
        for pp in pps:
            for tg in tgs:
                for b in BATCHES:
                    t_pp, s_pp, t_tg, s_tg, t, s = row_figures(pp, tg, b, step1, grow)
                    out.append(f"| {pp:5d} | {tg:6d} | {b:4d} | {b * (pp + tg):6d} | {t_pp:8.3f} | {s_pp:8.2f} | "
                               f"{t_tg:8.3f} | {s_tg:8.2f} | {t:8.3f} | {s:8.2f} |")
        out.append("")
    return "\n".join(out) + "\n"


def jsonl_table(rows: int) -> str:
    """A batched-bench JSONL output (``-oj``) of about ``rows`` rows, one model (JSONL names none)."""
    pps, tgs = grid(rows * len(MODELS))
    _, _, step1, grow = MODELS[0]
    lines = []
    for pp in pps:
        for tg in tgs:
            for b in BATCHES:
                t_pp, s_pp, t_tg, s_tg, t, s = row_figures(pp, tg, b, step1, grow)
                lines.append(json.dumps({"n_kv_max": 1000000000, "is_pp_shared": 0, "pp": pp, "tg": tg, "pl": b,
                                         "n_kv": b * (pp + tg), "t_pp": t_pp, "speed_pp": s_pp, "t_tg": t_tg,
                                         "speed_tg": s_tg, "t": t, "speed": s}))
    return "\n".join(lines) + "\n"


def timed(fn):
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    """Print parse, import, analysis and run-view wall times per table size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--repeats", type=int, default=3, help="repeats for sizes under 10,000 rows (median shown)")
    ap.add_argument("--format", choices=["md", "jsonl"], default="md")
    args = ap.parse_args()

    from tests.conftest import make_scratch_root

    with tempfile.TemporaryDirectory() as tmp:
        root = make_scratch_root(Path(tmp))
        os.environ["BATCHMARK_ROOT"] = str(root)
        from pipeline.analysis import stages
        from pipeline.store import derivedfiles, runs
        from pipeline.importers import ImportOptions, import_run, parse
        from pipeline.pages.views import view_of

        model = None if args.format == "md" else MODELS[0][0]
        print(f"{'rows':>8} {'workloads':>9} {'MB':>6} {'parse s':>8} {'import s':>9} {'analysis s':>10} "
              f"{'run view s':>10}  repeats")
        for size in args.sizes:
            src = Path(tmp) / f"bench-{size}.{args.format}"
            src.write_text(markdown_table(size) if args.format == "md" else jsonl_table(size))
            repeats = args.repeats if size < 10000 else 1
            t_parse, t_import, t_analysis, t_view = [], [], [], []
            for i in range(repeats):
                dt, res = timed(lambda: parse("llama-batched-bench", [src], model=model))
                t_parse.append(dt)
                dt, run = timed(lambda: import_run("llama-batched-bench", [src], "dgx-spark", run_id=f"s{size}-{i}",
                                                   options=ImportOptions(model=model)))
                t_import.append(dt)
                meta, summaries = runs.read_run_json(run), derivedfiles.read_summaries(run)
                dt, _ = timed(lambda: stages.analysis_of(run, meta, summaries))
                t_analysis.append(dt)
                dt, view = timed(lambda: view_of(stages.load_run(run)))
                t_view.append(dt)
            med = statistics.median
            print(f"{len(res.summaries):8d} {len(view.workloads):9d} {src.stat().st_size / 1e6:6.1f} "
                  f"{med(t_parse):8.2f} {med(t_import):9.2f} {med(t_analysis):10.2f} {med(t_view):10.2f}  {repeats}",
                  flush=True)


if __name__ == "__main__":
    main()
