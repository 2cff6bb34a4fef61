"""Storage: the run folder, its ids, paths, atomic writes and lock, reading and writing its files, resume and immutability.

Layout of ``data/runs/<run_id>/``::

    run.json                 provenance; "status": "incomplete" | "complete"; schema_version
    models/<model>.json      model card counted from what was measured
    points/<model>/<slug>.json   raw request records of one point (all repeats)
    points.json              index of the points, written when the sweep completes
    summaries.json           point summaries (metrics stage)
    analysis.json            per-model analysis (analysis stage)

Raw records and ``run.json`` of a complete run are never rewritten (but by :func:`upgrade_run`,
which changes the format and never a number); the derived files (summaries, analysis) are
recomputed from them by the stages (:mod:`pipeline.stages`, which also holds ``load_run``).
Every file is read through its model in :mod:`pipeline.schemas` (version checked, migrated).
Every write is atomic: a temporary file in the same folder, then ``os.replace``.  No stage is
run here: storage imports neither the metrics nor the analysis.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import socket
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipeline import paths
from pipeline.errors import BatchmarkError
from pipeline.schemas import AnalysisFile, ModelCardFile, PointRecordsFile, RunFile, StoredFile, SummariesFile, migrate, stamped
from pipeline.records import PointKey, PointRecords, PointSummary

#: The schema version of ``run.json`` (every stored file's model is in :mod:`pipeline.schemas`).
SCHEMA_VERSION = RunFile.current


#: Most runs one host may start within one second (ids ``<stamp>-<host>``, ``.02`` … ``.99``).
MAX_RUNS_PER_SECOND = 99


def _id_candidates(base: str):
    """``base``, then ``base.02`` … ``base.99``: the suffix sorts after the bare id and in order (zero-padded);
    a host name never holds a ``.``, so the suffix cannot be mistaken for part of it."""
    yield base
    for n in range(2, MAX_RUNS_PER_SECOND + 1):
        yield f"{base}.{n:02d}"


def new_run_id(now: datetime | None = None, host: str | None = None, runs_dir: Path | None = None) -> str:
    """Run id ``YYYYMMDDTHHMMSSZ-<host>`` (UTC; host reduced to ``[A-Za-z0-9-]``).

    With ``runs_dir``, the first id of ``<stamp>-<host>``, ``<stamp>-<host>.02``, … whose folder
    does not exist there, so two runs started within one second get different ids without
    waiting.  This only looks; :func:`claim_run_dir` takes the id atomically.

    Raises:
        BatchmarkError: more than :data:`MAX_RUNS_PER_SECOND` runs in one second.
    """
    now = now or datetime.now(timezone.utc)
    host = (host or socket.gethostname()).split(".")[0]
    host = "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in host) or "host"
    base = f"{now.astimezone(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{host}"
    if runs_dir is None:
        return base
    for cand in _id_candidates(base):
        if not (runs_dir / cand).exists():
            return cand
    raise BatchmarkError(f"{runs_dir}: more than {MAX_RUNS_PER_SECOND} runs named {base}; wait a second")


def claim_run_dir(runs_dir: Path, run_id: str | None = None, host: str | None = None,
                  now: datetime | None = None) -> Path:
    """Create the folder of a new run atomically and return it: ``mkdir`` is the claim.

    ``run_id`` given: that folder, refused when it exists.  Otherwise the first free id of
    :func:`new_run_id`'s sequence for ``host`` at ``now``; a process that loses a race for an
    id takes the next one, so concurrent imports or sweeps never share a folder.

    Raises:
        BatchmarkError: ``run_id`` exists, or every id of that second is taken.
    """
    runs_dir.mkdir(parents=True, exist_ok=True)
    if run_id is not None:
        try:
            (runs_dir / run_id).mkdir()
        except FileExistsError:
            if not is_stale_claim(runs_dir / run_id):  # a claim whose writer died (kill -9 of an import) frees the id
                raise BatchmarkError(f"run {run_id} already exists under {runs_dir}; runs are never overwritten") from None
        return _mark_claim(runs_dir / run_id)
    base = new_run_id(now, host)
    for cand in _id_candidates(base):
        try:
            (runs_dir / cand).mkdir()
        except FileExistsError:
            continue
        return _mark_claim(runs_dir / cand)
    raise BatchmarkError(f"{runs_dir}: more than {MAX_RUNS_PER_SECOND} runs named {base}; wait a second")


def _mark_claim(run_dir: Path) -> Path:
    """Record this process as the claimer of ``run_dir`` (:func:`claim_marker`); returns ``run_dir``.

    Best effort: where the marker cannot be written (a full disk), the claim stands without it and
    is judged stale by its age alone; the writer's own first write then reports the disk.
    """
    try:
        atomic_write_json(claim_marker(run_dir), {"pid": os.getpid(), "host": socket.gethostname()})
    except OSError:
        pass
    return run_dir


# -- temporary folders of interrupted writers -------------------------------------------------

#: A hidden temporary folder under ``data/runs/`` older than this, whose owner is not alive, is removed.
STALE_TMP_S = 600.0
_TMP_OWNER = re.compile(r"\.pid(\d+)@([A-Za-z0-9-]+)\.")


def tmp_prefix(run_id: str) -> str:
    """Prefix of a writer's temporary folder under ``data/runs/``: hidden, naming its pid and host for the cleaner."""
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"
    return f".{run_id}.pid{os.getpid()}@{host}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_tmp(runs_dir: Path, max_age_s: float = STALE_TMP_S, now: float | None = None) -> list[Path]:
    """Remove hidden ``.*.tmp`` folders under ``runs_dir`` left by a writer killed mid-way (``kill -9`` of an import).

    A folder is stale when it is older than ``max_age_s`` and its owner (pid on this host, from
    :func:`tmp_prefix`) is not alive; a folder of another host, or of no known owner, only by age.
    Returns the removed folders.
    """
    import shutil
    import time

    if not runs_dir.is_dir():
        return []
    now = time.time() if now is None else now
    this_host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"
    removed = []
    for p in runs_dir.iterdir():
        if not (p.name.startswith(".") and p.name.endswith(".tmp") and p.is_dir()):
            continue
        try:
            age = now - p.stat().st_mtime
        except OSError:
            continue
        m = _TMP_OWNER.search(p.name)
        if age < max_age_s or (m and m.group(2) == this_host and _alive(int(m.group(1)))):
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def claim_marker(run_dir: Path) -> Path:
    """Who claimed a run folder: ``<runs_dir>/.locks/<run_id>.claim.json`` (pid and host), written by :func:`claim_run_dir`."""
    return run_dir.parent / ".locks" / f"{run_dir.name}.claim.json"


