"""The reference stage: a published measurement outside the repository turned into a stored run the pages read.

The project's reference measurement (llama.cpp's ``llama-batched-bench`` on a DGX Spark,
``../shared/reference/llamacpp-dgx-spark-batched-bench.md`` beside the repository, never
copied into it) is an explicit input of the explainers: this stage imports it with the
``llama-batched-bench`` importer into ``data/reference/<run_id>/`` (git-ignored; a complete
imported run whose files are typed and versioned by :mod:`pipeline.store.schemas` like any run's),
and ``batchmark pages --reference DIR`` hands it to the explainers, which only render it.
Snakemake runs this stage only when the reference file exists; without it the explainers
show the project's own runs and the model cards' rooflines.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pipeline.core import paths
from pipeline.store import runs
from pipeline.core.errors import BatchmarkError
from pipeline.importers import import_run

#: Run id (and folder name) of the imported reference: the name the explainers show it under.
REFERENCE_RUN_ID = "reference-dgx-spark-llamacpp"
REFERENCE_FORMAT = "llama-batched-bench"
REFERENCE_HARDWARE = "dgx-spark"


def shared_reference_file() -> Path:
    """``<root>/../shared/reference/llamacpp-dgx-spark-batched-bench.md``: where the reference lives, if anywhere."""
    return paths.root() / ".." / "shared" / "reference" / "llamacpp-dgx-spark-batched-bench.md"


def reference_run_dir() -> Path:
    """``<root>/data/reference/reference-dgx-spark-llamacpp``: the stage's output (git-ignored)."""
    return paths.data_dir() / "reference" / REFERENCE_RUN_ID


def import_reference(source: Path, out: Path | None = None, hardware: str = REFERENCE_HARDWARE) -> Path:
    """Import the ``llama-batched-bench`` file ``source`` as a complete run at ``out``; return ``out``.

    ``out`` (default :func:`reference_run_dir`) is derived data: a previous import there is
    replaced, atomically (the new run is built in a temporary sibling folder, then swapped in),
    so the pages never read half a reference.  Its run id is ``out``'s folder name.

    Raises:
        BatchmarkError: ``source`` is missing or does not parse (the importer names the file
            and line); unknown hardware profile.
    """
    out = Path(out) if out is not None else reference_run_dir()
    if not Path(source).is_file():
        raise BatchmarkError(f"{source}: reference file not found")
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        built = import_run(REFERENCE_FORMAT, [source], hardware, run_id=out.name, runs_dir=scratch)
        runs.swap_in(built, out)  # the store replaces the previous import
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out
