"""The Guide on the site: the repository's ``docs/`` pages, copied under ``guide/`` of the docs_dir as they are.

``docs/`` is written to be read in two places: in a clone (GitHub renders it, links are relative between its
pages) and on the built site, where ``batchmark pages`` copies every ``docs/**/*.md`` to ``guide/`` keeping
the folders, so the same relative links hold.  ``mkdocs.yml``'s Guide tab lists them;
``tests/unit/pages/test_reference.py`` fails when a ``docs/`` page is in no tab (a new page slots in by a
line in ``nav``).  The Methodology page includes ``docs/definitions.md`` (:func:`included_page`), the one
source of the metric definitions.

Imports nothing of the package but :mod:`pipeline.core` and :mod:`pipeline.store`.
"""

from __future__ import annotations

import re
from pathlib import Path

from markupsafe import Markup

from pipeline.core import paths
from pipeline.store import runs as runs_mod

#: Folder of the docs_dir the Guide is copied to.
GUIDE_DIR = "guide"

_LINK = re.compile(r"\]\((?!https?:|mailto:|#|/)([^)\s]+)\)")


def docs_source(root: Path | None = None) -> Path:
    """The repository's ``docs/`` folder (under ``root``, default the project root)."""
    return (root or paths.root()) / "docs"


def guide_files(source: Path | None = None, leave_out: Path | None = None) -> list[Path]:
    """Every guide page: ``docs/**/*.md`` relative to ``docs/``, sorted; [] where the folder is absent.  Pages under
    ``leave_out`` are not listed (a site rendered into ``docs/`` itself must not copy its own copies)."""
    base = source or docs_source()
    if not base.is_dir():
        return []
    skip = leave_out.resolve() if leave_out is not None else None
    return sorted(p.relative_to(base) for p in base.rglob("*.md")
                  if skip is None or not p.resolve().is_relative_to(skip))


def write_guide(docs_dir: Path, source: Path | None = None) -> list[Path]:
    """Copy every guide page to ``docs_dir/guide/`` (the same relative paths) and remove a copied page whose source
    is gone.  Returns the written paths."""
    base = source or docs_source()
    out = docs_dir / GUIDE_DIR
    written = []
    for rel in guide_files(base, leave_out=out):
        dst = out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        runs_mod.atomic_write_text(dst, (base / rel).read_text())
        written.append(dst)
    keep = set(written)
    for old in out.rglob("*.md") if out.is_dir() else []:
        if old not in keep:
            old.unlink()
    return written


def included_page(name: str, levels: int = 1, source: Path | None = None) -> Markup:
    """The guide page ``name`` (relative to ``docs/``) as Markdown to include in a page at the docs_dir's top:
    every heading ``levels`` deeper (its title becomes a section) and every relative link pointed into
    ``guide/`` (where :func:`write_guide` puts its targets).  The text is the repository's own (not data), so it
    is included as it is."""
    text = ((source or docs_source()) / name).read_text()
    folder = Path(GUIDE_DIR, name).parent.as_posix()
    lines = []
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and re.match(r"#{1,5} ", line):
            line = "#" * levels + line
        lines.append(line)
    body = _LINK.sub(lambda m: f"]({folder}/{m.group(1)})", "\n".join(lines))
    return Markup(body + "\n")