def is_stale_claim(run_dir: Path, max_age_s: float = STALE_TMP_S, now: float | None = None) -> bool:
    """True for a claimed run folder that nothing will ever fill (issue 18, item 14).

    Stale: the folder is empty, no live process holds its run lock (:func:`lock_run`), and its
    claimer (:func:`claim_marker`) is a process of this host that is gone, or, where no claimer is
    known on this host, the folder is older than ``max_age_s``.  Such a folder, left by an import
    killed after its claim, blocked the id with "already exists" while ``show`` said "unknown run".
    """
    import time

    from filelock import FileLock, Timeout

    try:
        if not run_dir.is_dir() or run_dir.is_symlink() or any(run_dir.iterdir()):
            return False
        age = (time.time() if now is None else now) - run_dir.stat().st_mtime
    except OSError:
        return False
    try:
        owner = json.loads(claim_marker(run_dir).read_text(encoding="utf-8"))
        this_host = owner["host"] == socket.gethostname()
        dead = this_host and not _alive(int(owner["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        this_host = dead = False
    if not dead and (this_host or age < max_age_s):
        return False
    lock = lock_path(run_dir)
    if not lock.is_file():
        return True
    fl = FileLock(str(lock), timeout=0, thread_local=False, is_singleton=False)
    try:
        fl.acquire(timeout=0)
    except Timeout:
        return False
    fl.release()
    return True


def clean_stale_claims(runs_dir: Path, max_age_s: float = STALE_TMP_S, now: float | None = None) -> list[Path]:
    """Remove run folders under ``runs_dir`` that are stale claims (:func:`is_stale_claim`).

    Returns the removed folders.
    """
    if not runs_dir.is_dir():
        return []
    removed = []
    for p in sorted(runs_dir.iterdir()):
        if p.name.startswith(".") or not RUN_ID_PATTERN.fullmatch(p.name) or not is_stale_claim(p, max_age_s, now):
            continue
        try:
            p.rmdir()
        except OSError:
            continue
        claim_marker(p).unlink(missing_ok=True)
        removed.append(p)
    return removed


# -- the run lock: one live process measures a run -------------------------------------------

def lock_path(run_dir: Path) -> Path:
    """Lock file of a run: ``<runs_dir>/.locks/<run_id>.lock`` (beside the run, so a committed run folder holds none)."""
    return run_dir.parent / ".locks" / f"{run_dir.name}.lock"


def _holder(lock: Path) -> str:
    """Who holds a run lock, from its owner file: ``pid 123 on host x since …`` (or why it is not known)."""
    try:
        owner = json.loads(lock.with_suffix(".owner.json").read_text())
        return f"pid {owner['pid']} on host {owner['host']} since {owner['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its owner file yet"


@contextlib.contextmanager
def lock_run(run_dir: Path):
    """Hold the run's lock while measuring it: a second sweep into the same run is refused, never merged.

    An advisory ``flock`` of :func:`lock_path` (the ``filelock`` package): the kernel releases
    it when its process dies, even by ``kill -9``, so a stale lock never blocks a resume.
    The holder's pid, host and start time are written beside it for the refusal message.

    Raises:
        BatchmarkError: another live process holds the lock (the message names it).
    """
    from filelock import FileLock, Timeout

    lock = lock_path(run_dir)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fl = FileLock(str(lock), timeout=0, thread_local=False, is_singleton=False)
    try:
        fl.acquire(timeout=0)
    except Timeout:
        raise BatchmarkError(f"run {run_dir.name} is being measured by {_holder(lock)}; "
                             "wait for it to finish, or stop it and resume") from None
    owner = lock.with_suffix(".owner.json")
    try:
        try:  # for the refusal message only (the flock is the lock): a full disk is reported by the first real write
            atomic_write_json(owner, {"pid": os.getpid(), "host": socket.gethostname(),
                                      "since": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        except OSError:
            pass
        yield
    finally:
        owner.unlink(missing_ok=True)
        fl.release()


def locked_run(fn):
    """Decorator: call ``fn(cfg, run_dir, …)`` holding :func:`lock_run` of ``run_dir``."""
    @functools.wraps(fn)
    def wrapper(cfg, run_dir, *args, **kwargs):
        with lock_run(Path(run_dir)):
            return fn(cfg, run_dir, *args, **kwargs)
    return wrapper


@contextlib.contextmanager
def naming_file(path: Path):
    """Within it, an OS error that names no file (a full disk says only "No space left on device") names ``path``.

    The README promises that a write the machine refuses is one line naming the file (issue 18).
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
            fh.write(json.dumps(obj, indent=1) + "\n")
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


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically."""
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


def _int64(literal: str) -> int:
    """A JSON integer literal, refused beyond 64 bits (a hostile run's 400-digit count overflowed the first float
    conversion of every reader: ``OverflowError``); ``read_json`` reports the ValueError as a corrupt file."""
    value = int(literal)
    if len(literal) > 18 and abs(value) > 2**63 - 1:
        raise ValueError(f"an integer of {len(literal.lstrip('-'))} digits, beyond 64 bits")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(obj: Any) -> bool:
    """True when a string (value or key) of a parsed JSON document holds a lone surrogate (not writable as UTF-8)."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            try:
                o.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return False


def read_json(path: Path) -> Any:
    """Read a JSON file; a missing or corrupt file raises BatchmarkError naming it (and the line).

    Corrupt includes binary bytes (not UTF-8), nesting too deep for the parser, integers beyond 64
    bits and strings that are not Unicode text (a lone ``\\ud800``, which no page or terminal can
    write): one line each, never a ``UnicodeDecodeError``/``RecursionError``/``OverflowError`` (issue 18).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text, parse_int=_int64)
        if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(data):  # pairs (emoji) are fine, lone ones not
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


def resolve_run(ref: str | Path, runs_dir: Path | None = None) -> Path:
    """A run folder from a run id or a path.

    Raises:
        BatchmarkError: no such run (the message names ``ref``).
    """
    runs_dir = runs_dir or paths.runs_dir()
    for cand in (Path(ref), runs_dir / str(ref)):
        if (cand / "run.json").is_file():
            return cand
    raise BatchmarkError(f"unknown run {str(ref)!r}: no run.json under {runs_dir / str(ref)} or {ref}")


def read_stored(cls: type[StoredFile], path: Path) -> dict[str, Any]:
    """A stored file of a run read as ``cls`` (:mod:`pipeline.schemas`): version checked, migrated, validated.

    Raises:
        BatchmarkError: missing, corrupt, of a newer version, or malformed (one line naming the file).
    """
    return migrate(cls, path, read_json(path))


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """``run.json`` of a run, checked for a known schema version."""
    return read_stored(RunFile, run_dir / "run.json")


def is_complete(run_dir: Path) -> bool:
    """True when the run's ``run.json`` says ``status: complete``."""
    try:
        return read_run_json(run_dir).get("status") == "complete"
    except BatchmarkError:
        return False


def list_runs(runs_dir: Path | None = None, complete_only: bool = True) -> list[Path]:
    """Run folders under ``runs_dir`` sorted by id (ids sort by time).

    Raises:
        BatchmarkError: a run folder's name is not a run id (:func:`is_run_id`); one line naming it.
    """
    runs_dir = runs_dir or paths.runs_dir()
    if not runs_dir.is_dir():
        return []
    out = [p for p in sorted(runs_dir.iterdir()) if p.is_dir() and not p.name.startswith(".")
           and (p / "run.json").is_file()]
    for p in out:  # folder names arrive by `git pull`: one that is not a run id never reaches a command line
        if not is_run_id(p.name):
            raise BatchmarkError(f"{runs_dir}: the folder {p.name!r} is not a valid run id (letters, digits, '.', '_', "
                                 "'-'; at most 128): rename or remove it; it is never passed to a command")
    return [p for p in out if is_complete(p)] if complete_only else out


def survey_runs(runs_dir: Path | None = None) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The complete runs under ``runs_dir`` (sorted by id) and the unreadable ones, each with its reason.

    One rule for every run that cannot be read (issue 18, item 13): it is named, never dropped
    without a word.  Unreadable: a ``run.json`` that is corrupt, binary, of a newer schema or
    malformed (the reason is :func:`read_run_json`'s one line), or a folder that holds files but no
    ``run.json``.  A readable incomplete run is in neither list: it is being measured (or was
    stopped, and resumes); nor is an empty folder (a claim: :func:`claim_run_dir`).
    """
    complete, unreadable = [], []
    folder = runs_dir or paths.runs_dir()
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        if p.is_dir() and not p.name.startswith(".") and not (p / "run.json").is_file() and any(p.iterdir()):
            unreadable.append((p, f"{p}: holds files but no run.json (a copy cut short?)"))  # an empty one is a claim
    for p in list_runs(runs_dir, complete_only=False):
        try:
            status = read_run_json(p).get("status")
        except BatchmarkError as exc:
            unreadable.append((p, str(exc)))
            continue
        if status == "complete":
            complete.append(p)
    return complete, unreadable


def create_run(run_dir: Path, provenance: dict[str, Any]) -> None:
    """Start a run folder with ``run.json`` (status incomplete).

    Raises:
        BatchmarkError: the folder already holds a run.
    """
    if (run_dir / "run.json").exists():
        raise BatchmarkError(f"{run_dir}: a run already exists here; it is never overwritten")
    meta = stamped(RunFile, {"run_id": run_dir.name, "status": "incomplete", **provenance})
    atomic_write_json(run_dir / "run.json", meta)
    claim_marker(run_dir).unlink(missing_ok=True)  # the claim is filled: the folder is a run now


def _guard_open(run_dir: Path) -> None:
    if is_complete(run_dir):
        raise BatchmarkError(f"{run_dir}: run is complete and immutable; measure again into a new run")


def update_run_json(run_dir: Path, **fields: Any) -> None:
    """Add fields to ``run.json`` of an incomplete run (e.g. the probe result, package versions)."""
    _guard_open(run_dir)
    meta = read_run_json(run_dir)
    meta.update(fields)
    atomic_write_json(run_dir / "run.json", meta)


_PLAIN_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_STEM_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def file_stem(name: str) -> str:
    """A file-name stem for a model (or engine) name, which stays as given everywhere else.

    A plain name (letters, digits, ``. _ -``, no leading dot, no ``..``) is its own stem, so
    existing runs keep their file names; any other is percent-encoded byte by byte (UTF-8),
    ``.`` and ``%`` included, so ``org/Model``, ``..``, spaces or ``<>`` can neither leave the
    run folder nor make a hidden or invalid name (issue 9: names shown as given, escaped for
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
    """Record file of one point: ``points/<model>/<slug>.json`` (names through :func:`file_stem`)."""
    return run_dir / "points" / file_stem(key.model) / f"{file_stem(key.slug())}.json"


def model_card_path(run_dir: Path, name: str) -> Path:
    """The stored card of a model: ``models/<file_stem(name)>.json``."""
    return run_dir / "models" / f"{file_stem(name)}.json"


def write_point(run_dir: Path, records: PointRecords) -> Path:
    """Store one finished point's records (atomic). Refuses on a complete run or an existing point."""
    _guard_open(run_dir)
    path = point_path(run_dir, records.point)
    if path.exists():
        raise BatchmarkError(f"{path}: point already measured; records are never overwritten")
    atomic_create_json(path, stamped(PointRecordsFile, records.as_dict()))
    return path


def has_point(run_dir: Path, key: PointKey) -> bool:
    """True when the point's records are already stored (a resumed sweep skips it)."""
    return point_path(run_dir, key).is_file()


def load_point(path: Path) -> PointRecords:
    """Read one point record file (version checked, migrated); a corrupt file raises BatchmarkError naming it."""
    data = read_stored(PointRecordsFile, path)
    try:
        return PointRecords.from_dict(data)
    except (KeyError, TypeError) as exc:
        raise BatchmarkError(f"{path}: malformed point records ({exc})") from None


def load_points(run_dir: Path) -> list[PointRecords]:
    """Every point record file of a run, sorted by point key."""
    files = sorted((run_dir / "points").glob("*/*.json"))
    return sorted((load_point(f) for f in files), key=lambda r: r.point.sort_key())


def write_model_card(run_dir: Path, card_dict: dict[str, Any]) -> None:
    """Store a model card counted during the sweep (written once per model, with its ``schema_version``)."""
    path = model_card_path(run_dir, card_dict["name"])
    if not path.exists():
        _guard_open(run_dir)
        atomic_write_json(path, stamped(ModelCardFile, card_dict))


def load_model_cards(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Model cards stored with a run, by model name (the card's ``name``; the file stem where it has none).

    Each card is version checked and migrated (:class:`~pipeline.schemas.ModelCardFile`); the
    mapping returned is the card itself, without the file's ``schema_version``.
    """
    from urllib.parse import unquote

    out = {}
    for p in sorted((run_dir / "models").glob("*.json")):
        d = {k: v for k, v in read_stored(ModelCardFile, p).items() if k != "schema_version"}
        name = d.get("name")
        out[name if isinstance(name, str) else unquote(p.stem)] = d
    return out


def complete_run(run_dir: Path, finished_at: str | None = None) -> None:
    """Write the points index and flip ``run.json`` to complete; from now on the run is immutable."""
    _guard_open(run_dir)
    files = sorted(str(p.relative_to(run_dir)) for p in (run_dir / "points").glob("*/*.json"))
    atomic_write_json(run_dir / "points.json", {"points": files})
    meta = read_run_json(run_dir)
    meta["status"] = "complete"
    meta["finished_at"] = finished_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
    atomic_write_json(run_dir / "run.json", meta)


#: Folder under ``data/runs/`` of runs being measured in parts (one model each): ``.parts/<run_id>/<model>/`` (pipeline.parts).
PARTS_FOLDER = ".parts"


def pointer_path(config_name: str, runs_dir: Path | None = None) -> Path:
    """Local (git-ignored) pointer from a config name to the run this checkout measures for it."""
    return (runs_dir or paths.runs_dir()) / ".pointers" / f"{file_stem(config_name)}.json"


def run_id_for_config(config_name: str, config_digest: str | None = None, runs_dir: Path | None = None,
                      fresh: bool = False) -> str:
    """The run id the workflow should build for a config.

    The run this checkout started for the config (resumed if incomplete, reused if
    complete, so a second invocation measures nothing) as long as it was started with the
    same config content (``config_digest``); a run being measured in parts counts from its
    first part on (``.parts/<run_id>/``).  A new id when there is none yet, the pointed-to
    run is gone, the config content changed, or ``fresh`` is set.  Committed runs from other
    machines are never resumed: the pointer is local to the checkout.
    """
    ptr = pointer_path(config_name, runs_dir)
    runs_dir = runs_dir or paths.runs_dir()
    if not fresh and ptr.is_file():
        try:
            run_id = check_run_id(json.loads(ptr.read_text())["run_id"])
            # the run itself, else the parts it is being measured in (pipeline.parts: no run folder until the merge)
            for meta_path in [runs_dir / run_id / "run.json", *sorted((runs_dir / PARTS_FOLDER / run_id).glob("*/run.json"))]:
                if meta_path.is_file():
                    meta = json.loads(meta_path.read_text())
                    if config_digest is None or meta.get("config_digest") == config_digest:
                        return run_id
                    break
        except (OSError, ValueError, KeyError, TypeError, RecursionError, BatchmarkError):
            pass
    return new_run_id()


#: A run id: a plain folder name.  Always matched whole (``fullmatch``): ``re.match`` with ``$`` also
#: accepted a trailing newline (``--run-id $'nl-run\n'`` made a folder with a newline, issue 18).
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_run_id(name: str) -> bool:
    """True when ``name`` is a run id: a plain folder name (letters, digits, ``. _ -``, at most 128 characters, no
    ``..``), matched whole (``fullmatch``: a trailing newline is refused), so it is safe in a path and a shell word."""
    return isinstance(name, str) and RUN_ID_PATTERN.fullmatch(name) is not None and ".." not in name


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` if it is a plain folder name (letters, digits, ``. _ -``; no path separators).

    Raises:
        BatchmarkError: the id could escape ``data/runs/`` or is not a valid folder name.
    """
    if not is_run_id(run_id):
        raise BatchmarkError(f"--run-id: {run_id!r} is not a valid run id (letters, digits, '.', '_', '-'; no '/' or '..')")
    return run_id


def write_pointer(config_name: str, run_id: str, runs_dir: Path | None = None) -> None:
    """Remember that this checkout measures ``run_id`` for ``config_name``."""
    atomic_write_json(pointer_path(config_name, runs_dir), {"run_id": run_id})


# -- derived files (written by the stages of pipeline.stages) ----------------------------------

def read_summaries(run_dir: Path) -> list[PointSummary]:
    """Point summaries of a run (``summaries.json``)."""
    data = read_stored(SummariesFile, run_dir / "summaries.json")
    try:
        return [PointSummary.from_dict(d) for d in data["points"]]
    except (KeyError, TypeError) as exc:
        raise BatchmarkError(f"{run_dir / 'summaries.json'}: malformed summaries ({exc})") from None


def read_analysis(run_dir: Path) -> dict[str, Any]:
    """``analysis.json`` of a run (version checked, migrated), as stored."""
    return read_stored(AnalysisFile, run_dir / "analysis.json")


# -- a finished run read whole (pipeline.stages.load_run) -----------------------------------

@dataclass
class RunResults:
    """Everything later stages read of one complete run: provenance, point summaries, analysis.

    Attributes:
        run_dir: the run folder.
        meta: ``run.json`` (provenance).
        summaries: point summaries (``summaries.json``, or computed from the records in memory
            when that file was not written yet, by :func:`pipeline.stages.load_run`).
        analysis: ``analysis.json`` (or computed in memory the same way).
        partial: the run is incomplete (``allow_incomplete``): its finished points only.
    """

    run_dir: Path
    meta: dict[str, Any]
    summaries: list[PointSummary]
    analysis: dict[str, Any]
    partial: bool = False

    @property
    def run_id(self) -> str:
        """The run id (``run.json``'s ``run_id``, else the folder name)."""
        return str(self.meta.get("run_id") or self.run_dir.name)


# -- upgrade: a run's files rewritten at the current schema versions --------------------------

def stored_files(run_dir: Path) -> list[tuple[type[StoredFile], Path]]:
    """Every versioned file of a run with its model: ``run.json``, summaries, analysis, point records, model cards."""
    out: list[tuple[type[StoredFile], Path]] = [(RunFile, run_dir / "run.json")]
    out += [(cls, run_dir / name) for cls, name in ((SummariesFile, "summaries.json"), (AnalysisFile, "analysis.json"))
            if (run_dir / name).is_file()]
    out += [(PointRecordsFile, p) for p in sorted((run_dir / "points").glob("*/*.json"))]
    out += [(ModelCardFile, p) for p in sorted((run_dir / "models").glob("*.json"))]
    return out


def upgrade_run(run_dir: Path) -> list[Path]:
    """Rewrite a run's stored files at the current schema versions, in place; returns the files rewritten.

    The one write a complete run allows: the format changes (``schema_version`` and what the
    migrations of :mod:`pipeline.schemas` change), never a number.  Every file is read and
    migrated first; when any cannot be read (corrupt, malformed, newer than this batchmark)
    nothing is written.  Each file is then replaced atomically, holding the run's lock, so a
    sweep cannot write into the run meanwhile.  A file already at its current version is left
    untouched.

    Raises:
        BatchmarkError: a file cannot be read (named); the run is being measured.
    """
    with lock_run(run_dir):
        plan = []
        for cls, path in stored_files(run_dir):
            raw = read_json(path)
            new = migrate(cls, path, raw)
            if new != raw:
                plan.append((path, new))
        for path, new in plan:
            atomic_write_json(path, new)
    return [path for path, _ in plan]
