"""A point's socket reads over arrays (pure; no I/O): per-token and per-chunk ITL, time to second token, and the
per-read figures (chunks read together, tokens per chunk, chunks per request), computed over the flat chunk arrays
of :class:`~pipeline.core.arrays.RequestArrays` by the formulas of the per-request functions of
:mod:`pipeline.metrics.definitions` (:func:`~pipeline.metrics.definitions.merged_reads`,
:func:`~pipeline.metrics.definitions.itl_values`, :func:`~pipeline.metrics.definitions.itl_chunk_values`,
:func:`~pipeline.metrics.definitions.ttst_s`), value for value.  Out of :mod:`pipeline.metrics.summarize`, which
assembles a point's summary from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.core.arrays import RequestArrays
from pipeline.core.pointsummary import distribution


def _reads(a: RequestArrays, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The socket reads of the requests selected by ``rows``: :func:`pipeline.metrics.definitions.merged_reads` of each,
    concatenated over the flat chunk arrays: ``(arrival_s, tokens, is_first, owner row, chunks joined)``."""
    counts = np.diff(a.chunk_offsets)
    owner = np.repeat(np.arange(len(a)), counts)
    is_first = np.zeros(len(a.chunk_t_s), dtype=bool)
    is_first[a.chunk_offsets[:-1][counts > 0]] = True
    keep = rows[owner] & (is_first | (a.chunk_tokens > 0))
    t, k, first, own = a.chunk_t_s[keep], a.chunk_tokens[keep], is_first[keep], owner[keep]
    joined = np.zeros(len(t), dtype=bool)  # a kept chunk that is not its request's first, in the read before it
    joined[1:] = ~first[1:] & (t[1:] == t[:-1])
    group = np.cumsum(~joined) - 1
    k_read = np.bincount(group, weights=k, minlength=int(group[-1]) + 1 if len(group) else 0).astype(np.int64)
    return t[~joined], k_read, first[~joined], own[~joined], int(np.count_nonzero(joined))


def itl_array(a: RequestArrays, rows: np.ndarray) -> np.ndarray:
    """Per-token ITLs (s) of the requests selected by the bool mask ``rows``, in row order:
    :func:`pipeline.metrics.definitions.itl_values` of each, concatenated, computed over the flat chunk arrays (same
    operations, same values)."""
    t, k, first, _, _ = _reads(a, rows)
    # a read that is not its request's first follows the previous read of the same request
    prev = np.empty_like(t)
    prev[1:] = t[:-1]
    prev[:1] = t[:1]
    with np.errstate(divide="ignore", invalid="ignore"):
        vals = np.where(first, 0.0, (t - prev) / np.where(first, 1, k))
    reps = np.where(first, np.maximum(k - 1, 0), k)
    return np.repeat(vals, reps)


def read_figures(a: RequestArrays, rows: np.ndarray) -> dict[str, Any]:
    """Per-read figures of the requests selected by ``rows``: ``itl_unresolved_share`` (chunks with tokens that came
    in the read of the chunk before them / chunks with tokens: gaps the client could not time), ``tokens_per_chunk``
    (streamed tokens / chunks with tokens, chunks as the server sent them), ``chunks_per_request`` (mean chunks with
    tokens per request) and the time to second token's distribution (``ttst_s``,
    :func:`pipeline.metrics.definitions.ttst_s`); None where nothing was streamed."""
    t, k, _, own, _ = _reads(a, rows)
    counts = np.diff(a.chunk_offsets)
    owner = np.repeat(np.arange(len(a)), counts)
    chunk_rows = rows[owner] & (a.chunk_tokens > 0)
    n_chunks, n_req = int(np.count_nonzero(chunk_rows)), int(np.count_nonzero(rows))
    tokens = int(a.chunk_tokens[chunk_rows].sum())
    joined = n_chunks - int(np.count_nonzero(k > 0))  # chunks with tokens that joined the read before them
    return {"itl_unresolved_share": joined / n_chunks if n_chunks else None,
            "tokens_per_chunk": tokens / n_chunks if n_chunks else None,
            "chunks_per_request": n_chunks / n_req if n_req and n_chunks else None,
            "ttst_s": distribution(_ttst(t, k, own))}


def _ttst(t: np.ndarray, k: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Time to second token (s) of each request among the reads ``(arrival_s, tokens, owner row)`` of :func:`_reads`
    whose first read with tokens carried one token and was followed by another read with tokens (of the same
    request): :func:`pipeline.metrics.definitions.ttst_s` of each, in row order."""
    with_tok = k > 0
    t, k, own = t[with_tok], k[with_tok], own[with_tok]
    head = np.ones(len(t), dtype=bool)  # the first read with tokens of each request
    head[1:] = own[1:] != own[:-1]
    second = np.zeros(len(t), dtype=bool)
    second[1:] = head[:-1] & ~head[1:] & (k[:-1] == 1)
    return t[second] - t[np.flatnonzero(second) - 1] if second.any() else np.array([])


def ttst_array(a: RequestArrays, rows: np.ndarray) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.ttst_s` of the requests selected by ``rows`` that have one (s), in row
    order."""
    t, k, _, own, _ = _reads(a, rows)
    return _ttst(t, k, own)


def itl_chunk_array(a: RequestArrays, rows: np.ndarray) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.itl_chunk_values` of the requests selected by ``rows``, concatenated in row order
    (one gap per read with tokens after the first such read of the same request)."""
    t, k, _, own, _ = _reads(a, rows)
    t, own = t[k > 0], own[k > 0]
    return (t[1:] - t[:-1])[own[1:] == own[:-1]]
