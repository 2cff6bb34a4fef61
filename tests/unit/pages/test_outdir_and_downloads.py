"""The site publishes only what batchmark wrote and what can be true: links never followed into a download, an
output folder's foreign files never deleted, paths and hostile characters never published raw.

Each test names the fault kind it pins; the inputs are made by breaking a run on purpose (the kinds are those of
public path-traversal and symlink-following reports, e.g. CWE-59 "Improper Link Resolution Before File Access",
https://cwe.mitre.org/data/definitions/59.html, and CWE-1236 "CSV Injection",
https://cwe.mitre.org/data/definitions/1236.html).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from pipeline.core import paths
from pipeline.core.errors import BatchmarkError
from pipeline.store import pointfiles
from tests import runbuilder as rb

SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI-secret-never-published"


def _render(root: Path, out: Path | None = None) -> Path:
    from pipeline.pages.render import render_site

    out = out or root / "site-pages"
    render_site(out, log=lambda m: None)
    return out


def _zip_text(docs: Path, run_id: str) -> str:
    with zipfile.ZipFile(docs / "downloads" / run_id / "records.zip") as zf:
        return "".join(zf.read(n).decode("utf-8", "replace") for n in zf.namelist())


def test_a_link_named_like_a_record_is_never_followed_into_records_zip(scratch_root, tmp_path):
    """CWE-59: a link ``points/<model>/x.parquet`` (not named by any point's JSON, so the run still reads) and a
    linked model folder ``points/evil -> outside`` put the linked file's bytes into ``records.zip``.  The zip holds
    the run's own regular files only: the secret is absent, the real records are there."""
    run = rb.make_run(paths.runs_dir(), "LINKS", models=("dense-a",), concurrency=(1, 2), noise=(1.0,))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "creds.parquet").write_text(SECRET)
    (outside / "p.json").write_text(SECRET)
    (run / "points" / "dense-a" / "stolen.parquet").symlink_to(outside / "creds.parquet")
    docs = _render(scratch_root)
    text = _zip_text(docs, "LINKS")
    assert SECRET not in text
    with zipfile.ZipFile(docs / "downloads" / "LINKS" / "records.zip") as zf:
        names = zf.namelist()
    assert "points/dense-a/stolen.parquet" not in names
    assert sum(n.endswith(".json") for n in names) == 2  # c = 1 and c = 2, the run's own


def test_a_linked_point_record_makes_the_run_unreadable_naming_the_file(scratch_root, tmp_path):
    """CWE-59: a point's JSON that is a link (here to another file outside the run) is refused where it is read,
    one line naming it, so neither its summaries nor its bytes reach the site."""
    run = rb.make_run(paths.runs_dir(), "LINKJ", models=("dense-a",), concurrency=(1,), noise=(1.0,))
    target = tmp_path / "elsewhere.json"
    real = next((run / "points" / "dense-a").glob("*.json"))
    target.write_bytes(real.read_bytes())
    link = run / "points" / "dense-a" / "linked.json"
    link.symlink_to(target)
    with pytest.raises(BatchmarkError, match="linked.json: a symbolic link") as exc:
        pointfiles.point_files(run)
    assert "\n" not in str(exc.value)
    linked_dir = run / "points" / "evil"
    linked_dir.symlink_to(tmp_path)
    link.unlink()
    assert not pointfiles.own_file(run, linked_dir / "elsewhere.json")
    assert pointfiles.own_file(run, real)


