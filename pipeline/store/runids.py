"""Run ids and claims: ``YYYYMMDDTHHMMSSZ-<host>`` ids, the atomic claim of a run's folder (and the cleaning of
claims nothing will fill), id checks, and the hidden temporary folders of writers (named for the cleaner,
removed when their writer died).
"""

from __future__ import annotations

import json
import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path

from pipeline.core.atomicfiles import atomic_write_json
from pipeline.core.errors import BatchmarkError
from pipeline.store.runlock import lock_path


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

    A folder whose owner (pid on this host, from :func:`tmp_prefix`) is not alive is stale at once (a merge killed
    with ``kill -9`` and run again a minute later left its hidden copy); a folder of another host, or of no known
    owner, when it is older than ``max_age_s``.
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
        if m and m.group(2) == this_host:  # its owner's pid is known here: dead is stale at once (kill -9, then a retry)
            if _alive(int(m.group(1))):
                continue
        elif age < max_age_s:  # another host's, or of no known owner: by age alone
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def claim_marker(run_dir: Path) -> Path:
    """Who claimed a run folder: ``<runs_dir>/.locks/<run_id>.claim.json`` (pid and host), written by :func:`claim_run_dir`."""
    return run_dir.parent / ".locks" / f"{run_dir.name}.claim.json"


def is_stale_claim(run_dir: Path, max_age_s: float = STALE_TMP_S, now: float | None = None) -> bool:
    """True for a claimed run folder that nothing will ever fill.

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


#: A run id: a plain folder name.  Always matched whole (``fullmatch``): ``re.match`` with ``$`` also
#: accepted a trailing newline (``--run-id $'nl-run\n'`` made a folder with a newline).
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


#: A temporary file of the atomic writers (:mod:`pipeline.core.atomicfiles`: ``.<name>.<random>.tmp``).
_ATOMIC_TMP = re.compile(r"\..+\.tmp")


def clean_atomic_tmp(run_dir: Path) -> list[Path]:
    """Remove the atomic writers' temporary files (``.<name>.<random>.tmp``) a killed writer left in a run folder,
    before it is published: they are never files of the run (the writer renames its file into place or removes it).
    Returns the removed files."""
    removed = []
    for p in sorted(run_dir.rglob(".*.tmp")):
        if _ATOMIC_TMP.fullmatch(p.name) and p.is_file() and not p.is_symlink():
            p.unlink()
            removed.append(p)
    return removed
