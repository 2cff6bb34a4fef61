"""Benchmark: reading and checking a point of a million requests (``pipeline.store.recordcheck``), time and memory.

    python benchmarks/record_check_scale.py [--requests 1000000]

Writes one point's Parquet file of ``--requests`` requests, 4 tokens each (one a chunk), in waves of c = 1024
back to back (valid: at most 1024 in flight), then reads it back through ``pointfiles.load_point_arrays``
(schema checks, nulls, every value, order and in-flight check), and the same file with every request sent at 0
at c = 2 (a million overlapping requests: refused).  Prints the read time of each and the process's peak
resident memory (``ru_maxrss``).  Target: under 10 s and 2 GB on a 2-core machine.  Figures, not assertions.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _arrays(n: int, concurrency: int, overlap: bool):
    from pipeline.core.arrays import PointArrays, RequestArrays
    from pipeline.core.records import PointKey, RepeatRecord

    tokens = 4
    wave = np.arange(n) // concurrency
    sent = np.zeros(n) if overlap else wave * 0.1
    first = sent + 0.02
    chunk_t = (first[:, None] + 0.01 * np.arange(tokens)[None, :]).ravel()
    obj = np.empty(n, dtype=object)
    obj[:] = None
    flags = np.empty(n, dtype=object)
    flags[:] = [[] for _ in range(n)]
    req = RequestArrays(repeat=np.zeros(n, np.int64), request_id=np.arange(n), queued_s=sent.copy(), sent_s=sent,
                        first_token_s=first, done_s=first + 0.01 * (tokens - 1), first_content_s=np.full(n, np.nan),
                        scheduled_s=np.full(n, np.nan), lag_s=np.full(n, np.nan), input_tokens=np.full(n, 64),
                        output_tokens=np.full(n, tokens), hidden_tokens=np.zeros(n, np.int64),
                        usage_reported=np.ones(n, bool), warmup=np.zeros(n, bool), error=obj, token_count_source=obj,
                        token_count_reason=obj, token_count_flags=flags,
                        chunk_offsets=np.arange(n + 1) * tokens, chunk_t_s=chunk_t, chunk_tokens=np.ones(n * tokens, np.int64))
    key = PointKey("m", "vllm", 64, tokens, concurrency)
    return PointArrays(point=key, repeats=[RepeatRecord(0, "served", 0.0, float(req.done_s.max()), [])], requests=req)


def main(argv: list[str] | None = None) -> int:
    """Time and peak memory of reading and checking a million-request point (and refusing an overlapping one); 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    from pipeline.core.errors import BatchmarkError
    from pipeline.store import pointfiles, runs

    with tempfile.TemporaryDirectory() as tmp:
        for label, c, overlap in (("valid, c = 1024", 1024, False), ("overlapping, c = 2", 2, True)):
            run = Path(tmp) / label.replace(" ", "").replace(",", "_").replace("=", "")
            run.mkdir()
            path = runs.write_point(run, _arrays(args.requests, c, overlap))
            t0 = time.perf_counter()
            try:
                pointfiles.load_point_arrays(path)
                outcome = "read"
            except BatchmarkError as exc:
                outcome = "refused: " + str(exc).split(": ", 1)[1]
            print(f"{label}: {args.requests:,} requests {time.perf_counter() - t0:.2f} s, {outcome}")
    print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
