"""Storage: the run folder, its ids, paths, atomic writes and lock, reading and writing its files, resume and immutability.

Layout of ``data/runs/<run_id>/``::

    run.json                 provenance; "status": "incomplete" | "complete"; schema_version
    models/<model>.json      model card counted from what was measured
    points/<model>/<slug>.json   one point: key, engine meta, each repeat's header (window, steps, server metrics)
    points/<model>/<slug>.parquet  its raw request records, every repeat (schema 3, pipeline.store.columnar)
    points.json              index of the points, written when the sweep completes
    summaries.json           point summaries (metrics stage)
    analysis.json            per-model analysis (analysis stage)

Raw records and ``run.json`` of a complete run are never rewritten (but by
:func:`pipeline.store.upgrade.upgrade_run`, which changes the format and never a number, through the
writers here); the derived files (summaries, analysis) are written from them by the stages
(:mod:`pipeline.analysis.stages`, which also holds ``load_run`` and the :class:`~pipeline.analysis.stages.RunResults`
it returns) at publish: :func:`complete_run` and :func:`assembling` take the stages' writer as
``derive`` and run it before the run becomes complete, so a complete run always carries them.  A point's file names and reading a point back are :mod:`pipeline.store.pointfiles`.
Every file is read through its model in :mod:`pipeline.store.schemas` (version checked, migrated).
Every write is atomic: a temporary file in the same folder, then ``os.replace``.  No stage is
run here: storage imports neither the metrics nor the analysis.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pipeline.core import arrays as point_arrays
from pipeline.core import paths, scrub
from pipeline.store import columnar
# ids, claims, the lock and the atomic writers are the store's own parts, in modules of their own;
# re-exported here, where every caller has always found them
from pipeline.core.atomicfiles import atomic_create_json, atomic_write_json, atomic_write_text, naming_file, read_json  # noqa: F401
from pipeline.store.runids import (MAX_RUNS_PER_SECOND, RUN_ID_PATTERN, STALE_TMP_S, check_run_id, claim_marker,  # noqa: F401
                                   clean_atomic_tmp,
                             claim_run_dir, clean_stale_claims, clean_stale_tmp, is_run_id, is_stale_claim, new_run_id,
                             tmp_prefix)
from pipeline.store.runlock import RunLocked, lock_path, lock_run, locked_run  # noqa: F401
from pipeline.core.arrays import PointArrays
from pipeline.core.errors import BatchmarkError
from pipeline.store.pointfiles import file_stem, point_header, point_path, requests_path
from pipeline.core.records import PointKey, PointRecords
from pipeline.store.schemas import ModelCardFile, RunFile, StoredFile, migrate, stamped

#: The schema version of ``run.json`` (every stored file's model is in :mod:`pipeline.store.schemas`).
SCHEMA_VERSION = RunFile.current


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
    """A stored file of a run read as ``cls`` (:mod:`pipeline.store.schemas`): version checked, migrated, validated.

    Raises:
        BatchmarkError: missing, corrupt, of a newer version, or malformed (one line naming the file).
    """
    return migrate(cls, path, read_json(path))


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """``run.json`` of a run, checked for a known schema version."""
    return read_stored(RunFile, run_dir / "run.json")


def is_complete(run_dir: Path) -> bool:
    """True when the run's ``run.json`` says ``status: complete``.

    Raises:
        BatchmarkError: ``run.json`` cannot be read (missing, corrupt, of a newer version,
            malformed): such a run is neither complete nor incomplete, and the one line says why
            (it was False, so a corrupt or newer run dropped silently out of every list).
    """
    return read_run_json(run_dir).get("status") == "complete"


def list_runs(runs_dir: Path | None = None, complete_only: bool = True,
              unreadable: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Run folders under ``runs_dir`` sorted by id (ids sort by time).

    With ``complete_only``, a run whose ``run.json`` cannot be read is left out with its reason:
    appended to ``unreadable`` as ``(folder, one line)`` when given, else printed to stderr as one
    ``batchmark: warning:`` line, never dropped without a word.

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
    if not complete_only:
        return out
    complete = []
    for p in out:
        try:
            if is_complete(p):
                complete.append(p)
        except BatchmarkError as exc:
            if unreadable is not None:
                unreadable.append((p, str(exc)))
            else:
                import sys

                print(f"batchmark: warning: run {p.name} left out: {exc}", file=sys.stderr)
    return complete


def run_json(run_id: str, status: str, provenance: dict[str, Any]) -> dict[str, Any]:
    """The mapping of a run's ``run.json``, built in this one place for the sweep, the importers and the merge.

    ``schema_version`` (:class:`~pipeline.store.schemas.RunFile`'s current one), ``run_id``, ``status``
    (``incomplete`` | ``complete``), then the provenance in its own order (a ``run_id``, ``status``
    or ``schema_version`` in it is overridden).  Every string of the provenance is scrubbed
    (:func:`pipeline.core.scrub.scrub_tree`: no key-shaped secret, no absolute path of the machine), whoever wrote it.
    """
    if status not in ("incomplete", "complete"):
        raise ValueError(f"run status {status!r}")
    return stamped(RunFile, {"run_id": run_id, "status": status,
                             **{k: scrub.scrub_tree(v) for k, v in provenance.items()
                                if k not in ("run_id", "status", "schema_version")}})


def survey_runs(runs_dir: Path | None = None) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The complete runs under ``runs_dir`` (sorted by id) and the unreadable ones, each with its reason.

    One rule for every run that cannot be read: it is named, never dropped
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
    atomic_write_json(run_dir / "run.json", run_json(run_dir.name, "incomplete", provenance))
    claim_marker(run_dir).unlink(missing_ok=True)  # the claim is filled: the folder is a run now


def _guard_open(run_dir: Path) -> None:
    if (run_dir / "run.json").is_file() and is_complete(run_dir):  # an unreadable run.json: is_complete names it
        raise BatchmarkError(f"{run_dir}: run is complete and immutable; measure again into a new run")


def update_run_json(run_dir: Path, **fields: Any) -> None:
    """Add fields to ``run.json`` of an incomplete run (e.g. the probe result, package versions)."""
    _guard_open(run_dir)
    meta = read_run_json(run_dir)
    meta.update({k: scrub.scrub_tree(v) for k, v in fields.items()})  # as run_json scrubs the provenance
    atomic_write_json(run_dir / "run.json", meta)


def write_requests(json_path: Path, arrays: PointArrays) -> None:
    """Write a point's Parquet file atomically (temporary name in the same folder, fsync, ``os.replace``).

    Replaces a file of the same name: one left without its JSON by a writer killed between the
    two files (the JSON, written second, is what marks a point as measured).
    """
    path = requests_path(json_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        os.chmod(tmp, 0o644)
        columnar.write_parquet(Path(tmp), arrays)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_point(run_dir: Path, records: PointRecords | PointArrays) -> Path:
    """Store one finished point (atomic): its requests as Parquet, then its JSON (key, meta, repeat headers).

    Refuses on a complete run or an existing point.  Returns the JSON's path.
    """
    _guard_open(run_dir)
    path = point_path(run_dir, records.point)
    if path.exists():
        raise BatchmarkError(f"{path}: point already measured; records are never overwritten")
    arrays = records if isinstance(records, PointArrays) else point_arrays.from_records(records)
    with naming_file(path):  # a full disk names the point (its ENOSPC names no file)
        write_requests(path, arrays)
        atomic_create_json(path, point_header(arrays, path))
    return path


def has_point(run_dir: Path, key: PointKey) -> bool:
    """True when the point's records are already stored (a resumed sweep skips it)."""
    return point_path(run_dir, key).is_file()


def model_card_path(run_dir: Path, name: str) -> Path:
    """The stored card of a model: ``models/<file_stem(name)>.json``."""
    return run_dir / "models" / f"{file_stem(name)}.json"


def write_model_card(run_dir: Path, card_dict: dict[str, Any]) -> None:
    """Store a model card counted during the sweep (written once per model, with its ``schema_version``)."""
    path = model_card_path(run_dir, card_dict["name"])
    if not path.exists():
        _guard_open(run_dir)
        # the card's text (its source note) names no folder of the machine (scrub_tree; numbers unchanged)
        atomic_write_json(path, stamped(ModelCardFile, {k: v if k == "name" else scrub.scrub_tree(v)
                                                        for k, v in card_dict.items()}))


def load_model_cards(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Model cards stored with a run, by model name (the card's ``name``; the file stem where it has none).

    Each card is version checked and migrated (:class:`~pipeline.store.schemas.ModelCardFile`); the
    mapping returned is the card itself, without the file's ``schema_version``.
    """
    from urllib.parse import unquote

    out = {}
    for p in sorted((run_dir / "models").glob("*.json")):
        d = {k: v for k, v in read_stored(ModelCardFile, p).items() if k != "schema_version"}
        name = d.get("name")
        out[name if isinstance(name, str) else unquote(p.stem)] = d
    return out


def complete_run(run_dir: Path, finished_at: str | None = None,
                 derive: Callable[[Path], None] | None = None) -> None:
    """Publish a run measured in place: the points index, its derived files, then ``run.json`` flipped to complete.

    ``derive`` writes the run's derived files (:func:`pipeline.analysis.stages.write_derived`, handed in by the caller:
    storage runs no stage); it runs after ``points.json`` and before the flip, so a complete run always has
    them; killed before the flip, the run stays incomplete and its resume publishes it again.  Without
    ``derive`` (a part of a run, whose merge derives the run's) nothing is derived.  From the flip on
    the run is immutable.
    """
    _guard_open(run_dir)
    clean_atomic_tmp(run_dir)  # a writer killed with kill -9 (before a resume) left its temporary file
    files = sorted(str(p.relative_to(run_dir)) for p in (run_dir / "points").glob("*/*.json"))
    atomic_write_json(run_dir / "points.json", {"points": files})
    if derive is not None:
        derive(run_dir)
    meta = read_run_json(run_dir)
    meta["status"] = "complete"
    meta["finished_at"] = finished_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
    atomic_write_json(run_dir / "run.json", meta)


# -- publishing a run built elsewhere, and the store that owns a run's life --------------------

@contextlib.contextmanager
def assembling(run_dir: Path, release_claim: bool = False, derive: Callable[[Path], None] | None = None):
    """Build a complete run in a hidden temporary sibling of ``run_dir``, then publish it there in one rename.

    Yields the temporary folder; the caller writes the run's files into it (``run.json`` built
    by :func:`run_json` with status ``complete``).  Then ``derive`` (:func:`pipeline.analysis.stages.write_derived`, handed in
    by the caller: storage runs no stage) writes the run's derived files into it.  It is checked (its ``run.json``
    readable, complete, of this run id) and renamed onto ``run_dir``, which must be absent or an
    empty folder (a claim of :func:`claim_run_dir`, or the folder Snakemake makes for an output):
    the run appears whole or not at all.  On any failure the temporary folder is removed, and
    with ``release_claim`` an empty ``run_dir`` too (the id is free again; its claim marker,
    :func:`~pipeline.store.runids.claim_marker`, goes with it, as it does once the claim is filled).  Temporary folders of
    writers killed mid-way are cleaned first (:func:`clean_stale_tmp`).  Used by the importers
    and the merge of parts; the sweep writes in place and publishes with :func:`complete_run`.

    Raises:
        BatchmarkError: ``run_dir`` holds files already; what was built is not a complete run.
    """
    import shutil

    runs_dir = run_dir.parent
    runs_dir.mkdir(parents=True, exist_ok=True)
    clean_stale_tmp(runs_dir)
    tmp = Path(tempfile.mkdtemp(dir=runs_dir, prefix=tmp_prefix(run_dir.name), suffix=".tmp"))
    try:
        yield tmp
        if derive is not None:
            derive(tmp)
        meta = read_run_json(tmp)
        if meta.get("status") != "complete" or meta.get("run_id") != run_dir.name:
            raise BatchmarkError(f"{tmp / 'run.json'}: not a complete run {run_dir.name} "
                                 f"(status {meta.get('status')!r}, run_id {meta.get('run_id')!r}); not published")
        if run_dir.is_dir() and any(run_dir.iterdir()):
            raise BatchmarkError(f"{run_dir}: holds files already; a run is never overwritten")
        os.rename(tmp, run_dir)  # onto an absent or empty folder: atomic
        claim_marker(run_dir).unlink(missing_ok=True)  # the claim is filled: the folder is a run now
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if release_claim and run_dir.is_dir() and not any(run_dir.iterdir()):
            run_dir.rmdir()
            claim_marker(run_dir).unlink(missing_ok=True)
        raise


def swap_in(built: Path, out: Path) -> None:
    """Put the complete run folder ``built`` at ``out``, replacing a run there: for derived runs only (the
    reference import, :mod:`pipeline.importers.reference`), never a measured one.  The old run is moved aside
    (beside ``built``), the new one renamed in, the old one removed: a reader sees one or the other.
    """
    import shutil

    old = built.parent / f".{out.name}.old"
    if out.exists():
        out.rename(old)
    built.rename(out)
    shutil.rmtree(old, ignore_errors=True)


class RunStore:
    """The runs under one folder (``data/runs/`` by default) and the one way each is written and read.

    A run's life: :meth:`claim` an id (the folder's ``mkdir``), then either measure in place
    (:meth:`create` with status incomplete, :meth:`write_point` and :meth:`write_model_card` under
    the run's lock, :meth:`complete` to publish: ``points.json``, the derived files, then ``run.json``
    flipped to complete in one ``os.replace``) or build it elsewhere and publish it whole
    (:meth:`assembling`: importers, the merge of parts; derived files written before the rename);
    then :meth:`read` it.  The derived files (``summaries.json``, ``analysis.json``) are written by
    the stages (:func:`pipeline.analysis.stages.write_derived`), which the writer hands to the publish as ``derive``.  ``run.json`` is built by
    :func:`run_json` on every path.  Every rename or replace of a run's files is done here (and in
    the atomic writers above): ``tests/unit/test_architecture.py`` checks that no other module
    renames files of a run.  The module functions of the same names are the same operations for
    callers that hold a run folder rather than a store.
    """

    def __init__(self, runs_dir: Path | None = None):
        self.runs_dir = Path(runs_dir) if runs_dir is not None else paths.runs_dir()

    def path(self, run_id: str) -> Path:
        """The folder of ``run_id`` (checked: a plain folder name)."""
        return self.runs_dir / check_run_id(run_id)

    def claim(self, run_id: str | None = None, host: str | None = None) -> Path:
        """Take a new run's folder atomically (:func:`claim_run_dir`)."""
        return claim_run_dir(self.runs_dir, run_id, host=host)

    create = staticmethod(create_run)
    update = staticmethod(update_run_json)
    write_point = staticmethod(write_point)
    write_model_card = staticmethod(write_model_card)
    complete = staticmethod(complete_run)
    assembling = staticmethod(assembling)

    def read(self, ref: str | Path) -> dict[str, Any]:
        """``run.json`` of a run (id or path), version checked."""
        return read_run_json(resolve_run(ref, self.runs_dir))

    def list(self, complete_only: bool = True) -> list[Path]:
        """Run folders, sorted by id (:func:`list_runs`)."""
        return list_runs(self.runs_dir, complete_only)
