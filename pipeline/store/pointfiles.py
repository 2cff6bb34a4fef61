"""A run's point files: their names on disk, the JSON header of a point, and reading a point back (no writes).

A point is ``points/<model>/<slug>.json`` (key, meta, each repeat's header; names through
:func:`file_stem`) with its requests in ``<slug>.parquet`` beside it (schema version 3 and later,
:mod:`pipeline.store.columnar`); a point of an older version holds its requests inline.  The store
(:mod:`pipeline.store.runs`) writes them, once, atomically; :mod:`pipeline.store.upgrade` rewrites an older one
in the current form.  Every file is read through its model in :mod:`pipeline.store.schemas` (version
checked, migrated); a missing, corrupt or malformed file raises a one-line
:class:`~pipeline.core.errors.BatchmarkError` naming it.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pipeline.core import arrays as point_arrays
from pipeline.store import columnar, recordcheck
from pipeline.core.arrays import PointArrays
from pipeline.core.atomicfiles import read_json
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointKey, PointRecords, RepeatRecord
from pipeline.store.schemas import PointRecordsFile, migrate, stamped


_PLAIN_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_STEM_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def file_stem(name: str) -> str:
    """A file-name stem for a model (or engine) name, which stays as given everywhere else.

    A plain name (letters, digits, ``. _ -``, no leading dot, no ``..``) is its own stem, so
    existing runs keep their file names; any other is percent-encoded byte by byte (UTF-8),
    ``.`` and ``%`` included, so ``org/Model``, ``..``, spaces or ``<>`` can neither leave the
    run folder nor make a hidden or invalid name (names shown as given, escaped for
    the place they land).  A stem over 150 characters is cut and ends in a digest of the name.
    """
    if _PLAIN_STEM.fullmatch(name) and ".." not in name:
        return name
    stem = "".join(c if c in _STEM_KEEP else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                   for c in name) or "%"
    if len(stem) > 150:
        import hashlib

        stem = stem[:130] + "~" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return stem


def point_path(run_dir: Path, key: PointKey) -> Path:
    """Record file of one point: ``points/<model>/<slug>.json`` (names through :func:`file_stem`); since schema
    version 3 its requests are :func:`requests_path` beside it."""
    return run_dir / "points" / file_stem(key.model) / f"{file_stem(key.slug())}.json"


def requests_path(json_path: Path) -> Path:
    """The Parquet file of a point's requests beside its JSON: ``<slug>.parquet`` (:mod:`pipeline.store.columnar`)."""
    return json_path.with_name(json_path.name.removesuffix(".json") + ".parquet")


def point_header(arrays: PointArrays, json_path: Path) -> dict[str, Any]:
    """The JSON part of a version 3 point file: key, meta, repeat headers (no requests), the Parquet file's name."""
    reps = [{k: v for k, v in asdict(rep).items() if k != "requests"} for rep in arrays.repeats]
    return stamped(PointRecordsFile, {"point": arrays.point.as_dict(), "meta": arrays.meta, "repeats": reps,
                                      "requests_file": requests_path(json_path).name})


_REQUESTS_FILE = re.compile(r"[A-Za-z0-9%~_-][A-Za-z0-9%~._-]*\.parquet")


def load_point_arrays(path: Path) -> PointArrays:
    """One point as arrays (:class:`pipeline.core.arrays.PointArrays`): the Parquet file of a version 3 point read
    column by column, the inline requests of an older one converted.

    Raises:
        BatchmarkError: a file is missing, corrupt, of a newer version or malformed, or a record cannot be a
            measurement (:func:`pipeline.store.recordcheck.check_point`; named).
    """
    data = migrate(PointRecordsFile, path, read_json(path))
    name = data.get("requests_file")
    if name is None:
        return recordcheck.check_point(point_arrays.from_records(inline_records(path, data)), path)
    if not _REQUESTS_FILE.fullmatch(name) or ".." in name:
        raise BatchmarkError(f"{path}: requests_file {name!r} is not a file name beside it")
    try:
        key = PointKey(**data["point"])
        headers = [RepeatRecord(**{**r, "requests": []}) for r in data["repeats"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise BatchmarkError(f"{path}: malformed point records ({exc})") from None
    beside = path.with_name(name)
    if beside.is_symlink():
        raise BatchmarkError(f"{beside}: a symbolic link (a run's records are its own files)")
    return recordcheck.check_point(columnar.read_parquet(beside, key, headers, data.get("meta") or {}), beside)


def inline_records(path: Path, data: dict[str, Any]) -> PointRecords:
    """A point file of schema < 3 (requests inline as JSON) read as :class:`PointRecords`.

    Raises:
        BatchmarkError: malformed records (the file is named).
    """
    try:
        return PointRecords.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise BatchmarkError(f"{path}: malformed point records ({exc})") from None


def load_point(path: Path) -> PointRecords:
    """Read one point record file (version checked, migrated) as per-request objects; a corrupt file raises
    BatchmarkError naming it, as does a record that cannot be a measurement (:mod:`pipeline.store.recordcheck`).
    :func:`load_point_arrays` reads the same without a Python object per request."""
    return point_arrays.to_records(load_point_arrays(path))


def own_file(run_dir: Path, path: Path) -> bool:
    """Whether ``path`` is a regular file of the run folder ``run_dir`` itself: neither it nor a folder between
    it and ``run_dir`` is a symbolic link, and it resolves inside ``run_dir`` (a link named like a point record
    could point at any file of the machine, which a download would publish)."""
    try:
        rel = path.relative_to(run_dir)
    except ValueError:
        return False
    cur = run_dir
    for part in rel.parts:
        cur = cur / part
        if cur.is_symlink():
            return False
    return path.is_file() and path.resolve().is_relative_to(run_dir.resolve())


def point_files(run_dir: Path) -> list[Path]:
    """The JSON file of every point of a run (``points/<model>/<slug>.json``), sorted by path.

    Raises:
        BatchmarkError: one is a symbolic link or not a file of the run folder (:func:`own_file`; named).
    """
    found = sorted((run_dir / "points").glob("*/*.json"))
    for f in found:
        if not own_file(run_dir, f):
            raise BatchmarkError(f"{f}: a symbolic link or not a file of the run folder (a run's records are its own)")
    return found


def load_points(run_dir: Path) -> list[PointRecords]:
    """Every point record file of a run, sorted by point key."""
    return sorted((load_point(f) for f in point_files(run_dir)), key=lambda r: r.point.sort_key())


def load_points_arrays(run_dir: Path) -> list[PointArrays]:
    """Every point of a run as arrays (:func:`load_point_arrays`), sorted by point key."""
    return sorted((load_point_arrays(f) for f in point_files(run_dir)), key=lambda r: r.point.sort_key())
