"""Atomic writes and strict reads of the JSON and text files batchmark stores.

Every write goes to a temporary file in the same folder, is flushed to disk, and is renamed into
place (``os.replace``) or, where an existing file must never be overwritten, linked (``os.link``):
a reader sees the old file or the new one, never half of one.  A read of a missing or corrupt
file is one line naming it.  Used by the store (:mod:`pipeline.store.runs`) for a run's files and by
the stages and pages for theirs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pipeline.core.errors import BatchmarkError
from pipeline.core.textfiles import lone_surrogate


@contextlib.contextmanager
def naming_file(path: Path):
    """Within it, an OS error that names no file (a full disk says only "No space left on device") names ``path``.

    The README promises that a write the machine refuses is one line naming the file.
    """
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


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
            fh.write(json_text(path, obj))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise BatchmarkError(f"{path}: already written by another process; records are never overwritten") from None
    except OSError as exc:
        if exc.filename is None:  # name the file that could not be written (a full disk says only ENOSPC)
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    finally:
        Path(tmp).unlink(missing_ok=True)


def json_text(path: Path, obj: Any) -> str:
    """``obj`` as indented JSON; a NaN or ±Infinity (no JSON number, RFC 8259 §6) is BatchmarkError naming ``path``,
    never written."""
    try:
        return json.dumps(obj, indent=1, sort_keys=False, allow_nan=False) + "\n"
    except ValueError as exc:
        raise BatchmarkError(f"{path}: a value is not a finite number ({exc}); not written") from None


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically (refusing non-finite numbers, :func:`json_text`)."""
    atomic_write_text(path, json_text(path, obj))


def _int64(literal: str) -> int:
    """A JSON integer literal, refused beyond 64 bits (a hostile run's 400-digit count overflowed the first float
    conversion of every reader: ``OverflowError``); ``read_json`` reports the ValueError as a corrupt file."""
    value = int(literal)
    if len(literal) > 18 and abs(value) > 2**63 - 1:
        raise ValueError(f"an integer of {len(literal.lstrip('-'))} digits, beyond 64 bits")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def read_json(path: Path) -> Any:
    """Read a JSON file; a missing or corrupt file raises BatchmarkError naming it (and the line).

    Corrupt includes binary bytes (not UTF-8), nesting too deep for the parser, integers beyond 64
    bits and strings that are not Unicode text (a lone ``\\ud800``, which no page or terminal can
    write): one line each, never a ``UnicodeDecodeError``/``RecursionError``/``OverflowError``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text, parse_int=_int64)
        if _SURROGATE_ESCAPE.search(text) and lone_surrogate(data) is not None:  # pairs (emoji) are fine, lone ones not
            raise BatchmarkError(f"{path}: corrupt: a string that is not Unicode text (a lone surrogate escape)")
        return data
    except FileNotFoundError:
        raise BatchmarkError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise BatchmarkError(f"{path}: corrupt JSON at line {exc.lineno} ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise BatchmarkError(f"{path}: corrupt: not UTF-8 JSON text (byte {exc.start})") from None
    except RecursionError:
        raise BatchmarkError(f"{path}: corrupt JSON (nested too deeply)") from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
        raise BatchmarkError(f"{path}: corrupt JSON ({' '.join(str(exc).split())[:120]})") from None
    except IsADirectoryError:
        raise BatchmarkError(f"{path}: a folder, not a JSON file") from None
