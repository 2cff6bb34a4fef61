"""``batchmark batched-bench CONFIG``: llama-batched-bench on the GGUF files a ``llamacpp`` sweep serves, imported.

For each model of a ``backend: llamacpp`` config, the same GGUF the sweep's llama-server serves (the random-weight
folder of its architecture and seed, written and quantized as :class:`pipeline.backends.llamacpp.LlamaCppBackend`
does) is run through llama-batched-bench at the config's shapes (``-npp`` input_len, ``-ntg`` output_len) and its
concurrencies as static batches (``-npl``), with a context that holds the largest batch
(:mod:`pipeline.machine.batchedbench`, which refuses a table that lost rows).  The tables, one per model under a
``## <model>`` heading, are kept in ``data/batched-bench/<run-id>.txt`` (the measurement's log, committed with the
run) and imported as one run (``source: imported:llama-batched-bench``,
:mod:`pipeline.importers.llama_batched_bench`): a static batch of B beside the served sweep's closed loop at c = B,
the same model, file and workload.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipeline.commands import print  # noqa: A004 (control characters escaped)
from pipeline.core.errors import BatchmarkError

#: Where the tables of each run are kept, relative to the project root.
TABLES_DIR = Path("data") / "batched-bench"


def _gguf(cfg: Any, spec: Any) -> Path:
    """The GGUF file the llamacpp backend serves for ``spec`` (written where it is missing)."""
    from pipeline.machine.ggufmodels import gguf_file
    from pipeline.machine.modelfolders import build_model_folder
    from pipeline.machine.serverenv import resolve

    if spec.path is not None:
        return Path(spec.path)
    folder = build_model_folder(spec.name, spec.architecture or {}, cfg.llamacpp.model_dtype, cfg.seed)
    return gguf_file(folder, spec.name, spec.gguf_type or "F16", resolve(cfg.llamacpp.build))


def batched_bench(config: str, run_id: str | None = None, runs_dir: Path | None = None,
                  tables_dir: Path | None = None) -> Path:
    """Run llama-batched-bench on every model of the llamacpp ``config`` and import the tables; return the run folder.

    Raises:
        BatchmarkError: a config of another backend, an unusable llama.cpp environment, a table refused by row
            (:func:`pipeline.machine.batchedbench.run_batched_bench`), a run of that id that exists (runs are never
            overwritten).  Tables kept from an earlier call whose import stopped are imported, not measured again.
    """
    from pipeline.config.sweepconfig import load_config
    from pipeline.importers import import_run
    from pipeline.importers.importoptions import ImportOptions
    from pipeline.machine import llamacppenv
    from pipeline.machine.batchedbench import run_batched_bench
    from pipeline.store.runs import check_run_id

    cfg = load_config(config)
    if cfg.backend != "llamacpp":
        raise BatchmarkError(f"{config}: backend is {cfg.backend!r}; batched-bench runs llama.cpp's tool on a "
                             "backend: llamacpp config's GGUF files")
    run_id = check_run_id(run_id) if run_id else datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-bb"
    shapes = cfg.shapes()
    grid = {"npp": sorted({s.input_len for s in shapes}), "ntg": sorted({s.output_len for s in shapes}),
            "npl": list(cfg.concurrency or [1])}
    n_ctx = max(grid["npl"]) * (max(grid["npp"]) + max(grid["ntg"]))
    tables = (tables_dir or TABLES_DIR) / f"{run_id}.txt"
    if tables.exists():  # measured before, its import stopped: imported now, nothing measured again
        print(f"{tables}: measured already; importing it")
        return import_run("llama-batched-bench", [tables], cfg.hardware, run_id=run_id, runs_dir=runs_dir,
                          options=ImportOptions())
    ok, why = llamacppenv.usable(cfg.llamacpp.build)
    if not ok:
        raise BatchmarkError(f"llamacpp.build: the llama.cpp environment cannot run here: {why}")
    tool = llamacppenv.binary(cfg.llamacpp.build, "llama-batched-bench")
    parts = []
    for spec in cfg.models:
        print(f"{spec.name}: llama-batched-bench -npp {grid['npp']} -ntg {grid['ntg']} -npl {grid['npl']} …")
        one = tables.with_name(f".{tables.stem}.{spec.name}.part")
        try:
            run_batched_bench(tool, _gguf(cfg, spec), one, grid, n_ctx, timeout_s=cfg.llamacpp.timeout_s * len(grid["npl"]))
            parts.append(f"## {spec.name}\n\n{one.read_text()}\n")
        finally:
            one.unlink(missing_ok=True)
    from pipeline.core.atomicfiles import atomic_write_text

    atomic_write_text(tables, "".join(parts))
    return import_run("llama-batched-bench", [tables], cfg.hardware, run_id=run_id, runs_dir=runs_dir,
                      options=ImportOptions())


def add_parser(sub: Any) -> None:
    """The ``batched-bench`` subcommand on the CLI's subparsers ``sub``."""
    s = sub.add_parser("batched-bench", help="run llama-batched-bench on a llamacpp config's GGUF files, imported as a run",
                       description="For each model of a backend: llamacpp config, write the GGUF its sweep serves, run "
                                   "llama-batched-bench at the config's shapes with its concurrencies as static batches "
                                   "(-npl), check that every row the context holds was printed (runs again when "
                                   "llama.cpp's logger lost the last ones), keep the tables in "
                                   "data/batched-bench/<run-id>.txt and import them as one run "
                                   "(source imported:llama-batched-bench).")
    s.add_argument("--config", required=True, help="a backend: llamacpp sweep config (e.g. config/llamacpp-cpu.yaml)")
    s.add_argument("--run-id", help="the run's id (default: the UTC time, suffix -bb); never an existing run's")

    def _run(a: Any) -> int:
        run = batched_bench(a.config, a.run_id)
        print(f"run {run.name} complete (imported:llama-batched-bench; tables in {TABLES_DIR / (run.name + '.txt')})")
        return 0

    s.set_defaults(func=_run)
