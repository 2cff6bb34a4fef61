"""The site's downloads of each run (``downloads/<run_id>/``): its run.json, summaries and analysis at the current
schema versions, the summaries as CSV, and its raw request records as ``records.zip``."""

from __future__ import annotations

import csv
import io
import os
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.pages.escape import csv_cell
from pipeline.store import runs
from pipeline.store.schemas import AnalysisFile, RunFile, StoredFile, SummariesFile, stamped, version_of

if TYPE_CHECKING:
    from pipeline.analysis.stages import RunResults


def _summaries_csv(res: "RunResults") -> str:
    """A run's summaries as CSV, one row per point: its key (with the variant), throughputs, latency percentiles, then
    the client's own figures (:mod:`pipeline.metrics.clientside`: in flight, read wait, CPU share, delivered
    throughput, the client-bound flag and why, event-loop lag, HTTP connect and first byte); a figure a point lacks is
    an empty cell."""
    cols = ["model", "engine", "variant", "input_len", "output_len", "concurrency", "repeats", "completed", "failed",
            "output_throughput_tok_s", "per_user_tok_s", "prefill_throughput_tok_s", "step_time_s"]
    client = ["achieved_concurrency", "client_read_wait_s", "client_cpu_share", "delivered_output_throughput_tok_s",
              "client_bound", "client_bound_reason"]
    lat, phases = ([f"{m}_{q}" for m in names for q in ("p50", "p90", "p99", "mean")]
                   for names in (("ttft_s", "tpot_s", "itl_s", "e2el_s"), ("client_lag_s", "connect_s", "first_byte_s")))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols + lat + client + phases)
    for p in (x.as_dict() for x in res.summaries):
        def q(names: list[str]) -> list[Any]:
            return [(p.get(m.rsplit("_", 1)[0]) or {}).get(m.rsplit("_", 1)[1]) for m in names]
        w.writerow([csv_cell(p.get(c)) for c in cols] + q(lat) + [csv_cell(p.get(c)) for c in client] + q(phases))
    return buf.getvalue()


def _records_zip(run_dir: Path, out: Path) -> None:
    """Zip a run's raw request records (``points/**``: each point's JSON and, since schema 3, its Parquet file)
    into ``out`` (deterministic order and times).  Only the run folder's own regular files
    (:func:`pipeline.store.pointfiles.own_file`): a symbolic link named like a record, or under a linked folder,
    is never followed, so nothing outside the run folder reaches a download; each is read without following a link."""
    from pipeline.store.pointfiles import own_file

    files = sorted(p for p in (run_dir / "points").rglob("*")
                   if p.suffix in (".json", ".parquet") and not p.name.startswith(".") and own_file(run_dir, p))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with runs.naming_file(out), zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            info = zipfile.ZipInfo(str(f.relative_to(run_dir)), date_time=(2000, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            fd = os.open(f, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh:
                zf.writestr(info, fh.read())
    os.replace(tmp, out)


def _write_current(cls: type[StoredFile], src: Path, dst: Path) -> None:
    """Copy the stored file ``src`` to ``dst`` at ``cls.current``: as it is (its bytes) when already there, else its
    migration (:func:`pipeline.store.runs.read_stored`: the names and shapes of this version, no number changed), so a
    download of a run an earlier batchmark wrote says ``caveats``, ``max_concurrency`` and the SLO's new keys as
    the pages beside it and its ``summaries.csv`` do."""
    text = src.read_text()
    if version_of(src, runs.read_json(src)) < cls.current:
        runs.atomic_write_json(dst, runs.read_stored(cls, src))
    else:
        runs.atomic_write_text(dst, text)


def write_downloads(docs_dir: Path, results: list["RunResults"]) -> list[Path]:
    """Copy each run's run.json, summaries and analysis (JSON, and summaries as CSV) under ``downloads/<run_id>/``,
    plus ``records.zip`` with the raw request records of a measured run.  Summaries and analysis
    that the stages have not written into the run are written here from memory (never into the run).  Returns the
    files written."""
    written = []
    for res in results:
        rd = res.run_dir
        out = docs_dir / "downloads" / rd.name
        _write_current(RunFile, rd / "run.json", out / "run.json")
        # a file the run does not store is written as the stage would write it, stamped with its own version
        for name, doc in (("summaries.json", stamped(SummariesFile, {"run_id": rd.name,
                                                                     "points": [x.as_dict() for x in res.summaries]})),
                          ("analysis.json", stamped(AnalysisFile, {"run_id": rd.name, **res.analysis}))):
            if (rd / name).is_file():
                _write_current(SummariesFile if name == "summaries.json" else AnalysisFile, rd / name, out / name)
            else:
                runs.atomic_write_json(out / name, doc)
        runs.atomic_write_text(out / "summaries.csv", _summaries_csv(res))
        written += [out / n for n in ("run.json", "summaries.json", "analysis.json", "summaries.csv")]
        if (rd / "points").is_dir():
            _records_zip(rd, out / "records.zip")
            written.append(out / "records.zip")
    return written
