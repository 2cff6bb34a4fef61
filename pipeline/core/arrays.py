"""A point's request records as arrays: one numpy column per request field, token chunks flat with offsets.

What the metrics stage computes from (:func:`pipeline.metrics.summarize.summarize_point`) and what a Parquet
record file is read into (:mod:`pipeline.store.columnar`): at Spark scale a model has ~13,000 requests
and ~3.4 M token times, which as :class:`~pipeline.core.records.RequestRecord` objects with per-chunk
lists cost ~100 bytes a token of Python objects; as arrays they cost 16 (a float64 time and an
int64 count).

Layout of :class:`RequestArrays` (n requests, m chunks in all):

- per request (length n), in record order (repeat by repeat, request by request):
  ``repeat`` (index of the repeat in :attr:`PointArrays.repeats`), ``request_id``, ``queued_s``,
  ``sent_s``, ``first_token_s``, ``done_s``, ``first_content_s``, ``scheduled_s``, ``lag_s``
  (float64 seconds, NaN where the record has None), ``input_tokens``, ``output_tokens``,
  ``hidden_tokens``, ``drawn_input_len``, ``drawn_output_len`` (int64; a drawn length −1 where the record has
  None), ``usage_reported``, ``warmup`` (bool), ``error``,
  ``token_count_source``, ``token_count_reason`` (object arrays of str or None),
  ``token_count_flags`` (object array of lists of str);
- per chunk (length m): ``chunk_t_s`` (arrival, float64 s) and ``chunk_tokens`` (int64);
  request i's chunks are ``[chunk_offsets[i], chunk_offsets[i + 1])`` (``chunk_offsets``: n + 1).

:func:`from_records` and :func:`to_records` convert both ways without changing a value (a None
time is NaN here and None again there; records never hold NaN times).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord

#: Float columns (seconds; NaN = None) and whether the record field may be None.
FLOAT_FIELDS = ("queued_s", "sent_s", "first_token_s", "done_s", "first_content_s", "scheduled_s", "lag_s")
OPTIONAL_FLOAT_FIELDS = frozenset({"first_token_s", "done_s", "first_content_s", "scheduled_s", "lag_s"})
INT_FIELDS = ("request_id", "input_tokens", "output_tokens", "hidden_tokens")
BOOL_FIELDS = ("usage_reported", "warmup")
STR_FIELDS = ("error", "token_count_source", "token_count_reason")
#: Int columns whose record field may be None (a drawn length; -1 here, a null in Parquet, None in a record).
OPTIONAL_INT_FIELDS = ("drawn_input_len", "drawn_output_len")


@dataclass
class RequestArrays:
    """Every request of a point as columns (see the module docstring for the layout and units)."""

    repeat: np.ndarray
    request_id: np.ndarray
    queued_s: np.ndarray
    sent_s: np.ndarray
    first_token_s: np.ndarray
    done_s: np.ndarray
    first_content_s: np.ndarray
    scheduled_s: np.ndarray
    lag_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    hidden_tokens: np.ndarray
    usage_reported: np.ndarray
    warmup: np.ndarray
    error: np.ndarray
    token_count_source: np.ndarray
    token_count_reason: np.ndarray
    token_count_flags: np.ndarray
    chunk_offsets: np.ndarray
    chunk_t_s: np.ndarray
    chunk_tokens: np.ndarray
    drawn_input_len: np.ndarray
    drawn_output_len: np.ndarray

    def __len__(self) -> int:
        return int(self.sent_s.shape[0])

    @property
    def has_error(self) -> np.ndarray:
        """Bool per request: the record carries an error."""
        return np.fromiter((e is not None for e in self.error), dtype=bool, count=len(self))

    @property
    def ok(self) -> np.ndarray:
        """Bool per request: :attr:`RequestRecord.ok` (no error, a first and a last token)."""
        return ~self.has_error & ~np.isnan(self.first_token_s) & ~np.isnan(self.done_s)


@dataclass
class PointArrays:
    """One point: its key, its repeats' headers (:class:`RepeatRecord` with ``requests`` empty), the
    engine's ``meta``, and every request of every repeat as :class:`RequestArrays`.

    Has the attributes ``point``, ``repeats`` and ``meta`` of :class:`PointRecords`, so what reads
    only those (``metrics.server_state``) takes either.
    """

    point: PointKey
    repeats: list[RepeatRecord]
    requests: RequestArrays
    meta: dict[str, Any] = field(default_factory=dict)


def _opt_float(values: list[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def from_records(records: PointRecords) -> PointArrays:
    """The arrays of a point's records (values unchanged; None times become NaN)."""
    reqs = [(i, r) for i, rep in enumerate(records.repeats) for r in rep.requests]
    rs = [r for _, r in reqs]
    counts = np.fromiter((len(r.chunks) for r in rs), dtype=np.int64, count=len(rs))
    offsets = np.zeros(len(rs) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    chunks = [c for r in rs for c in r.chunks]
    cols: dict[str, Any] = {
        "repeat": np.fromiter((i for i, _ in reqs), dtype=np.int64, count=len(rs)),
        "chunk_offsets": offsets,
        "chunk_t_s": np.array([c[0] for c in chunks], dtype=np.float64),
        "chunk_tokens": np.array([int(c[1]) for c in chunks], dtype=np.int64),
        "token_count_flags": _objects([list(r.token_count_flags or []) for r in rs]),
    }
    for name in FLOAT_FIELDS:
        cols[name] = _opt_float([getattr(r, name) for r in rs])
    for name in INT_FIELDS:
        cols[name] = np.array([getattr(r, name) for r in rs], dtype=np.int64)
    for name in OPTIONAL_INT_FIELDS:
        cols[name] = np.array([-1 if getattr(r, name) is None else getattr(r, name) for r in rs], dtype=np.int64)
    for name in BOOL_FIELDS:
        cols[name] = np.array([bool(getattr(r, name)) for r in rs], dtype=bool)
    for name in STR_FIELDS:
        cols[name] = _objects([getattr(r, name) for r in rs])
    headers = [dataclasses.replace(rep, requests=[]) for rep in records.repeats]
    return PointArrays(point=records.point, repeats=headers, requests=RequestArrays(**cols), meta=records.meta)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def to_records(arrays: PointArrays) -> PointRecords:
    """The :class:`PointRecords` of ``arrays`` (inverse of :func:`from_records`; NaN times become None)."""
    a = arrays.requests
    reps = [dataclasses.replace(h, requests=[]) for h in arrays.repeats]
    floats = {name: getattr(a, name).tolist() for name in FLOAT_FIELDS}
    ints = {name: getattr(a, name).tolist() for name in INT_FIELDS}
    ints.update({name: [None if v < 0 else v for v in getattr(a, name).tolist()] for name in OPTIONAL_INT_FIELDS})
    bools = {name: getattr(a, name).tolist() for name in BOOL_FIELDS}
    t, k, off = a.chunk_t_s.tolist(), a.chunk_tokens.tolist(), a.chunk_offsets.tolist()
    for i, rep_i in enumerate(a.repeat.tolist()):
        kw: dict[str, Any] = {name: (None if name in OPTIONAL_FLOAT_FIELDS and v[i] != v[i] else v[i])
                              for name, v in floats.items()}
        kw.update({name: v[i] for name, v in ints.items()})
        kw.update({name: v[i] for name, v in bools.items()})
        kw.update({name: getattr(a, name)[i] for name in STR_FIELDS})
        kw["token_count_flags"] = list(a.token_count_flags[i])
        kw["chunks"] = [[t[j], k[j]] for j in range(off[i], off[i + 1])]
        reps[rep_i].requests.append(RequestRecord(**kw))
    return PointRecords(point=arrays.point, repeats=reps, meta=arrays.meta)
