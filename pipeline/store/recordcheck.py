"""A point's request records checked where they are read, whatever wrote them: what cannot be a measurement.

A record file is read back by every stage (summaries, analysis, pages, upgrade) and may have been written by an
earlier batchmark, another tool, or a hand: its values are checked here before any number is computed from
them, vectorised over the point's arrays (:class:`pipeline.core.arrays.PointArrays`), so a million requests cost
a few array passes.  Refused, one line naming the file, the request and the field:

- a time that is not finite (``done_s`` = inf made NaN and Infinity in ``summaries.json``, which is no JSON,
  RFC 8259 §6), or missing where the record always has one (``queued_s``, ``sent_s``);
- a count below zero (tokens of a request or a chunk);
- times out of their order: queued ≤ sent ≤ first token ≤ done, every chunk between sent and done, chunks in
  arrival order (:class:`pipeline.core.records.RequestRecord`'s definitions; a request cannot end before it is
  sent);
- more output tokens than :data:`OUTPUT_FACTOR` × the point's ``output_len`` (the client asks for
  ``output_len``; a server's count or a re-tokenized text may differ, never by that much: ``tokencount``'s
  own disagreement factor);
- more requests in flight at once than the point's concurrency (closed loop) or its cap (open loop): the
  scheduler never sends the (N + 1)-th before one of N is done, so a million overlapping requests at c = 2 are
  no measurement of c = 2.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.core.arrays import FLOAT_FIELDS, OPTIONAL_FLOAT_FIELDS, PointArrays
from pipeline.core.errors import BatchmarkError

#: A record's output tokens may reach this many times the point's ``output_len`` (tokencount.DISAGREE_FACTOR).
OUTPUT_FACTOR = 2.0
#: Slack of the order checks (s): times are float64 seconds of one clock; this only absorbs rounding.
ORDER_SLACK_S = 1e-9


def _fail(path: Path | str, arrays: PointArrays, row: int, what: str) -> None:
    rid = int(arrays.requests.request_id[row]) if len(arrays.requests) else row
    raise BatchmarkError(f"{path}: request {rid} (row {row}) {what}")


def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def _check_values(arrays: PointArrays, path: Path | str) -> None:
    a = arrays.requests
    for name in FLOAT_FIELDS:
        v = getattr(a, name)
        bad = np.isinf(v) if name in OPTIONAL_FLOAT_FIELDS else ~np.isfinite(v)
        if (row := _first(bad)) is not None:
            _fail(path, arrays, row, f"{name} = {v[row]}: not a finite time in seconds")
    if (row := _first(~np.isfinite(a.chunk_t_s))) is not None:
        owner = int(np.searchsorted(a.chunk_offsets, row, side="right") - 1)
        _fail(path, arrays, owner, f"chunk_t_s = {a.chunk_t_s[row]}: not a finite time in seconds")
    for name in ("input_tokens", "output_tokens", "hidden_tokens", "request_id"):
        v = getattr(a, name)
        if (row := _first(v < 0)) is not None:
            _fail(path, arrays, row, f"{name} = {int(v[row])}: a count below zero")
    if (row := _first(a.chunk_tokens < 0)) is not None:
        owner = int(np.searchsorted(a.chunk_offsets, row, side="right") - 1)
        _fail(path, arrays, owner, f"chunk_tokens = {int(a.chunk_tokens[row])}: a count below zero")
    limit = OUTPUT_FACTOR * arrays.point.output_len
    if (row := _first(a.output_tokens > limit)) is not None:
        _fail(path, arrays, row, f"output_tokens = {int(a.output_tokens[row])}: over {OUTPUT_FACTOR:g} × the "
                                 f"point's output_len {arrays.point.output_len}")


def _check_order(arrays: PointArrays, path: Path | str) -> None:
    a = arrays.requests
    pairs = (("queued_s", "sent_s"), ("sent_s", "first_token_s"), ("first_token_s", "done_s"), ("sent_s", "done_s"))
    for early, late in pairs:
        e, t = getattr(a, early), getattr(a, late)
        with np.errstate(invalid="ignore"):
            bad = t < e - ORDER_SLACK_S  # NaN (a missing time) compares False
        if (row := _first(bad)) is not None:
            _fail(path, arrays, row, f"{late} = {t[row]} is before {early} = {e[row]}")
    if not a.chunk_t_s.size:
        return
    counts = np.diff(a.chunk_offsets)
    owner = np.repeat(np.arange(len(a)), counts)
    with np.errstate(invalid="ignore"):
        early = a.chunk_t_s < a.sent_s[owner] - ORDER_SLACK_S
        late = a.chunk_t_s > a.done_s[owner] + ORDER_SLACK_S
    for mask, what in ((early, "before its sent_s"), (late, "after its done_s")):
        if (i := _first(mask)) is not None:
            _fail(path, arrays, int(owner[i]), f"chunk_t_s = {a.chunk_t_s[i]} is {what}")
    back = np.diff(a.chunk_t_s) < -ORDER_SLACK_S
    back &= owner[1:] == owner[:-1]
    if (i := _first(back)) is not None:
        _fail(path, arrays, int(owner[i + 1]), f"chunk_t_s = {a.chunk_t_s[i + 1]} is before the chunk it follows")


def in_flight_max(sent_s: np.ndarray, end_s: np.ndarray) -> int:
    """The most requests in flight at once, each from ``sent_s`` to ``end_s`` (half-open: one ending when another
    starts frees its slot first, as the closed loop sends the next only after one is done)."""
    if not sent_s.size:
        return 0
    times = np.concatenate([end_s, sent_s])
    kinds = np.concatenate([np.zeros(end_s.size, np.int8), np.ones(sent_s.size, np.int8)])  # ends first at a tie
    order = np.lexsort((kinds, times))
    steps = np.where(kinds[order] == 1, 1, -1)
    return int(np.cumsum(steps).max())


def _check_concurrency(arrays: PointArrays, path: Path | str) -> None:
    key = arrays.point
    limit = key.concurrency if not key.open_loop else key.max_concurrency
    if limit is None:
        return
    a = arrays.requests
    last_chunk = np.full(len(a), np.nan)
    has = np.diff(a.chunk_offsets) > 0
    last_chunk[has] = a.chunk_t_s[a.chunk_offsets[1:][has] - 1]
    end = np.where(np.isnan(a.done_s), np.where(np.isnan(last_chunk), a.sent_s, last_chunk), a.done_s)
    for rep in np.unique(a.repeat):
        sel = a.repeat == rep
        most = in_flight_max(a.sent_s[sel], end[sel])
        if most > limit:
            raise BatchmarkError(f"{path}: repeat {int(rep)} has {most} requests in flight at once (sent_s to "
                                 f"done_s), over the point's {'cap' if key.open_loop else 'concurrency'} {limit}")


def check_point(arrays: PointArrays, path: Path | str) -> PointArrays:
    """``arrays`` when every request can be a measurement (module docstring), else BatchmarkError naming ``path``,
    the request and the field (one line)."""
    _check_values(arrays, path)
    _check_order(arrays, path)
    _check_concurrency(arrays, path)
    return arrays
