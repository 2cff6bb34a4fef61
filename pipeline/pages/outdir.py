"""The site's output folder: what ``batchmark pages --out DIR`` may write, overwrite and remove there.

A render writes a manifest, ``DIR/.batchmark-pages.json``: the files (relative to ``DIR``) it wrote.  The next
render removes only the files of that manifest it does not write again (a page of a model or run no longer on
the site), so a file batchmark did not write — a user's notes under ``DIR/models/``, a model card of
``data/models/`` with ``--out data`` — is never deleted.  A folder holding a file batchmark did not write is
refused before anything is written, naming the file; so is a folder that is, holds or lies in the run store or
the model cards (``--out data`` would have put run pages into ``data/runs/``).

A folder without a manifest (a site an earlier batchmark built) is taken over when every file in it has the
name of a file a render writes (:func:`site_file_name`); what it does not write again is left in place, named
in the build output, and outside the new manifest (so it is refused, not deleted, next time).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pipeline.core import paths
from pipeline.core.atomicfiles import atomic_write_json
from pipeline.core.errors import BatchmarkError

MANIFEST = ".batchmark-pages.json"

#: Names of files a render writes (relative to the output folder, POSIX), by kind.
_SITE_FILE = re.compile(r"[^/]+\.md|[^/]+/[^/]+\.md|(models|runs|changes)/[^/]+\.md"
                        r"|assets/javascripts/(vega-bundle\.js|vega-bundle\.version|charts\.js)"
                        r"|assets/stylesheets/batchmark\.css"
                        r"|downloads/[^/]+/(run\.json|summaries\.json|analysis\.json|summaries\.csv|records\.zip)"
                        r"|downloads/changes/[^/]+\.csv")
#: Temporary files of this package's atomic writers, left by a killed render: ``tempfile.mkstemp(prefix=".<name>.",
#: suffix=".tmp")`` (:mod:`pipeline.core.atomicfiles`) names them ``.<name>.<8 random characters of a-z 0-9 _>.tmp``,
#: where ``<name>`` is a file a render writes (:func:`site_file_name`) or the manifest.  A user's hidden file of
#: another name (``.notes.tmp``, ``.draft.md.tmp``) is none, and is never removed.
_OWN_TMP = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")


def _own_temporary(out: Path, p: Path) -> bool:
    """Whether ``p`` (a file under ``out``) is a temporary file of an atomic write of a render (:data:`_OWN_TMP`)."""
    m = _OWN_TMP.fullmatch(p.name)
    if m is None or not p.is_file() or p.is_symlink():
        return False
    target = (p.parent / m.group("name")).relative_to(out).as_posix()
    return target == MANIFEST or site_file_name(target)


def site_file_name(rel: str) -> bool:
    """Whether ``rel`` (POSIX, relative to the output folder) is the name of a file a render writes."""
    return _SITE_FILE.fullmatch(rel) is not None


def _files(out: Path) -> list[str]:
    """Every file under ``out`` (relative POSIX paths, sorted), the manifest and left atomic temporaries aside."""
    found = []
    for p in sorted(out.rglob("*")):
        if p.is_dir() and not p.is_symlink():
            continue
        if p.name == MANIFEST and p.parent == out:
            continue
        if _own_temporary(out, p):
            p.unlink()  # an atomic write's temporary file a killed render left
            continue
        found.append(p.relative_to(out).as_posix())
    return found


def _overlaps(out: Path, other: Path) -> bool:
    a, b = out.resolve(), other.resolve()
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def read_manifest(out: Path) -> set[str]:
    """The files ``out``'s manifest says a render wrote: each a relative POSIX path inside ``out`` (the manifest is data
    of that folder, a site someone may have sent: it never makes a render remove a file elsewhere).

    Raises:
        BatchmarkError: an unreadable manifest, or an entry that is not a plain relative path inside ``out`` (absolute,
            with a ``..``, ``.`` or empty part, a backslash, or reached through a link out of it), named.
    """
    manifest = out / MANIFEST
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        entries = doc["files"]
        if not isinstance(entries, list):
            raise TypeError(f"files is a {type(entries).__name__}, not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BatchmarkError(f"{manifest}: not a readable manifest of batchmark pages ({exc})") from None
    base = out.resolve()
    for rel in entries:
        parts = rel.split("/") if isinstance(rel, str) else []
        inside = bool(parts) and "\\" not in rel and not rel.startswith("/") and "\0" not in rel \
            and all(part not in ("", ".", "..") for part in parts)
        if not inside or not (out / rel).parent.resolve().is_relative_to(base):
            raise BatchmarkError(f"{manifest}: entry {str(rel)[:200]!r} is not a file inside {out} (a relative path "
                                 "without '..'); the manifest is not batchmark's: remove it or choose another folder")
    return set(entries)


def check_out(out: Path, runs_dir: Path | None = None) -> set[str]:
    """Check ``out`` before a render writes into it; return the files its last render wrote (its manifest).

    Raises:
        BatchmarkError: ``out`` is, holds or lies in the run store or the model cards, its manifest cannot be
            read, or it holds a file batchmark did not write (named; nothing is written or removed).
    """
    for what, folder in (("the run store", runs_dir or paths.runs_dir()), ("the model cards", paths.models_dir())):
        if folder.exists() and _overlaps(out, folder):
            raise BatchmarkError(f"--out {out}: is, holds or lies in {what} ({folder}); choose a folder of its own "
                                 f"for the site (default data/pages)")
    if not out.exists():
        return set()
    if not out.is_dir():
        raise BatchmarkError(f"--out {out}: not a folder")
    manifest = out / MANIFEST
    if manifest.exists():
        ours = read_manifest(out)
        foreign = [f for f in _files(out) if f not in ours]
        why = f"not written by batchmark pages (not in {MANIFEST})"
    else:
        ours = set()
        foreign = [f for f in _files(out) if not site_file_name(f)]
        why = "not a file batchmark pages writes (the folder has no manifest)"
    if foreign:
        raise BatchmarkError(f"--out {out}: holds {out / foreign[0]}, {why}; move it out or choose another "
                             f"folder ({len(foreign)} such file(s))")
    return ours


def finish(out: Path, written: list[Path], previous: set[str]) -> list[str]:
    """After a render: remove the files of the last manifest not written again, write the new manifest.

    Returns the files left in place that neither manifest names (an earlier batchmark's, not rewritten).
    """
    now = {p.resolve().relative_to(out.resolve()).as_posix() for p in written}
    for rel in sorted(previous - now):
        p = out / rel
        if not p.parent.resolve().is_relative_to(out.resolve()):  # read_manifest refused it; never outside out
            continue
        if p.is_file() or p.is_symlink():
            p.unlink()
        parent = p.parent
        while parent != out and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    atomic_write_json(out / MANIFEST, {"written_by": "batchmark pages", "files": sorted(now)})
    return [f for f in _files(out) if f not in now]
