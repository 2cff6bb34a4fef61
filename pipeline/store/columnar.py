"""A point's request records as a Parquet file: one row per request, token times as list columns.

The record file of a point (schema version 3 and later, :class:`pipeline.store.schemas.PointRecordsFile`) is two
files side by side: ``points/<model>/<slug>.json`` keeps the point's key, the engine's ``meta``
and each repeat's header (window, batching, decode steps, server metrics), as before; the
requests of every repeat are ``points/<model>/<slug>.parquet``, which pandas, polars, DuckDB or
pyarrow read without batchmark (docs/storage.md: why Parquet, with measured sizes and speeds).

Columns (one row per request, in record order; :data:`SCHEMA`): ``repeat`` (index into the JSON's
``repeats``), every field of :class:`pipeline.core.records.RequestRecord` under its own name, and the
chunks as two list columns, ``chunk_t_s`` (arrival times, s) and ``chunk_tokens`` (tokens each).  The drawn lengths
``drawn_input_len`` and ``drawn_output_len`` (int64, null where a request is its point's shape) came last and may be
absent: a file written before them reads as all null, unchanged otherwise.
Times are float64 seconds exactly as measured (lossless: the JSON's values, bit for bit; a None
is a Parquet null).  Float columns are stored with the BYTE_STREAM_SPLIT encoding (the 8 bytes
of each float in 8 streams, so the exponent and high mantissa bytes, nearly constant from one
token to the next, compress) and the file with zstd: a token takes ~5 bytes on disk instead of the
old JSON point file's ~54 (docs/storage.md: the measured sizes and speeds, and the alternatives).

Pure conversion and file I/O of one file; where files go and how they are renamed into place is
:mod:`pipeline.store.runs`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.arrays import (BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, OPTIONAL_INT_FIELDS, STR_FIELDS, PointArrays,
                                  RequestArrays)
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey, RepeatRecord

#: Parquet column paths of the float columns (a list column's values are ``<name>.list.element``).
FLOAT_COLUMNS = (*FLOAT_FIELDS, "chunk_t_s.list.element")

#: The Parquet schema of a record file (column order as written).
SCHEMA = pa.schema(
    [pa.field("repeat", pa.int32(), nullable=False), pa.field("request_id", pa.int64(), nullable=False)]
    + [pa.field(n, pa.float64(), nullable=n not in ("queued_s", "sent_s")) for n in FLOAT_FIELDS]
    + [pa.field(n, pa.int64(), nullable=False) for n in INT_FIELDS if n != "request_id"]
    + [pa.field(n, pa.bool_(), nullable=False) for n in BOOL_FIELDS]
    + [pa.field(n, pa.string()) for n in STR_FIELDS]
    + [pa.field("token_count_flags", pa.list_(pa.string()), nullable=False),
       pa.field("chunk_t_s", pa.list_(pa.float64()), nullable=False),
       pa.field("chunk_tokens", pa.list_(pa.int32()), nullable=False)]
    + [pa.field(n, pa.int64()) for n in OPTIONAL_INT_FIELDS])
#: Columns a record file may lack (written before they existed): read as all null.
OPTIONAL_COLUMNS = frozenset(OPTIONAL_INT_FIELDS)

#: Writer settings (docs/storage.md compares them): zstd level 3, float columns byte-stream split.
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 3


def to_table(arrays: PointArrays) -> pa.Table:
    """The Parquet table of a point's requests (:data:`SCHEMA`); vectorised, no per-request Python work but
    the string columns."""
    a = arrays.requests
    cols: dict[str, pa.Array] = {"repeat": pa.array(a.repeat, type=pa.int32())}
    for n in FLOAT_FIELDS:
        v = getattr(a, n)
        cols[n] = pa.array(v, type=pa.float64(), mask=np.isnan(v))
    for n in INT_FIELDS:
        cols[n] = pa.array(getattr(a, n), type=pa.int64())
    for n in OPTIONAL_INT_FIELDS:
        cols[n] = pa.array(getattr(a, n), type=pa.int64(), mask=getattr(a, n) < 0)
    for n in BOOL_FIELDS:
        cols[n] = pa.array(getattr(a, n), type=pa.bool_())
    for n in STR_FIELDS:
        cols[n] = pa.array(getattr(a, n).tolist(), type=pa.string())
    cols["token_count_flags"] = pa.array(a.token_count_flags.tolist(), type=pa.list_(pa.string()))
    offsets = pa.array(a.chunk_offsets.astype(np.int32), type=pa.int32())
    cols["chunk_t_s"] = pa.ListArray.from_arrays(offsets, pa.array(a.chunk_t_s, type=pa.float64()))
    cols["chunk_tokens"] = pa.ListArray.from_arrays(offsets, pa.array(a.chunk_tokens.astype(np.int32), type=pa.int32()))
    return pa.table([cols[f.name] for f in SCHEMA], schema=SCHEMA)


def write_parquet(path: Path, arrays: PointArrays) -> None:
    """Write a point's requests to ``path`` (not atomic: :mod:`pipeline.store.runs` writes a temporary name and renames it)."""
    pq.write_table(to_table(arrays), path, compression=COMPRESSION, compression_level=COMPRESSION_LEVEL,
                   use_byte_stream_split=list(FLOAT_COLUMNS),
                   use_dictionary=["error", "token_count_source", "token_count_reason", "token_count_flags.list.element",
                                   "chunk_tokens.list.element"],
                   write_statistics=False)