def test_pages_out_removes_only_what_it_wrote_and_refuses_foreign_files(scratch_root):
    """Data loss by cleanup: ``pages --out DIR`` deleted every ``*.md`` under ``DIR/models``, ``DIR/runs``,
    ``DIR/changes`` it had not just rendered.  Now: a run gone from the store loses its pages and downloads (they
    are in the manifest), a user's note placed later is refused (named, intact), never deleted."""
    from pipeline.pages import outdir

    rd = paths.runs_dir()
    rb.make_run(rd, "R1", models=("dense-a",), concurrency=(1, 2), noise=(1.0,))
    rb.make_run(rd, "R2", models=("dense-a",), concurrency=(1, 2), noise=(1.0,))
    docs = _render(scratch_root)
    assert (docs / "runs" / "r1.md").is_file() and (docs / outdir.MANIFEST).is_file()
    import shutil

    shutil.rmtree(rd / "R1")
    _render(scratch_root)
    assert not (docs / "runs" / "r1.md").exists() and not (docs / "downloads" / "R1").exists()
    assert (docs / "runs" / "r2.md").is_file()
    note = docs / "models" / "my-notes.md"
    note.write_text("mine")
    with pytest.raises(BatchmarkError, match="my-notes.md, not written by batchmark pages") as exc:
        _render(scratch_root)
    assert "\n" not in str(exc.value) and note.read_text() == "mine"


def test_pages_out_refuses_the_data_folder_and_a_foreign_folder(scratch_root, tmp_path):
    """``--out data`` deleted ``data/models/*.md`` and wrote run pages into ``data/runs/``: refused before a write,
    as is a folder without a manifest holding a file that is no page (a user's folder)."""
    rb.make_run(paths.runs_dir(), "R1", models=("dense-a",), concurrency=(1,), noise=(1.0,))
    data = scratch_root / "data"
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    with pytest.raises(BatchmarkError, match="the run store"):
        _render(scratch_root, data)
    with pytest.raises(BatchmarkError, match="the run store"):
        _render(scratch_root, paths.runs_dir() / "site")
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("x")
    with pytest.raises(BatchmarkError, match="thesis.tex, not a file batchmark pages writes"):
        _render(scratch_root, mine)
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]


def test_a_site_without_manifest_is_taken_over_deleting_nothing(scratch_root):
    """An earlier batchmark's site (no manifest): its pages are rewritten, a page-named file it does not write
    again (a user's ``models/notes.md``) stays, named in the build output, and is refused next time."""
    rb.make_run(paths.runs_dir(), "R1", models=("dense-a",), concurrency=(1,), noise=(1.0,))
    docs = scratch_root / "site-pages"
    (docs / "models").mkdir(parents=True)
    (docs / "models" / "notes.md").write_text("mine")
    logged = []
    from pipeline.pages.render import render_site

    render_site(docs, log=logged.append)
    assert (docs / "models" / "notes.md").read_text() == "mine"
    assert any("models/notes.md" in m for m in logged)
    with pytest.raises(BatchmarkError, match="notes.md, not written by batchmark pages"):
        render_site(docs, log=logged.append)


def test_a_comparisons_every_metric_table_past_its_bound_is_a_csv_download(scratch_root, monkeypatch):
    """Pages over 2 MB at 50 models × 10 runs (2.34 MB): the table of every metric at every point (2,800 rows) left
    the page for ``downloads/changes/<run>.csv`` when it has more than ``EVERY_ROWS_ON_PAGE`` rows.  Two models ×
    5 concurrencies × 8 metrics = 80 rows here, so a bound of 50 moves them; each row is in the CSV."""
    import csv
    import io

    from pipeline.pages import changes

    rd = paths.runs_dir()
    rb.make_run(rd, "20261129T100000Z-a")
    rb.make_run(rd, "20261129T110000Z-b", noise=rb.NOISE_B)
    monkeypatch.setattr(changes, "EVERY_ROWS_ON_PAGE", 50)
    docs = _render(scratch_root)
    page = (docs / "changes" / "20261129t110000z-b.md").read_text()
    table = docs / "downloads" / "changes" / "changes-20261129t110000z-b.csv"
    rows = list(csv.reader(io.StringIO(table.read_text())))
    assert rows[0][:4] == ["model", "io", "c", "metric"] and len(rows) - 1 > 50
    assert "too many for one page" in page and "<tbody>" not in page
    assert "../downloads/changes/changes-20261129t110000z-b.csv" in page
    monkeypatch.setattr(changes, "EVERY_ROWS_ON_PAGE", 10_000)
    page = (_render(scratch_root) / "changes" / "20261129t110000z-b.md").read_text()
    assert "<tbody>" in page and page.count("<tr><td>") == len(rows) - 1
