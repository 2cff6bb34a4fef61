"""Benchmark: request records at the full size of config/spark.yaml, old JSON format beside the new Parquet one.

    python benchmarks/record_scale.py [--models 5] [--no-old] [--encodings] [--keep DIR]

Generates the records a run of ``config/spark.yaml`` makes (its concurrency grid, repeats, warm-up and
``max(4·c, 32)`` measured requests per repeat, 256 output tokens, one token a chunk as vLLM streams
them: 13,115 requests and 3.36 M token times per model; 5 models), with times built the way the load
generator takes them (``time.perf_counter()`` differences, so every bit of a float64 is used, the
worst case for compression), from a continuous-batching model (decode step 12 ms + 0.25 ms per
sequence in flight, log-normal jitter).  Writes them once in each format into a scratch run folder
(nothing under data/) and prints, for each format:

- size on disk of the run's point files;
- write time (the sweep's ``write_point``, all points);
- time to compute the summaries of every point (the ``summarize`` stage: read every point file, then
  ``metrics.summarize_run``), in a fresh process;
- peak memory (maximum resident set size, ``VmHWM``) of that process.

The old format is the JSON point file of schema version 2 (``json.dumps(records.as_dict(), indent=1)``,
as batchmark wrote it before request records moved to Parquet), read as per-request ``RequestRecord`` objects (``pointfiles.load_point``)
and summarised from them; the new one is the Parquet file of schema version 3 read into arrays
(``pointfiles.load_points_arrays``); their summaries are compared (identical: the times are the same floats).
``--encodings`` also writes one model's records with other Parquet settings,
float64 seconds among them (docs/storage.md quotes them).  Targets: at most 100 MB on disk, summaries in under
a minute on a 2-core machine, peak memory under 4 GB.  Figures, not assertions: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline.core import arrays  # noqa: E402
from pipeline.store import pointfiles, runs  # noqa: E402
from pipeline.core.arrays import PointArrays, RequestArrays  # noqa: E402
from pipeline.core.records import PointKey, RepeatRecord  # noqa: E402

#: config/spark.yaml: models, concurrency grid, repeats, lengths (read from the file, so the benchmark follows it).
SPARK = REPO / "config" / "spark.yaml"
STEP_S, STEP_PER_SEQ_S = 0.012, 0.00025


def spark_grid() -> tuple[list[str], list[int], int, int, int]:
    """(model names, concurrencies, repeats, input_len, output_len) of config/spark.yaml."""
    import yaml

    cfg = yaml.safe_load(SPARK.read_text())
    return ([m["name"] for m in cfg["models"]], list(cfg["concurrency"]), int(cfg["repeats"]),
            int(cfg["input_len"]), int(cfg["output_len"]))


def point_arrays(model: str, c: int, repeats: int, input_len: int, output_len: int, seed: int) -> PointArrays:
    """One closed-loop point of ``c`` in flight: ``repeats`` repeats of c warm-up + max(4c, 32) measured requests."""
    rng = np.random.default_rng(seed)
    base = 12345.678901234 + seed  # perf_counter() at the point's start: times are differences of such floats
    n_per = c + max(4 * c, 32)
    n = n_per * repeats
    step = (STEP_S + STEP_PER_SEQ_S * c) * rng.lognormal(0.0, 0.15, size=(n, output_len))
    prefill = 0.002 * c * rng.lognormal(0.0, 0.2, size=n) + 0.05
    # request i of a repeat starts when request i - c of it ended (closed loop), so sends spread over the repeat
    dur = prefill + step[:, 1:].sum(axis=1)
    sent = np.empty(n)
    for r in range(repeats):
        rows = slice(r * n_per, (r + 1) * n_per)
        d = dur[rows]
        s = np.zeros(n_per)
        for i in range(c, n_per):
            s[i] = s[i - c] + d[i - c]
        sent[rows] = s + r * 1000.0
    ns = np.round((sent[:, None] + prefill[:, None] + np.cumsum(step, axis=1) - step[:, :1]) * 1e9)
    chunk_t = ((base + ns * 1e-9) - base).ravel()  # what perf_counter() - t0 gives: every mantissa bit used
    sent_t = (base + np.round(sent * 1e9) * 1e-9) - base
    times = chunk_t.reshape(n, output_len)
    repeat = np.repeat(np.arange(repeats), n_per)
    warm = np.tile(np.arange(n_per) < c, repeats)
    nan = np.full(n, np.nan)
    obj = np.empty(n, dtype=object)
    obj[:] = None
    src = np.empty(n, dtype=object)
    src[:] = "per_chunk_usage"
    flags = np.empty(n, dtype=object)
    flags[:] = [[] for _ in range(n)]
    req = RequestArrays(
        repeat=repeat, request_id=np.tile(np.arange(n_per), repeats), queued_s=sent_t.copy(), sent_s=sent_t,
        first_token_s=times[:, 0].copy(), done_s=times[:, -1].copy(), first_content_s=times[:, 0].copy(),
        scheduled_s=nan, lag_s=nan.copy(), input_tokens=np.full(n, input_len), output_tokens=np.full(n, output_len),
        hidden_tokens=np.zeros(n, dtype=np.int64), usage_reported=np.ones(n, dtype=bool), warmup=warm, error=obj,
        token_count_source=src, token_count_reason=obj.copy(), token_count_flags=flags,
        chunk_offsets=np.arange(n + 1, dtype=np.int64) * output_len, chunk_t_s=chunk_t,
        chunk_tokens=np.ones(n * output_len, dtype=np.int64))
    heads = []
    for r in range(repeats):
        rows = (repeat == r) & ~warm
        heads.append(RepeatRecord(r, "served", float(sent_t[rows].min()), float(times[rows, -1].max()), [],
                                  server_metrics={"before": {"vllm:num_requests_running": 0.0},
                                                  "max_during": {"vllm:num_requests_running": float(c)}}))
    key = PointKey(model, "vllm", input_len, output_len, c)
    return PointArrays(key, heads, req, meta={"seed": seed, "requests_per_repeat": n_per - c, "warmup_per_repeat": c})


def generate(models: list[str], grid: list[int], repeats: int, input_len: int, output_len: int):
    """Every point of the run, model by model (a generator: one point in memory at a time)."""
    for mi, m in enumerate(models):
        for c in grid:
            yield point_arrays(m, c, repeats, input_len, output_len, seed=1000 * mi + c)


def new_run(root: Path, name: str) -> Path:
    """A fresh run folder ``root/name`` with its ``run.json`` (source measured) for the generated records; its path."""
    run = root / name
    run.mkdir(parents=True)
    runs.create_run(run, {"source": "measured", "config": {"name": "record-scale"}})
    return run


def write_old_point(run: Path, pa: PointArrays) -> None:
    """The point file as batchmark wrote it before schema version 3: every request inline, JSON indent 1."""
    from pipeline.store.schemas import stamped, PointRecordsFile

    path = pointfiles.point_path(run, pa.point)
    body = arrays.to_records(pa).as_dict()
    runs.atomic_create_json(path, {**stamped(PointRecordsFile, body), "schema_version": 2})


def folder_bytes(path: Path) -> int:
    """Bytes on disk of every file under ``path`` (bytes)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


