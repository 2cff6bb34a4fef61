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
#: Temporary files of this package's atomic writers (``.<name>.<random>.tmp``), left by a killed render.
_OWN_TMP = re.compile(r"\..+\.tmp")


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
        if _OWN_TMP.fullmatch(p.name) and p.is_file() and not p.is_symlink():
            p.unlink()  # an atomic write's temporary file a killed render left
            continue
        found.append(p.relative_to(out).as_posix())
    return found


def _overlaps(out: Path, other: Path) -> bool:
    a, b = out.resolve(), other.resolve()
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


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
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
            ours = {str(f) for f in doc["files"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BatchmarkError(f"{manifest}: not a readable manifest of batchmark pages ({exc})") from None
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
        if p.is_file() or p.is_symlink():
            p.unlink()
        parent = p.parent
        while parent != out and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    atomic_write_json(out / MANIFEST, {"written_by": "batchmark pages", "files": sorted(now)})
    return [f for f in _files(out) if f not in now]
