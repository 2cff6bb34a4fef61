"""A sweep measured in parts (one model each, or one model × variant where the config has variants; one job each) and the merge stage that assembles them into one run.

The workflow's unit of measurement is one model of one sweep: ``batchmark sweep --config F
--run-id R --model M`` measures model ``M`` into its part, and ``batchmark merge --config F
--run-id R`` assembles the parts into the run ``R`` once every part is complete.  Snakemake
runs each part as a job of its own, on this machine or on a cluster's node (Slurm, Kubernetes).

Layout (beside the runs, hidden and git-ignored, like ``.locks/`` and ``.pointers/``)::

    data/runs/.parts/<run_id>/<model>/     a run folder of its own (pipeline.store.runs' layout) holding
                                           one model's points, model card, server log and its own
                                           provenance (run.json: host, GPU driver, versions, probe,
                                           part_of, models, machine); points.json when complete

A part is resumed, locked and completed exactly as a run is (it is one to :mod:`pipeline.store.runs`):
a killed part resumes its finished points; a complete part is never measured again.  The merged
run holds the same files as a run measured in one job (``run.json``, ``points.json``,
``points/<model>/…``, ``models/…``, ``servers/…``), and its ``run.json`` adds ``hosts`` and
``parts`` (each part's own provenance).  Parts measured on different kinds of hardware are
refused in one run (:func:`check_same_hardware`).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pipeline.core import paths
from pipeline.store import pointfiles, runs
from pipeline.config.sweepconfig import SweepConfig
from pipeline.config.variants import part_names, split_part  # noqa: F401  (importable from here)
from pipeline.core.errors import BatchmarkError
from pipeline.sweep.mergedprovenance import merged_provenance


@dataclass(frozen=True)
class Part:
    """Which part of run ``of`` a sweep measures: the ``models`` (names of the config's models) and, where the config
    has variants, the ``variants`` (their names; None: every one)."""

    of: str
    models: list[str]
    variants: list[str] | None = None

#: Folder under ``data/runs/`` of runs being measured in parts (one model each): ``.parts/<run_id>/<model>/``.
PARTS_FOLDER = ".parts"


# -- config pointers: which run this checkout measures for a config (workflow logic, not storage) --

def pointer_path(config_name: str, runs_dir: Path | None = None) -> Path:
    """Local (git-ignored) pointer from a config name to the run this checkout measures for it."""
    return (runs_dir or paths.runs_dir()) / ".pointers" / f"{pointfiles.file_stem(config_name)}.json"


def run_id_for_config(config_name: str, config_digest: str | None = None, runs_dir: Path | None = None,
                      fresh: bool = False) -> str:
    """The run id the workflow should build for a config.

    The run this checkout started for the config (resumed if incomplete, reused if
    complete, so a second invocation measures nothing) as long as it was started with the
    same config content (``config_digest``); a run being measured in parts counts from its
    first part on (``.parts/<run_id>/``).  A new id when there is none yet, the pointed-to
    run is gone, the config content changed, or ``fresh`` is set.  Committed runs from other
    machines are never resumed: the pointer is local to the checkout.

    Raises:
        BatchmarkError: the pointer, or the ``run.json`` it leads to, cannot be read (one line
            naming the file and the remedy: delete the pointer or pass ``--fresh``); a bad pointer
            once started a fresh run without a word.
    """
    ptr = pointer_path(config_name, runs_dir)
    runs_dir = runs_dir or paths.runs_dir()
    if not fresh and ptr.is_file():
        remedy = "delete it to start a new run, or pass --fresh"
        try:
            data = runs.read_json(ptr)
        except BatchmarkError as exc:
            raise BatchmarkError(f"{exc} (this checkout's pointer to the run of config {config_name!r}); {remedy}") from None
        run_id = data.get("run_id") if isinstance(data, dict) else None
        if not isinstance(run_id, str):
            raise BatchmarkError(f"{ptr}: no run_id in this checkout's pointer to the run of config {config_name!r}; {remedy}")
        try:
            runs.check_run_id(run_id)
        except BatchmarkError as exc:
            raise BatchmarkError(f"{ptr}: {exc}; {remedy}") from None
        # the run itself, else the parts it is being measured in (pipeline.sweep.parts: no run folder until the merge)
        for meta_path in [runs_dir / run_id / "run.json", *sorted((runs_dir / PARTS_FOLDER / run_id).glob("*/run.json"))]:
            if meta_path.is_file():
                try:
                    meta = runs.read_run_json(meta_path.parent)
                except BatchmarkError as exc:  # the run it points to is unreadable: named, never silently replaced
                    raise BatchmarkError(f"{exc} (the run {ptr} points to); {remedy}") from None
                if config_digest is None or meta.get("config_digest") == config_digest:
                    return run_id
                break
    return runs.new_run_id()


def write_pointer(config_name: str, run_id: str, runs_dir: Path | None = None) -> None:
    """Remember that this checkout measures ``run_id`` for ``config_name``."""
    runs.atomic_write_json(pointer_path(config_name, runs_dir), {"run_id": run_id})


def parts_root(run_id: str, runs_dir: Path | None = None) -> Path:
    """``data/runs/.parts/<run_id>/``: the parts of one run."""
    return (runs_dir or paths.runs_dir()) / PARTS_FOLDER / runs.check_run_id(run_id)


def part_dir(run_id: str, model: str, runs_dir: Path | None = None) -> Path:
    """The part folder of ``model`` in run ``run_id`` (the model's name through :func:`pipeline.store.pointfiles.file_stem`)."""
    return parts_root(run_id, runs_dir) / pointfiles.file_stem(model)


def part_targets(cfg: SweepConfig, run_id: str, runs_dir: Path | None = None) -> list[str]:
    """The files the merge waits for: each part's ``points.json`` (written when the part completes), relative
    to the project root, in config order."""
    runs_dir = runs_dir or paths.runs_dir()
    root = paths.root()
    return [str((part_dir(run_id, name, runs_dir) / "points.json").relative_to(root)) for name in part_names(cfg)]


def model_of(cfg: SweepConfig, name: str) -> str:
    """``name`` (``--model``: a model, or ``model/variant`` where the config has variants) checked against the
    config's parts (:func:`part_names`).

    Raises:
        BatchmarkError: not a part of the config (the known ones are listed).
    """
    names = part_names(cfg)
    if name not in names:
        what = "model" if len(cfg.variant_list()) == 1 else "part (model/variant)"
        raise BatchmarkError(f"--model {name!r}: not a {what} of config {cfg.name} (its {what.split()[0]}s: "
                             f"{', '.join(names)})")
    return name


def _hardware_of(meta: dict[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """A part's hardware: its profile name and the device that measured (GPU names, else the CPU model)."""
    machine = meta.get("machine") or {}
    profile = machine.get("profile") or (meta.get("hardware") or {}).get("name")
    gpus = tuple(machine.get("gpus") or ())
    return profile, gpus or ((machine.get("cpu"),) if machine.get("cpu") else ())


def check_same_hardware(run_id: str, metas: dict[str, dict[str, Any]]) -> None:
    """Refuse parts of one run measured on different kinds of hardware.

    Parts of one run may come from several hosts of one hardware profile (a rack of DGX Sparks,
    the nodes of one GPU partition): same profile, same GPUs (by name, as ``nvidia-smi`` lists
    them), or the same CPU model where there is no GPU.  Anything else would put two machines'
    numbers in one curve.

    Raises:
        BatchmarkError: one line naming each model's profile, device and host.
    """
    kinds = {model: _hardware_of(meta) for model, meta in metas.items()}
    if len(set(kinds.values())) <= 1:
        return
    what = "; ".join(f"{model} on {kind[0]} ({', '.join(kind[1]) or 'unknown device'}, host {metas[model].get('host')})"
                     for model, kind in kinds.items())
    raise BatchmarkError(f"run {run_id}: parts measured on different hardware ({what}); one run holds one hardware "
                         "profile and one device: give each kind of node its own config (cluster.constraint)")


def check_part_claims(cfg: SweepConfig, run_id: str, model: str, meta: dict[str, Any], part: Path) -> None:
    """Refuse a part whose ``run.json`` claims another run, other models, other hardware or another source than
    the config it is merged for (a part's provenance is checked as strictly as its points; its text is scrubbed
    when the merged ``run.json`` is built, :func:`pipeline.store.runs.run_json`).

    Raises:
        BatchmarkError: one line naming the part's ``run.json``, the field, and both values.
    """
    where = part / "run.json"
    source = "simulated" if cfg.backend == "simulated" else "measured"
    claims = [("part_of", meta.get("part_of"), run_id),
              ("models", meta.get("models"), [split_part(model)[0]]),
              ("hardware.name", (meta.get("hardware") or {}).get("name"), cfg.hardware),
              ("source", meta.get("source"), source)]
    profile = (meta.get("machine") or {}).get("profile")
    if profile is not None:
        claims.append(("machine.profile", profile, cfg.hardware))
    for field, said, wanted in claims:
        if said != wanted:
            raise BatchmarkError(f"{where}: {field} is {said!r}, but the part is merged as {wanted!r} (model {model} "
                                 f"of run {run_id}, config {cfg.name}); {_remedy(part, model)}")


def check_part_entries(part: Path, runs_dir: Path) -> None:
    """Refuse a part that holds anything but folders and regular files, or that is reached through a link.

    Server logs and records are committed with the run, so a symbolic link in a part (``servers/m1.log`` → the
    system's password-hash file) would publish whatever it points to; so would a hard link to such a file (a
    regular file with more than one name: batchmark writes each file of a part once, by rename).  Nothing is followed: the part's folder and
    the folders above it up to ``runs_dir``, and every entry under it, are checked with ``lstat``.

    Raises:
        BatchmarkError: one line naming the first link, device, pipe or socket found (and where a link points).
    """
    rel = part.relative_to(runs_dir).parts
    for depth in range(len(rel), 0, -1):
        where = runs_dir.joinpath(*rel[:depth])
        if where.is_symlink():
            raise BatchmarkError(f"{where}: a part (or a folder above it) is a symbolic link (to {os.readlink(where)!r}); "
                                 "parts are refused unless every entry is a plain folder or a regular file")
    for top, dirs, files in os.walk(part, followlinks=False):
        for name in sorted(dirs + files):
            entry = Path(top) / name
            mode = entry.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise BatchmarkError(f"{entry}: a symbolic link in a part (to {os.readlink(entry)!r}); merge copies "
                                     "only regular files, never what a link points to: remove it and measure the part again")
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise BatchmarkError(f"{entry}: not a regular file (a device, pipe or socket) in a part; merge "
                                     "copies only regular files: remove it and measure the part again")
            if stat.S_ISREG(mode) and entry.lstat().st_nlink > 1:
                raise BatchmarkError(f"{entry}: a hard link in a part ({entry.lstat().st_nlink} names for one file: "
                                     "it may be a file from outside the run); batchmark writes every file of a part "
                                     "once, so copy it to a file of its own (cp, not cp -l) or measure the part again")


def _copy_regular(src: Path, target: Path) -> None:
    """Copy the regular file ``src`` to ``target`` without following a link (``O_NOFOLLOW``; checked again on the open
    file, so a file swapped for a link after :func:`check_part_entries` is refused too)."""
    try:
        fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BatchmarkError(f"{src}: a symbolic link in a part; merge copies only regular files") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BatchmarkError(f"{src}: not a regular file in a part; merge copies only regular files")
        with os.fdopen(fd, "rb", closefd=False) as fin, open(target, "xb") as fout:
            shutil.copyfileobj(fin, fout)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(fd)


def _remedy(part: Path, model: str) -> str:
    return (f"the run is not merged; delete {part} and run the workflow again to measure {model} anew "
            "(its other parts are kept)")


def read_part_meta(part: Path, model: str) -> dict[str, Any] | None:
    """A part's ``run.json`` (None when the part is not there yet).

    Raises:
        BatchmarkError: the file cannot be read (corrupt, newer version): one line naming it and the remedy
            (measuring the part again; "run the workflow again" alone failed the same way).
    """
    if not (part / "run.json").exists():
        return None
    try:
        return runs.read_run_json(part)
    except BatchmarkError as exc:
        raise BatchmarkError(f"{exc}; {_remedy(part, model)}") from None


def check_part_files(part: Path, model: str) -> None:
    """Read every stored file of a complete part in full before it is merged.

    Each point record file is parsed whole (:func:`pipeline.store.pointfiles.load_point`: JSON, schema version,
    records), each model card read (:func:`pipeline.store.runs.read_stored`), and the part's
    ``points.json`` must list exactly the point files present.  A part cut short (``head -c 1000``
    of a point file) was once merged into a run marked complete that nothing could read.

    Raises:
        BatchmarkError: the first file that cannot be read, named, with the remedy.
    """
    from pipeline.store.schemas import ModelCardFile

    try:
        files = sorted(p.relative_to(part).as_posix() for p in (part / "points").glob("*/*.json"))
        index = runs.read_json(part / "points.json")
        listed = index.get("points") if isinstance(index, dict) else None
        if not isinstance(listed, list) or sorted(map(str, listed)) != files:
            raise BatchmarkError(f"{part / 'points.json'}: does not list the part's point files "
                                 f"({len(listed) if isinstance(listed, list) else 'no'} listed, {len(files)} present)")
        for rel in files:
            pointfiles.load_point(part / rel)
        for card in sorted((part / "models").glob("*.json")):
            runs.read_stored(ModelCardFile, card)
    except BatchmarkError as exc:
        raise BatchmarkError(f"{exc}; {_remedy(part, model)}") from None


def _copy_part_files(part: Path, dest: Path, seen: dict[str, str], model: str) -> None:
    """Copy a part's files (all but its ``run.json`` and ``points.json``) into the merged run folder; links are never
    followed (:func:`check_part_entries` refused them before)."""
    for top, dirs, files in os.walk(part, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            src = Path(top) / name
            rel = src.relative_to(part).as_posix()
            if rel in ("run.json", "points.json") or name.startswith("."):
                continue
            if rel in seen:
                raise BatchmarkError(f"{src}: {rel} is also in the part of {seen[rel]}; parts never share a file")
            seen[rel] = model
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            _copy_regular(src, target)


def merge_parts(cfg: SweepConfig, run_id: str, runs_dir: Path | None = None,
                derive: Callable[[Path], None] | None = None) -> Path:
    """Assemble the complete parts of every model of ``cfg`` into the complete run ``run_id``; return its folder.

    ``derive`` writes the run's derived files before it is published (:func:`pipeline.analysis.stages.write_derived`,
    handed in by ``batchmark merge``: the merge comes before the stages and never imports them).

    Every part must be complete and measured with this config (its digest).  The run is written
    into a hidden temporary folder and renamed into place, so it appears whole or not at
    all; from then on it is immutable like any run.  A run that is complete already is left as
    it is (nothing to merge).  The parts stay where they are (a later merge finds the run complete).

    Raises:
        BatchmarkError: a part missing or incomplete (all such are named), a part of another
            config, parts of different hardware (:func:`check_same_hardware`), a part holding a
            link or anything but regular files (:func:`check_part_entries`), or a run folder
            that already holds a run measured another way.
    """
    runs_dir = runs_dir or paths.runs_dir()
    run_dir = runs_dir / runs.check_run_id(run_id)
    with runs.lock_run(run_dir):
        if (run_dir / "run.json").is_file():
            done = runs.read_run_json(run_dir)  # unreadable: named in one line, never taken for another run
            if done.get("status") == "complete" and done.get("config_digest") == cfg.digest():
                return run_dir
            raise BatchmarkError(f"{run_dir}: holds a run that was not merged from parts (or of another config); "
                                 f"resume it with batchmark sweep --resume {run_id}, or measure into a new run")
        names = part_names(cfg)
        for name in names:  # before anything of a part is read: no link is followed, no device opened
            if part_dir(run_id, name, runs_dir).exists() or part_dir(run_id, name, runs_dir).is_symlink():
                check_part_entries(part_dir(run_id, name, runs_dir), runs_dir)
        read = {name: read_part_meta(part_dir(run_id, name, runs_dir), name) for name in names}
        missing = [name for name, meta in read.items() if (meta or {}).get("status") != "complete"]
        if missing:
            raise BatchmarkError(f"run {run_id}: part(s) not measured to the end yet: {', '.join(missing)} "
                                 f"(under {parts_root(run_id, runs_dir)}); run the workflow again to measure them")
        metas = {name: meta for name, meta in read.items() if meta is not None}
        for name in names:  # every file read in full before the run is published
            check_part_files(part_dir(run_id, name, runs_dir), name)
        for name, meta in metas.items():
            if meta.get("config_digest") != cfg.digest():
                raise BatchmarkError(f"{part_dir(run_id, name, runs_dir) / 'run.json'}: part measured with another "
                                     f"config (digest {meta.get('config_digest')}, this config {cfg.digest()})")
        check_same_hardware(run_id, metas)
        for name, meta in metas.items():  # the parts agree: with the config and the run too
            check_part_claims(cfg, run_id, name, meta, part_dir(run_id, name, runs_dir))
        # built beside the run and published by the store in one rename (onto an absent folder, or the empty
        # one Snakemake makes for an output before the job)
        with runs.assembling(run_dir, derive=derive) as tmp:
            seen: dict[str, str] = {}
            for name in names:
                with runs.naming_file(tmp):  # a full disk names where the run was being assembled
                    _copy_part_files(part_dir(run_id, name, runs_dir), tmp, seen, name)
            files = sorted(p.relative_to(tmp).as_posix() for p in (tmp / "points").glob("*/*.json"))
            runs.atomic_write_json(tmp / "points.json", {"points": files})
            runs.atomic_write_json(tmp / "run.json", runs.run_json(run_id, "complete", merged_provenance(cfg, run_id, metas)))
    return run_dir