SUMMARIZE = """
import json, sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from pipeline.metrics import summarize as metrics
from pipeline.store import pointfiles
t = time.perf_counter()
points = pointfiles.{loader}(Path({run!r}))
summaries = metrics.summarize_run(points, {{"goodput_ttft_ms": 2000, "goodput_tpot_ms": 100, "ttft_p99_max_ms": 2000, "tpot_p99_max_ms": 100}})
dt = time.perf_counter() - t
# VmHWM: this process's own peak resident set (ru_maxrss would carry the parent's, inherited across exec)
peak_kb = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
print(json.dumps({{"s": dt, "peak_mb": peak_kb / 1024,
                  "points": len(summaries), "summaries": [s.as_dict() for s in summaries]}}))
"""


def summarize_in_child(run: Path, loader: str) -> dict:
    """Time and peak memory of reading every point of ``run`` and summarising it, in a fresh Python process."""
    out = subprocess.run([sys.executable, "-c", SUMMARIZE.format(repo=str(REPO), loader=loader, run=str(run))],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def encodings(root: Path, pts: list[PointArrays]) -> list[tuple[str, int, float, float]]:
    """(setting, bytes, write s, read s) of one model's points written with other Parquet settings."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.store import columnar

    dicts = ["error", "token_count_source", "token_count_reason"]
    bss = list(columnar.FLOAT_COLUMNS)
    ns_type = pa.duration("ns")

    def ns_table(p: PointArrays) -> pa.Table:  # times as int64 nanoseconds (rounded: not bit for bit)
        t = columnar.to_table(p)
        a = p.requests
        for n in columnar.FLOAT_FIELDS:
            v = getattr(a, n)
            ns = np.rint(np.nan_to_num(v) * 1e9).astype(np.int64)
            t = t.set_column(t.schema.get_field_index(n), n, pa.array(ns, ns_type, mask=np.isnan(v)))
        off = pa.array(a.chunk_offsets.astype(np.int32))
        ns = np.rint(a.chunk_t_s * 1e9).astype(np.int64)
        return t.set_column(t.schema.get_field_index("chunk_t_s"), "chunk_t_s",
                            pa.ListArray.from_arrays(off, pa.array(ns, ns_type)))

    delta = {c: "DELTA_BINARY_PACKED" for c in columnar.FLOAT_COLUMNS}
    settings = {
        "float64 s, byte_stream_split + zstd-3 (chosen)": (columnar.to_table, dict(
            compression="zstd", compression_level=3, use_byte_stream_split=bss, use_dictionary=dicts)),
        "float64 s, byte_stream_split + zstd-9": (columnar.to_table, dict(
            compression="zstd", compression_level=9, use_byte_stream_split=bss, use_dictionary=dicts)),
        "float64 s, byte_stream_split + snappy": (columnar.to_table, dict(
            compression="snappy", use_byte_stream_split=bss, use_dictionary=dicts)),
        "float64 s, plain + zstd-3": (columnar.to_table, dict(compression="zstd", compression_level=3)),
        "float64 s, byte_stream_split, uncompressed": (columnar.to_table, dict(
            compression="none", use_byte_stream_split=bss, use_dictionary=dicts)),
        "int64 ns (rounded), delta + zstd-3": (ns_table, dict(compression="zstd", compression_level=3,
                                                             column_encoding=delta, use_dictionary=dicts)),
    }
    out = []
    for name, (table_of, kw) in settings.items():
        d = root / "enc"
        d.mkdir(exist_ok=True)
        t = time.perf_counter()
        for i, p in enumerate(pts):
            pq.write_table(table_of(p), d / f"{i}.parquet", write_statistics=False, **kw)
        w = time.perf_counter() - t
        t = time.perf_counter()
        for i, p in enumerate(pts):
            pq.read_table(d / f"{i}.parquet")
        r = time.perf_counter() - t
        out.append((name, folder_bytes(d), w, r))
        shutil.rmtree(d)
    return out


def main(argv: list[str] | None = None) -> int:
    """Write, read and summarise records of config/spark.yaml's size in the old JSON and the Parquet form; print size (MB), time (s) and peak memory (GB) of each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=None, help="how many of config/spark.yaml's models (default: all)")
    ap.add_argument("--no-old", action="store_true", help="skip the old JSON format (it takes minutes)")
    ap.add_argument("--encodings", action="store_true", help="also compare Parquet settings on one model")
    ap.add_argument("--keep", help="write the scratch runs here and keep them (default: a temporary folder)")
    args = ap.parse_args(argv)
    models, grid, repeats, input_len, output_len = spark_grid()
    models = models[: args.models] if args.models else models
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="record-scale-"))
    n_req = sum(repeats * (c + max(4 * c, 32)) for c in grid)
    print(f"config/spark.yaml: {len(models)} models x {len(grid)} concurrencies x {repeats} repeats: "
          f"{n_req:,} requests and {n_req * output_len / 1e6:.2f} M token times per model, "
          f"{len(models) * n_req * output_len / 1e6:.1f} M in all")
    try:
        new = new_run(root, "new")
        old = None if args.no_old else new_run(root, "old")
        t_new = t_old = 0.0
        first_model: list[PointArrays] = []
        for pa in generate(models, grid, repeats, input_len, output_len):
            t = time.perf_counter()
            runs.write_point(new, pa)
            t_new += time.perf_counter() - t
            if old is not None:
                t = time.perf_counter()
                write_old_point(old, pa)
                t_old += time.perf_counter() - t
            if args.encodings and pa.point.model == models[0]:
                first_model.append(pa)
        rows = [("new: Parquet (schema 3)", new, "load_points_arrays", t_new)]
        if old is not None:
            rows.insert(0, ("old: JSON (schema 2)", old, "load_points", t_old))
        results = {}
        for name, run, loader, t_write in rows:
            res = summarize_in_child(run, loader)
            results[name] = res
            print(f"{name:26s} {folder_bytes(run / 'points') / 1e6:9.1f} MB on disk   write {t_write:7.1f} s   "
                  f"read + summaries {res['s']:7.1f} s   peak memory {res['peak_mb'] / 1024:6.2f} GB   "
                  f"({res['points']} points)")
        if len(results) == 2:
            a, b = (v["summaries"] for v in results.values())
            print("summaries of the two formats identical:", a == b)
        print("targets: <= 100 MB on disk, summaries < 60 s, peak memory < 4 GB")
        if args.encodings:
            print(f"\nParquet settings, one model ({models[0]}, {len(first_model)} points):")
            for name, size, w, r in encodings(root, first_model):
                print(f"  {name:52s} {size / 1e6:7.1f} MB   write {w:5.1f} s   read {r:5.1f} s")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
