"""Atomic writes and strict reads of the JSON and text files batchmark stores.

Every write goes to a temporary file in the same folder, is flushed to disk, and is renamed into
place (``os.replace``) or, where an existing file must never be overwritten, linked (``os.link``):
a reader sees the old file or the new one, never half of one.  A read of a missing or corrupt
file is one line naming it.  Used by the store (:mod:`pipeline.runs`) for a run's files and by
the stages and pages for theirs.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pipeline.errors import BatchmarkError


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read and published
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # name the file that could not be written (a full disk says only ENOSPC)
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_create_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to a ``path`` that must not exist: temp file, fsync, then ``os.link`` (fails if it exists).

    Unlike :func:`atomic_write_json` (``os.replace``), a file that appeared meanwhile is never
    overwritten: the second writer gets BatchmarkError.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(obj, indent=1) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise BatchmarkError(f"{path}: already written by another process; records are never overwritten") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically."""
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


def read_json(path: Path) -> Any:
    """Read a JSON file; a missing or corrupt file raises BatchmarkError naming it (and the line)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise BatchmarkError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise BatchmarkError(f"{path}: corrupt JSON at line {exc.lineno} ({exc.msg})") from None