def _column(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


def _floats(col: pa.Array) -> np.ndarray:
    return col.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)  # nulls -> NaN


def read_parquet(path: Path, point: PointKey, repeats: list[RepeatRecord], meta: dict) -> PointArrays:
    """A point's arrays from its Parquet file and its JSON part (key, repeat headers, meta).

    Raises:
        BatchmarkError: the file is missing, not Parquet, lacks a column, or names a repeat the
            JSON does not have (one line naming the file).
    """
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise BatchmarkError(f"{path}: file not found (the point's request records)") from None
    except (pa.ArrowException, OSError) as exc:
        raise BatchmarkError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    return from_table(table, point, repeats, meta, path)


def from_table(table: pa.Table, point: PointKey, repeats: list[RepeatRecord], meta: dict,
               path: Path | str = "<table>") -> PointArrays:
    """A point's arrays from its requests' table (:data:`SCHEMA`; :func:`to_table`'s inverse, value for value).

    Raises:
        BatchmarkError: a column is missing or of another type, or a request names a repeat
            ``repeats`` does not have (one line naming ``path``).
    """
    missing = [f.name for f in SCHEMA if f.name not in table.column_names and f.name not in OPTIONAL_COLUMNS]
    if missing:
        raise BatchmarkError(f"{path}: column {missing[0]!r} missing")
    wrong = [f for f in SCHEMA if f.name in table.column_names and table.schema.field(f.name).type != f.type]
    if wrong:
        raise BatchmarkError(f"{path}: column {wrong[0].name!r} is {table.schema.field(wrong[0].name).type}, "
                             f"not {wrong[0].type}")
    nulls = [f.name for f in SCHEMA if not f.nullable and table.column(f.name).null_count]  # (optional: nullable)
    if nulls:  # a null int64 read as a number is INT64_MIN; a null flag, False
        row = int(np.flatnonzero(table.column(nulls[0]).is_null().to_numpy(zero_copy_only=False))[0])
        raise BatchmarkError(f"{path}: column {nulls[0]!r} is null in row {row}; it may not be")
    for n in ("chunk_t_s", "chunk_tokens", "token_count_flags"):
        if _column(table, n).flatten().null_count:
            raise BatchmarkError(f"{path}: column {n!r} holds a null inside a list; it may not")
    cols: dict[str, np.ndarray] = {}
    for n in FLOAT_FIELDS:
        cols[n] = _floats(_column(table, n))
    for n in ("repeat", *INT_FIELDS):
        cols[n] = _column(table, n).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    for n in BOOL_FIELDS:
        cols[n] = _column(table, n).to_numpy(zero_copy_only=False).astype(bool, copy=False)
    for n in OPTIONAL_INT_FIELDS:  # absent (an older file) or null: -1, None in a record
        cols[n] = (_column(table, n).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
                   if n in table.column_names else np.full(table.num_rows, -1, dtype=np.int64))
    for n in STR_FIELDS:
        cols[n] = _objects(_column(table, n).to_pylist())
    cols["token_count_flags"] = _objects(_column(table, "token_count_flags").to_pylist())
    t = _column(table, "chunk_t_s")
    k = _column(table, "chunk_tokens")
    if t.null_count or k.null_count:
        raise BatchmarkError(f"{path}: null chunk list")
    offsets = t.offsets.to_numpy().astype(np.int64)
    cols["chunk_offsets"] = offsets - offsets[0]
    cols["chunk_t_s"] = _floats(t.flatten())
    cols["chunk_tokens"] = k.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    k_offsets = k.offsets.to_numpy().astype(np.int64)
    if not np.array_equal(cols["chunk_offsets"], k_offsets - k_offsets[0]):
        raise BatchmarkError(f"{path}: chunk_t_s and chunk_tokens differ in length")
    if len(cols["repeat"]) and (cols["repeat"].min() < 0 or cols["repeat"].max() >= len(repeats)):
        raise BatchmarkError(f"{path}: a request names repeat {int(cols['repeat'].max())}, "
                             f"but the point has {len(repeats)} repeat(s)")
    return PointArrays(point=point, repeats=repeats, requests=RequestArrays(**cols), meta=meta)


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
