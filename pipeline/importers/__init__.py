"""Importers: other tools' benchmark output → an imported run (``source: imported:<format>``).

One module per format beside what they share (:mod:`~pipeline.importers.base`, :mod:`~pipeline.importers.parsing`,
:mod:`~pipeline.importers.checks`, :mod:`~pipeline.importers.cardmatch`); each exposes
``parse(paths, model=None, engine=None) -> ImportResult``.  :func:`import_run` parses and
writes the run atomically.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from pipeline.core.errors import BatchmarkError
from pipeline.importers.importoptions import ImportOptions

#: format name → module under ``pipeline.importers``.
FORMATS = {
    "llama-batched-bench": "llama_batched_bench",
    "vllm-bench": "vllm_bench",
    "llama-benchy": "llama_benchy",
    "guidellm": "guidellm",
    "aiperf": "aiperf",
}


#: Formats whose files state how a run was loaded, where ``--concurrency`` / ``--rate`` can say what a file omits.
LOAD_OPTIONS = ("vllm-bench", "aiperf")
#: Formats whose folders are read with their subfolders (``vllm bench sweep``: one folder per parameter combination).
RECURSIVE = ("vllm-bench",)


def parse(fmt: str, paths: list[str | Path], model: str | None = None, engine: str | None = None,
          max_failure_rate: float | None = None, concurrency: int | None = None, rate: float | None = None):
    """Parse ``paths`` as ``fmt`` into an :class:`~pipeline.importers.base.ImportResult` (no writes).

    ``max_failure_rate``: the largest failed fraction of a point's requests that is still
    imported (default :data:`~pipeline.importers.checks.REFUSAL_FAILURE_RATE`).  ``concurrency`` /
    ``rate`` (``--concurrency``, ``--rate``): what a file that states neither ran at
    (:data:`LOAD_OPTIONS` only).  A folder is read with its subfolders for :data:`RECURSIVE` formats; an aiperf folder
    gives the profile exports in its subfolders (:func:`pipeline.importers.aiperf_runs.export_files`), when it holds any.

    Raises:
        BatchmarkError: unknown format, or a malformed file (names the file and line or field).
    """
    if fmt not in FORMATS:
        raise BatchmarkError(f"format: unknown {fmt!r} (known: {', '.join(FORMATS)})")
    module = import_module(f"pipeline.importers.{FORMATS[fmt]}")
    for opt, value in (("--concurrency", concurrency), ("--rate", rate)):
        if value is not None and fmt not in LOAD_OPTIONS:
            raise BatchmarkError(f"{opt}: only for {' and '.join(LOAD_OPTIONS)} files that state no concurrency or rate; "
                                 f"{fmt} files state it")
    if concurrency is not None and (isinstance(concurrency, bool) or concurrency < 1):
        raise BatchmarkError(f"--concurrency: {concurrency} is not a positive number of requests in flight")
    if rate is not None and not (0 < rate < float("inf")):
        raise BatchmarkError(f"--rate: {rate} is not a positive finite number of requests/s")
    load = {k: v for k, v in (("concurrency", concurrency), ("rate", rate)) if v is not None}
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir() and fmt == "aiperf":
            from pipeline.importers.aiperf_runs import export_files

            exports = export_files(p)  # AIPerf's artifact folders, its multi-run layout's profile_runs/run_NNNN/
            if exports:
                files.extend(exports)
                continue
        if p.is_dir():
            walk = p.rglob("*") if fmt in RECURSIVE else p.iterdir()
            found = sorted(q for q in walk if q.is_file() and not any(part.startswith(".") for part in q.relative_to(p).parts))
            if not found:
                raise BatchmarkError(f"{p}: folder holds no files to import")
            files.extend(found)
        else:
            files.append(p)
    from pipeline.importers.checks import REFUSAL_FAILURE_RATE
    from pipeline.importers.parsing import foreign_file, refuse_special

    for f in files:
        refuse_special(f)  # before the sniffing open below: a FIFO would block it forever
        try:
            with open(f, "rb") as fh:
                head = fh.read(8192).decode("utf-8", errors="replace")
        except OSError:
            continue  # the importer names an unreadable file itself
        other = foreign_file(f, head, fmt)
        if other is not None:
            raise other

    limit = REFUSAL_FAILURE_RATE if max_failure_rate is None else max_failure_rate
    if not 0.0 <= limit <= 1.0:
        raise BatchmarkError(f"--max-failure-rate: {limit} is not a fraction between 0 and 1")
    from pipeline.importers.checks import check_ranges

    result = module.parse(files, model=model, engine=engine, max_failure_rate=limit, **load)
    check_ranges(", ".join(map(str, files)), result.summaries)  # every number range-checked at the boundary
    return result


def import_run(fmt: str, paths: list[str | Path], hardware: str, run_id: str | None = None,
               runs_dir: Path | None = None, options: ImportOptions | None = None) -> Path:
    """Parse another tool's output and store it as a complete run; return the run folder.

    Nothing is written unless every file parses (the run is built in a temporary folder and
    renamed into place).  ``options`` (:class:`~pipeline.importers.base.ImportOptions`): what the command line says
    of the files; its ``quant`` (``--quant``): the weight format of every model of the file,
    over what the file or the model name says (:data:`pipeline.cards.weightformats.QUANT_BITS`); a weight
    file size the file states still gives the bytes.  ``kv_cache`` (``--kv-cache``): the KV-cache dtype the run was
    served with (vLLM ``--kv-cache-dtype fp8``), so its KV bytes per token are counted in it, not in bf16.

    Raises:
        BatchmarkError: a malformed file, an unknown ``quant`` or ``kv_cache`` (one line naming the option).
    """
    from pipeline.importers.base import write_imported_run
    from pipeline.importers.cardmatch import ModelInfo
    from pipeline.cards.weightformats import QUANT_BITS, normalize_quant

    options = options or ImportOptions()
    quant, kv_cache = options.quant, options.kv_cache
    if quant is not None:
        try:
            quant = normalize_quant(quant)
        except BatchmarkError:
            raise BatchmarkError(f"--quant: unknown weight format {quant!r} (known: {', '.join(sorted(QUANT_BITS))})") from None
    if kv_cache is not None:
        from pipeline.cards.servedformat import kv_dtype

        try:
            kv_cache = kv_dtype(kv_cache)
        except ValueError as exc:
            raise BatchmarkError(f"--kv-cache: {str(exc).removeprefix('kv_cache: ')}") from None
    result = parse(fmt, paths, model=options.model, engine=options.engine, max_failure_rate=options.max_failure_rate,
                   concurrency=options.concurrency, rate=options.rate)
    if quant is not None or kv_cache is not None:
        for name in {s.model for s in result.summaries} | set(result.models):
            info = result.models.setdefault(name, ModelInfo(raw_name=name))
            info.quant = quant or info.quant
            info.kv_cache = kv_cache or info.kv_cache
    return write_imported_run(result, hardware, run_id=run_id, runs_dir=runs_dir)
