"""``pages --out DIR`` removes only its own files, inside ``DIR`` (:mod:`pipeline.pages.outdir`).

Fault kinds pinned: data loss by cleanup.  A user's hidden files named like an atomic writer's temporaries
(``.<name>.tmp``) were deleted though batchmark never wrote them; a site folder's manifest (data of that folder: a
site someone sent) naming ``../x``, an absolute path or a file behind a link out of ``DIR`` made the render delete
that file outside ``DIR`` (path traversal, CWE-22, https://cwe.mitre.org/data/definitions/22.html).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core import paths
from pipeline.core.errors import BatchmarkError
from pipeline.pages import outdir
from tests import runbuilder as rb


def _render(out: Path) -> None:
    from pipeline.pages.render import render_site

    render_site(out, log=lambda m: None)


def test_a_users_hidden_tmp_files_are_never_removed(scratch_root):
    """Fault kind: ``.<name>.tmp`` files of the user's deleted as a killed render's temporaries.  Only the shape
    ``tempfile.mkstemp(prefix=".<site file>.", suffix=".tmp")`` gives (8 characters of a-z 0-9 _) is a render's own."""
    rb.make_run(paths.runs_dir(), "R1", models=("dense-a",), concurrency=(1,), noise=(1.0,))
    out = scratch_root / "site-pages"
    _render(out)
    mine = [out / ".notes.tmp", out / ".draft.md.tmp", out / "models" / ".x.tmp", out / ".index.md.old.tmp"]
    for p in mine:
        p.write_text("mine")
    left = out / "runs" / ".r1.md.k2_x9q0z.tmp"  # what atomic_write_text leaves when killed between write and rename
    left.write_text("half a page")
    with pytest.raises(BatchmarkError, match=r"holds .*\.tmp, not written by batchmark pages") as exc:
        _render(out)
    assert "\n" not in str(exc.value)
    assert [p.read_text() for p in mine] == ["mine"] * 4 and not left.exists()


@pytest.mark.parametrize("entry", ["../victim.txt", "ABS", "models/../../victim.txt", "linked/victim.txt"])
def test_a_manifest_naming_a_file_outside_the_folder_never_deletes_it(scratch_root, tmp_path, entry):
    """Fault kind: a manifest entry outside ``DIR`` (``..``, absolute, through a link) deleted there.  The render
    refuses the manifest in one line naming the entry, and the file outside stays."""
    rb.make_run(paths.runs_dir(), "R1", models=("dense-a",), concurrency=(1,), noise=(1.0,))
    out = scratch_root / "site-pages"
    _render(out)
    victim = out.parent / "victim.txt"
    victim.write_text("keep me")
    if entry.startswith("linked/"):
        (out / "linked").symlink_to(out.parent, target_is_directory=True)
        doc_files = json.loads((out / outdir.MANIFEST).read_text())["files"]
        (out / outdir.MANIFEST).write_text(json.dumps({"files": [*doc_files, "linked"]}))  # the link is "its own"
    manifest = out / outdir.MANIFEST
    doc = json.loads(manifest.read_text())
    doc["files"].append(str(victim) if entry == "ABS" else entry)
    manifest.write_text(json.dumps(doc))
    with pytest.raises(BatchmarkError, match="is not a file inside") as exc:
        _render(out)
    assert "\n" not in str(exc.value) and victim.read_text() == "keep me"
